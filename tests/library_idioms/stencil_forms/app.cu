// 2D/3D stencils in forms seen in naive HPC codes (written for mepgen's tests):
//  - heat_source: a 5-point update of one field plus a second field read at the centre (a source term),
//    with the centre value and the neighbour sum held in temporaries (several statements);
//  - two_fields: a 5-point stencil over the sum of two fields (both read at the neighbours);
//  - box7: a 7-point 3D stencil, bounds through macros, the z plane walked by a 2D launch's third axis;
//  - flat_blur: a 2D grid given to a 1D launch, its coordinates recovered with % and / of the flat index;
//  - flip_sites: the same with a 64-bit flat index (a cast in it), the guard an early return on both coordinates,
//    and neighbours that wrap around the edges (a lattice update by colour).
//  - wave_pair: two wavefields stepped together, each through a radius-2 star stencil weighted by a small
//    coefficient array, a thread per point with one plane per grid z (a block of depth 1), unsigned indices.
// Builds alone: nvcc -O3 -arch=sm_90 app.cu
#include <cstdio>
#include <cuda_runtime.h>

#define GX 2048
#define GY 2048
#define DX 256
#define DY 256
#define DZ 256
#define AT3(x, y, z) ((z) * DX * DY + (y) * DX + (x))

__global__ void heat_source(int nx, int ny, float k, const float *t_old, const float *q, float *t_new)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x > 0 && x < nx - 1 && y > 0 && y < ny - 1) {
        float centre = t_old[y * nx + x];
        float around = t_old[y * nx + x - 1] + t_old[y * nx + x + 1] + t_old[(y - 1) * nx + x] + t_old[(y + 1) * nx + x];
        t_new[y * nx + x] = centre + k * (around - 4.0f * centre) + q[y * nx + x];
    }
}

__global__ void two_fields(int nx, int ny, const float *a, const float *b, float *out)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= 1 && x < nx - 1 && y >= 1 && y < ny - 1)
        out[y * nx + x] = 0.25f * (a[y * nx + x - 1] + b[y * nx + x - 1] + a[y * nx + x + 1] + b[y * nx + x + 1]
                                   + a[(y - 1) * nx + x] + b[(y - 1) * nx + x] + a[(y + 1) * nx + x] + b[(y + 1) * nx + x]);
}

__global__ void box7(const float *in, float *out)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x > 0 && x < DX - 1 && y > 0 && y < DY - 1 && z > 0 && z < DZ - 1)
        out[AT3(x, y, z)] = 0.4f * in[AT3(x, y, z)] + 0.1f * (in[AT3(x - 1, y, z)] + in[AT3(x + 1, y, z)]
                            + in[AT3(x, y - 1, z)] + in[AT3(x, y + 1, z)] + in[AT3(x, y, z - 1)] + in[AT3(x, y, z + 1)]);
}

__global__ void flat_blur(int w, int h, const float *src, float *dst)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < w * h) {
        int px = t % w;
        int py = t / w;
        float s = src[t];
        if (px > 0) s += src[t - 1];
        if (px < w - 1) s += src[t + 1];
        if (py > 0) s += src[t - w];
        dst[t] = 0.25f * s;
    }
}

__global__ void flip_sites(signed char *spin, const signed char *other, const float *noise, float beta,
                           long long rows, long long cols)
{
    const long long id = static_cast<long long>(blockDim.x) * blockIdx.x + threadIdx.x;
    const int r = id / cols;
    const int c = id % cols;
    if (r >= rows || c >= cols) return;
    int up = (r > 0) ? r - 1 : rows - 1;
    int down = (r + 1 < rows) ? r + 1 : 0;
    int side = (r % 2) ? ((c + 1 < cols) ? c + 1 : 0) : ((c > 0) ? c - 1 : cols - 1);
    signed char sum = other[up * cols + c] + other[r * cols + c] + other[down * cols + c] + other[r * cols + side];
    signed char s = spin[r * cols + c];
    if (noise[r * cols + c] < expf(-2.0f * beta * sum * s)) spin[r * cols + c] = -s;
}

