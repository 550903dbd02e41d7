// kernel.cu of the MEP heat.diffuse_step (hand-written test fixture)
#ifndef NX
#define NX 2048
#endif
#ifndef NY
#define NY 2048
#endif
namespace heat {
struct Grid { int nx; int ny; float dx; float dy; };
__device__ __forceinline__ float lap5(const float* u, int i, int j, int nx, float cx, float cy)
{
    const float c = u[j * nx + i];
    return cx * (u[j * nx + (i - 1)] - 2.0f * c + u[j * nx + (i + 1)])
         + cy * (u[(j - 1) * nx + i] - 2.0f * c + u[(j + 1) * nx + i]);
}
__constant__ float c_stencil[5];
__constant__ Grid c_grid;
__global__ void diffuse_step(const float* __restrict__ u, float* __restrict__ u_new, Grid g, float alpha, float dt)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i > 0 && i < g.nx - 1 && j > 0 && j < g.ny - 1) {
        const int idx = j * g.nx + i;
        const float uc = u[idx];
        const float diffusion = alpha * lap5(u, i, j, g.nx, 1.0f / (g.dx * g.dx), 1.0f / (g.dy * g.dy));
        const float advection = c_stencil[0] * uc + c_stencil[1] * u[idx - 1] + c_stencil[2] * u[idx + 1]
                              + c_stencil[3] * u[idx - g.nx] + c_stencil[4] * u[idx + g.nx];
        u_new[idx] = uc + dt * (diffusion + advection);
    }
}
}  // namespace heat
