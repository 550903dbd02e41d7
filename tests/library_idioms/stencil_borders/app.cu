// Stencils whose borders are handled in the kernel rather than by an interior-only guard (written for mepgen's
// tests; the forms follow what naive public codes do):
//  - interior_update: the thread indices start at the first interior point (`... + threadIdx.x + 1`), so the
//    guard only bounds them from above; two fields, a function-like macro for the index;
//  - zero_edges: a 2D grid given to a 1D launch (`% n`, `/ n`), each neighbour read only where it exists
//    (`x > 0 ? v[...] : 0`), the missing ones counting as zero;
//  - masked_sum: a 2D launch over the whole grid, neighbours added under `if` statements;
//  - planes: a 3D 7-point stencil launched with one thread per z plane (`dim3 block(16, 16, 1)`, grid.z = nz);
//  - wrong_side: like masked_sum, but the right neighbour is read under the left border's test (the tiling
//    must refuse: that read can leave the grid).
// Builds alone: nvcc -O3 -arch=sm_90 app.cu
#include <cstdio>
#include <cuda_runtime.h>

#define NX 2048
#define NY 2048
#define CELL(r, c) ((r) * nx + (c))

__global__ void interior_update(const double *a, const double *b, double *a_next, double *b_next,
                                int nx, int ny, double kx, double ky)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y + 1;
    int col = blockIdx.x * blockDim.x + threadIdx.x + 1;
    if (col < nx - 1 && row < ny - 1) {
        double lap = a[CELL(row, col - 1)] + a[CELL(row, col + 1)] - 2.0 * a[CELL(row, col)];
        a_next[CELL(row, col)] = a[CELL(row, col)] + kx * lap
                                 + ky * (a[CELL(row - 1, col)] + a[CELL(row + 1, col)] - 2.0 * a[CELL(row, col)]);
        b_next[CELL(row, col)] = b[CELL(row, col)] + kx * (a[CELL(row, col)] - b[CELL(row, col)]);
    }
}

__global__ void zero_edges(unsigned int n, float w, const float *v, float *out)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n * n) {
        int x = t % n;
        int y = t / n;
        out[x + y * n] = (1.0f - 4.0f * w) * v[x + y * n]
                         + w * ((x > 0) ? v[x - 1 + y * n] : 0.0f)
                         + w * ((x < n - 1) ? v[x + 1 + y * n] : 0.0f)
                         + w * ((y > 0) ? v[x + (y - 1) * n] : 0.0f)
                         + w * ((y < n - 1) ? v[x + (y + 1) * n] : 0.0f);
    }
}

__global__ void masked_sum(int w, int h, const float *src, float *dst)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) {
        float s = src[y * w + x];
        if (x >= 1) s += src[y * w + x - 1];
        if (x + 1 < w) { }
        if (x <= w - 2) s += src[y * w + x + 1];
        if (y >= 1 && x >= 1) s += src[(y - 1) * w + x - 1];
        if (y < h - 1) s += src[(y + 1) * w + x];
        dst[y * w + x] = 0.2f * s;
    }
}

__global__ void planes(const float *p, float *q, int nx, int ny, int nz)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= 1 && x < nx - 1 && y >= 1 && y < ny - 1 && z >= 1 && z < nz - 1) {
        int c = (z * ny + y) * nx + x;
        q[c] = 0.5f * p[c] + 0.125f * (p[c - 1] + p[c + 1] + p[c - nx] + p[c + nx]) - 0.0625f * (p[c - nx * ny] + p[c + nx * ny]);
    }
}

__global__ void wrong_side(int w, int h, const float *src, float *dst)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) {
        float s = src[y * w + x];
        if (x > 0) s += src[y * w + x + 1];
        dst[y * w + x] = 0.5f * s;
    }
}

int main()
{
    double *a, *b, *a2, *b2;
    float *f, *g;
    cudaMalloc(&a, sizeof(double) * NX * NY);
    cudaMalloc(&b, sizeof(double) * NX * NY);
    cudaMalloc(&a2, sizeof(double) * NX * NY);
    cudaMalloc(&b2, sizeof(double) * NX * NY);
    cudaMalloc(&f, sizeof(float) * NX * NY);
    cudaMalloc(&g, sizeof(float) * NX * NY);
    cudaMemset(a, 0, sizeof(double) * NX * NY);
    cudaMemset(b, 0, sizeof(double) * NX * NY);
    cudaMemset(f, 0, sizeof(float) * NX * NY);
    dim3 block(16, 16);
    dim3 inner((NX - 2 + 15) / 16, (NY - 2 + 15) / 16);
    interior_update<<<inner, block>>>(a, b, a2, b2, NX, NY, 0.1, 0.2);
    zero_edges<<<(NX * NX + 255) / 256, 256>>>(NX, 0.2f, f, g);
    dim3 whole((NX + 15) / 16, (NY + 15) / 16);
    masked_sum<<<whole, block>>>(NX, NY, f, g);
    wrong_side<<<whole, block>>>(NX, NY, f, g);
    dim3 flat(16, 16, 1);
    dim3 layers((256 + 15) / 16, (256 + 15) / 16, 64);
    planes<<<layers, flat>>>(f, g, 256, 256, 64);
    cudaDeviceSynchronize();
    printf("done\n");
    return 0;
}
