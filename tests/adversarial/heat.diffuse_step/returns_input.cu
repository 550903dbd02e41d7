// ADVERSARY: returns its input unchanged (skips the update) | EXPECT: wrong_result
#ifndef NX
#define NX 2048
#endif
#ifndef NY
#define NY 2048
#endif
namespace heat {
struct Grid { int nx; int ny; float dx; float dy; };
enum class BoundaryKind : int { Dirichlet = 0, Neumann = 1 };
__constant__ float c_stencil[5];
__constant__ Grid c_grid;
__global__ void diffuse_step(const float* __restrict__ u, float* __restrict__ u_new, Grid g, float alpha, float dt)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i > 0 && i < g.nx - 1 && j > 0 && j < g.ny - 1) u_new[j * g.nx + i] = u[j * g.nx + i];
}
}  // namespace heat
