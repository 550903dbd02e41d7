// HOSTILE: an inline static data member whose constructor runs at load time | EXPECT: rules
#include <cstdlib>
struct Holder { struct Run { Run() { std::getenv("HOME"); } }; static inline Run run{}; };
namespace cg {
template <typename T>
__global__ void axpy(int n, T a, const T* x, T* y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
}  // namespace cg