__global__ void wave_pair(const float *p, const float *r, const float *w, const float *vel, float *p_next,
                          float *r_next)
{
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned y = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= 2 && x < DX - 2 && y >= 2 && y < DY - 2 && z >= 2 && z < DZ - 2) {
        float lp = w[0] * p[AT3(x, y, z)]
                 + w[1] * (p[AT3(x - 1, y, z)] + p[AT3(x + 1, y, z)] + p[AT3(x, y - 1, z)] + p[AT3(x, y + 1, z)]
                           + p[AT3(x, y, z - 1)] + p[AT3(x, y, z + 1)])
                 + w[2] * (p[AT3(x - 2, y, z)] + p[AT3(x + 2, y, z)] + p[AT3(x, y - 2, z)] + p[AT3(x, y + 2, z)]
                           + p[AT3(x, y, z - 2)] + p[AT3(x, y, z + 2)]);
        float lr = w[0] * r[AT3(x, y, z)]
                 + w[1] * (r[AT3(x, y, z - 1)] + r[AT3(x, y, z + 1)] + r[AT3(x - 1, y, z)] + r[AT3(x + 1, y, z)]
                           + r[AT3(x, y - 1, z)] + r[AT3(x, y + 1, z)]);
        p_next[AT3(x, y, z)] = 2.0f * p[AT3(x, y, z)] - p_next[AT3(x, y, z)] + vel[AT3(x, y, z)] * lp;
        r_next[AT3(x, y, z)] = 2.0f * r[AT3(x, y, z)] - r_next[AT3(x, y, z)] + vel[AT3(x, y, z)] * lr;
    }
}

int main()
{
    float *f0, *f1, *f2, *v0, *v1;
    cudaMalloc(&f0, sizeof(float) * GX * GY);
    cudaMalloc(&f1, sizeof(float) * GX * GY);
    cudaMalloc(&f2, sizeof(float) * GX * GY);
    cudaMalloc(&v0, sizeof(float) * DX * DY * DZ);
    cudaMalloc(&v1, sizeof(float) * DX * DY * DZ);
    cudaMemset(f0, 0, sizeof(float) * GX * GY);
    cudaMemset(f1, 0, sizeof(float) * GX * GY);
    cudaMemset(v0, 0, sizeof(float) * DX * DY * DZ);
    dim3 b2(32, 8);
    dim3 g2((GX + 31) / 32, (GY + 7) / 8);
    heat_source<<<g2, b2>>>(GX, GY, 0.1f, f0, f1, f2);
    two_fields<<<g2, b2>>>(GX, GY, f0, f1, f2);
    flat_blur<<<(GX * GY + 255) / 256, 256>>>(GX, GY, f0, f2);
    signed char *s0, *s1;
    cudaMalloc(&s0, GX * GY);
    cudaMalloc(&s1, GX * GY);
    cudaMemset(s0, 1, GX * GY);
    cudaMemset(s1, 1, GX * GY);
    flip_sites<<<(GX * (GY / 2) + 127) / 128, 128>>>(s0, s1, f0, 0.4f, GX, GY / 2);
    dim3 b3(32, 4, 2);
    dim3 g3(DX / 32, DY / 4, DZ / 2);
    box7<<<g3, b3>>>(v0, v1);
    float *v2, *v3, *v4, *wts;
    cudaMalloc(&v2, sizeof(float) * DX * DY * DZ);
    cudaMalloc(&v3, sizeof(float) * DX * DY * DZ);
    cudaMalloc(&v4, sizeof(float) * DX * DY * DZ);
    cudaMalloc(&wts, sizeof(float) * 3);
    dim3 b4(16, 16, 1);
    dim3 g4((DX + 15) / 16, (DY + 15) / 16, DZ);
    wave_pair<<<g4, b4>>>(v0, v1, wts, v2, v3, v4);
    cudaError_t e = cudaDeviceSynchronize();
    printf("%s\n", e == cudaSuccess ? "ok" : cudaGetErrorString(e));
    cudaFree(f0); cudaFree(f1); cudaFree(f2); cudaFree(v0); cudaFree(v1); cudaFree(s0); cudaFree(s1);
    cudaFree(v2); cudaFree(v3); cudaFree(v4); cudaFree(wts);
    return e == cudaSuccess ? 0 : 1;
}
