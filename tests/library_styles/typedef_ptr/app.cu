// Style D: a typedef'd element type, `T *a` pointers without const, bounds in a struct-free mix of forms.
#include <cstdio>
#include <cuda_runtime.h>
#define N 1024
typedef float real;

__global__ void prod(real *X, real *Y, real *Z, int m, int n, int q)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (c < n && r < m) {
        real t = 0;
        for (int p = 0; p < q; ++p) t += X[p + r * q] * Y[c + p * n];
        Z[r * n + c] = t;
    }
}

__global__ void rowdot(real *M, real *v, real *w, int n)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n) {
        real t = 0;
        for (int c = 0; c < n; ++c) t += M[r * n + c] * v[c];
        w[r] = t;
    }
}

__global__ void maskdot(real *M, real *v, real *w, size_t n)
{
    size_t r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n) {
        real t = 0;
        for (size_t c = 0; c < n; c++)
            if (M[r * n + c] != (real)0) t += M[r * n + c] * v[c];
        w[r] = t;
    }
}

__global__ void colsum(real *M, real *s, int nr, int nc)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < nc) {
        real t = 0;
        for (int r = 0; r < nr; ++r) t += M[c + r * nc];
        s[c] = t;
    }
}

__global__ void relax(real *u, real *v, int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x > 0 && y > 0 && x < nx - 1 && y < ny - 1) {
        v[y * nx + x] = (real)0.2 * (u[y * nx + x] + u[y * nx + x - 1] + u[y * nx + x + 1]
                                     + u[(y - 1) * nx + x] + u[(y + 1) * nx + x]);
    }
}

__global__ void turn(real *g, int n)
{
    int ring = blockIdx.x * blockDim.x + threadIdx.x;
    if (ring < n / 2) {
        int lo = ring;
        int hi = n - 1 - ring;
        for (int k = lo; k < hi; k++) {
            int back = hi - (k - lo);
            real keep = g[lo * n + k];
            g[lo * n + k] = g[back * n + lo];
            g[back * n + lo] = g[hi * n + back];
            g[hi * n + back] = g[k * n + hi];
            g[k * n + hi] = keep;
        }
    }
}

__global__ void nearest(real *P, real *C, real *s, int *at, int np, int nc, int nf)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < np) {
        real best = 3.0e38f;
        int pick = -1;
        for (int j = 0; j < nc; ++j) {
            real d = 0;
            for (int k = 0; k < nf; ++k) {
                real t = P[k + i * nf] - C[k + j * nf];
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
    real *X, *Y, *Z, *v, *w;
    cudaMalloc(&X, sizeof(real) * N * N);
    cudaMalloc(&Y, sizeof(real) * N * N);
    cudaMalloc(&Z, sizeof(real) * N * N);
    cudaMalloc(&v, sizeof(real) * N);
    cudaMalloc(&w, sizeof(real) * N);
    int *lab;
    cudaMalloc(&lab, sizeof(int) * N);
    dim3 b2(16, 16), g2((N + 15) / 16, (N + 15) / 16);
    prod<<<g2, b2>>>(X, Y, Z, N, N, N);
    rowdot<<<(N + 127) / 128, 128>>>(X, v, w, N);
    maskdot<<<(N + 127) / 128, 128>>>(X, v, w, N);
    colsum<<<(N + 127) / 128, 128>>>(X, w, N, N);
    relax<<<g2, b2>>>(X, Z, N, N);
    turn<<<(N / 2 + 127) / 128, 128>>>(X, N);
    nearest<<<(N + 255) / 256, 256>>>(X, Y, w, lab, N, N, 16);
    cudaDeviceSynchronize();
    std::printf("done\n");
    return 0;
}
