// Style A: const indices, declared loop counters, parameters as bounds.
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#define N 1024

__global__ void prod(const float* X, const float* Y, float* Z, int m, int n, int q)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < m && c < n) {
        float t = 0.0f;
        for (int p = 0; p < q; ++p) {
            t += X[r * q + p] * Y[p * n + c];
        }
        Z[r * n + c] = t;
    }
}

__global__ void rowdot(const float* M, const float* v, float* w, int n)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n) {
        float t = 0.0f;
        for (int c = 0; c < n; ++c) t += M[r * n + c] * v[c];
        w[r] = t;
    }
}

// the row sum skips the matrix's zeros (a sparse-minded dense product)
__global__ void maskdot(const float* M, const float* v, float* w, int n)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n) {
        float t = 0.0f;
        for (int c = 0; c < n; ++c)
            if (M[r * n + c] != 0.0f) t += M[r * n + c] * v[c];
        w[r] = t;
    }
}

__global__ void colsum(const float* M, float* s, int nr, int nc)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < nc) {
        float t = 0.0f;
        for (int r = 0; r < nr; ++r) t += M[r * nc + c];
        s[c] = t;
    }
}

__global__ void relax(const float* u, float* v, int nx, int ny)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= 1 && x < nx - 1 && y >= 1 && y < ny - 1) {
        v[y * nx + x] = 0.2f * (u[y * nx + x] + u[y * nx + x - 1] + u[y * nx + x + 1]
                                + u[(y - 1) * nx + x] + u[(y + 1) * nx + x]);
    }
}

__global__ void turn(float* g, int n)
{
    int ring = blockIdx.x * blockDim.x + threadIdx.x;
    if (ring < n / 2) {
        int lo = ring;
        int hi = n - 1 - ring;
        for (int k = lo; k < hi; ++k) {
            int back = hi - (k - lo);
            float keep = g[lo * n + k];
            g[lo * n + k] = g[back * n + lo];
            g[back * n + lo] = g[hi * n + back];
            g[hi * n + back] = g[k * n + hi];
            g[k * n + hi] = keep;
        }
    }
}

// the element type a template parameter, launched in half precision: `a * b` is cuda_fp16's operator*
template <typename T>
__global__ void hprod(const T* X, const T* Y, T* Z, int m, int n, int q)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < m && c < n) {
        T t = 0;
        for (int p = 0; p < q; ++p)
            t += X[r * q + p] * Y[p * n + c];
        Z[r * n + c] = t;
    }
}

// the nearest row of C to each row of P by squared distance (the first on ties): a best-element scan
__global__ void nearest(const float* P, const float* C, float* s, int* at, int np, int nc, int nf)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < np) {
        float best = 3.0e38f;
        int pick = -1;
        for (int j = 0; j < nc; ++j) {
            float d = 0.0f;
            for (int k = 0; k < nf; ++k) {
                const float t = P[i * nf + k] - C[j * nf + k];
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
}

int main()
{
    float *X, *Y, *Z, *v, *w;
    cudaMalloc(&X, sizeof(float) * N * N);
    cudaMalloc(&Y, sizeof(float) * N * N);
    cudaMalloc(&Z, sizeof(float) * N * N);
    cudaMalloc(&v, sizeof(float) * N);
    cudaMalloc(&w, sizeof(float) * N);
    dim3 b2(16, 16), g2((N + 15) / 16, (N + 15) / 16);
    prod<<<g2, b2>>>(X, Y, Z, N, N, N);
    __half *HX, *HY, *HZ;
    cudaMalloc(&HX, sizeof(__half) * N * N);
    cudaMalloc(&HY, sizeof(__half) * N * N);
    cudaMalloc(&HZ, sizeof(__half) * N * N);
    int *lab;
    cudaMalloc(&lab, sizeof(int) * N);
    hprod<__half><<<g2, b2>>>(HX, HY, HZ, N, N, N);
    rowdot<<<(N + 255) / 256, 256>>>(X, v, w, N);
    maskdot<<<(N + 255) / 256, 256>>>(X, v, w, N);
    colsum<<<(N + 255) / 256, 256>>>(X, w, N, N);
    relax<<<g2, b2>>>(X, Z, N, N);
    turn<<<(N / 2 + 127) / 128, 128>>>(X, N);
    nearest<<<(N + 255) / 256, 256>>>(X, Y, w, lab, N, N, 16);
    cudaDeviceSynchronize();
    std::printf("done\n");
    return 0;
}
