// Style C: 1D work launched on a 2D grid of 256x1 blocks; early returns and nested guards.
#include <cstdio>
#include <cuda_runtime.h>
#define N 1024

__global__ void prod(const float* X, const float* Y, float* Z, int m, int n, int q)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= m || c >= n) return;
    float t = 0.0f;
    for (int p = 0; p < q; p++)
        t += X[r * q + p] * Y[p * n + c];
    Z[r * n + c] = t;
}

__global__ void rowdot(const float* M, const float* v, float* w, int n)
{
    int r = threadIdx.x + blockIdx.x * blockDim.x;
    if (r >= n)
        return;
    float t = 0.0f;
    for (int c = 0; c < n; c++) t += M[r * n + c] * v[c];
    w[r] = t;
}

__global__ void maskdot(const float* M, const float* v, float* w, int n)
{
    int r = threadIdx.x + blockIdx.x * blockDim.x;
    if (r >= n)
        return;
    float t = 0.0f;
    for (int c = 0; c < n; c++) {
        if (M[r * n + c] != 0.0f) {
            t += M[r * n + c] * v[c];
        }
    }
    w[r] = t;
}

__global__ void colsum(const float* M, float* s, int nr, int nc)
{
    int c = blockDim.x * blockIdx.x + threadIdx.x;
    if (c < nc) {
        float t = 0.0f;
        for (int r = 0; r < nr; r++) t += M[r * nc + c];
        s[c] = t;
    }
}

__global__ void relax(const float* u, float* v, int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x < 1 || x >= nx - 1) return;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (y >= 1) {
        if (y < ny - 1) {
            v[y * nx + x] = 0.2f * (u[y * nx + x] + u[y * nx + x - 1] + u[y * nx + x + 1]
                                    + u[(y - 1) * nx + x] + u[(y + 1) * nx + x]);
        }
    }
}

__global__ void turn(float* g, int n)
{
    const int ring = threadIdx.x + blockDim.x * blockIdx.x;
    if (ring >= n / 2)
        return;
    const int lo = ring, hi = n - 1 - ring;
    for (int k = lo; k < hi; ++k) {
        const int back = hi - (k - lo);
        const float keep = g[lo * n + k];
        g[lo * n + k] = g[back * n + lo];
        g[back * n + lo] = g[hi * n + back];
        g[hi * n + back] = g[k * n + hi];
        g[k * n + hi] = keep;
    }
}

__global__ void nearest(const float* P, const float* C, float* s, int* at, int np, int nc, int nf)
{
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i >= np)
        return;
    float best = 3.0e38f;
    int pick = -1;
    for (int j = 0; j < nc; j++) {
        float d = 0.0f;
        for (int k = 0; k < nf; k++) {
            float t = P[i * nf + k] - C[j * nf + k];
            d += t * t;
        }
        if (d < best) {
            best = d;
            pick = j;
        }
    }
    s[i] = best;
    at[i] = pick;
}

int main()
{
    float *X, *Y, *Z, *v, *w;
    cudaMalloc(&X, sizeof(float) * N * N);
    cudaMalloc(&Y, sizeof(float) * N * N);
    cudaMalloc(&Z, sizeof(float) * N * N);
    cudaMalloc(&v, sizeof(float) * N);
    cudaMalloc(&w, sizeof(float) * N);
    int *lab;
    cudaMalloc(&lab, sizeof(int) * N);
    dim3 b2(32, 8), g2((N + 31) / 32, (N + 7) / 8);
    dim3 b1(256, 1), g1((N + 255) / 256, 1);
    prod<<<g2, b2>>>(X, Y, Z, N, N, N);
    rowdot<<<g1, b1>>>(X, v, w, N);
    maskdot<<<g1, b1>>>(X, v, w, N);
    colsum<<<g1, b1>>>(X, w, N, N);
    relax<<<g2, b2>>>(X, Z, N, N);
    turn<<<g1, b1>>>(X, N);
    nearest<<<g1, b1>>>(X, Y, w, lab, N, N, 16);
    cudaDeviceSynchronize();
    std::printf("done\n");
    return 0;
}
