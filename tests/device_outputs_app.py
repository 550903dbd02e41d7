"""Kernels whose results are `__device__` variables (the host reads them with cudaMemcpyFromSymbol), written in this
project's own words: shared by the static completion tests (tests/mep/test_mep_device_outputs.py) and the GPU judge
test (tests/evaluate/test_evaluate_device_outputs_gpu.py)."""

# a warp minimum and a warp sum left in two `__device__` scalars
MIN_AND_SUM = """
__device__ unsigned int lowest;
__device__ float total;

__global__ void min_and_sum(const int* v, const float* w, int n) {
  unsigned m = v[threadIdx.x];
  for (int o = 16; o > 0; o /= 2) m = min(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x == 0) lowest = m;
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += 32) s += w[i];
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x == 0) total = s;
}
"""

# the application around it alone
MIN_AND_SUM_APP = "#include <cstdio>\n" + MIN_AND_SUM + """
int main() {
  const int n = 1 << 16;
  int* v; float* w;
  cudaMalloc(&v, n * sizeof(int)); cudaMalloc(&w, n * sizeof(float));
  min_and_sum<<<1, 32>>>(v, w, n);
  unsigned lo; cudaMemcpyFromSymbol(&lo, lowest, sizeof(lo));
  printf("%u\\n", lo);
  return 0;
}
"""
