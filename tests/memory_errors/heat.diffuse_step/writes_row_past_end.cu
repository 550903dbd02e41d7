// OOB: the last inner row also writes two rows down, one row past the end of u_new | EXPECT: out_of_bounds u_new after
#ifndef NX
#define NX 2048
#endif
#ifndef NY
#define NY 2048
#endif
namespace heat {
struct Grid { int nx; int ny; float dx; float dy; };
__constant__ float c_stencil[5];
__global__ void diffuse_step(const float* __restrict__ u, float* __restrict__ u_new, Grid g, float alpha, float dt)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i > 0 && i < g.nx - 1 && j > 0 && j < g.ny - 1) {
        const int idx = j * g.nx + i;
        const float uc = u[idx];
        const float lap = (u[idx - 1] - 2.0f * uc + u[idx + 1]) / (g.dx * g.dx)
                        + (u[idx - g.nx] - 2.0f * uc + u[idx + g.nx]) / (g.dy * g.dy);
        const float adv = c_stencil[0] * uc + c_stencil[1] * u[idx - 1] + c_stencil[2] * u[idx + 1]
                        + c_stencil[3] * u[idx - g.nx] + c_stencil[4] * u[idx + g.nx];
        float v = uc + dt * (alpha * lap + adv);
        u_new[idx] = v;
        if (j == g.ny - 2) u_new[idx + 2 * g.nx] = v;
    }
}
}  // namespace heat
