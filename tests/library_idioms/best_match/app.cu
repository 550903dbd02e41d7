// Best-element scans, a thread per output (written for mepgen's tests):
//  - best_match: for each point of A, the point of B with the largest inner product (the first one on ties),
//    no guard, launched on exactly NA threads (split_argmax applies);
//  - closest: the nearest point of B by squared distance, a running minimum with `<` (applies);
//  - guarded_best: best_match inside `if (i < na)` (the combining barrier would sit under a guard: refused);
//  - last_best: `>=` keeps the last best, not the first (refused: the combine keeps the first);
//  - nearest_centroid: points stored feature by feature, the squared distance summed into a local and copied into
//    the compared variable (declared after the sum), under a guard (tile_argmax applies).
// Builds alone: nvcc -O3 -arch=sm_90 app.cu
#include <cstdio>
#include <cuda_runtime.h>

#define NA 4096
#define NB 8192
#define DIM 16
#define NC 100
#define NF 20

__global__ void best_match(const float *A, const float *B, float *score, int *where)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float top = -1e30f;
    int pick = -1;
    for (int j = 0; j < NB; j++) {
        float dot = 0.0f;
        for (int d = 0; d < DIM; d++)
            dot += A[i * DIM + d] * B[j * DIM + d];
        if (dot > top) {
            top = dot;
            pick = j;
        }
    }
    score[i] = top;
    where[i] = pick;
}

__global__ void closest(const float *A, const float *B, int *where)
{
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    float near = 3.0e38f;
    int which = 0;
    for (int j = 0; j < NB; ++j) {
        float dist = 0.0f;
        for (int d = 0; d < DIM; ++d) {
            float t = A[i * DIM + d] - B[j * DIM + d];
            dist += t * t;
        }
        if (dist < near) {
            near = dist;
            which = j;
        }
    }
    where[i] = which;
}

__global__ void guarded_best(const float *A, const float *B, int *where, int na)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < na) {
        float top = -1e30f;
        int pick = -1;
        for (int j = 0; j < NB; j++) {
            float dot = 0.0f;
            for (int d = 0; d < DIM; d++)
                dot += A[i * DIM + d] * B[j * DIM + d];
            if (dot > top) {
                top = dot;
                pick = j;
            }
        }
        where[i] = pick;
    }
}

__global__ void last_best(const float *A, const float *B, int *where)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float top = -1e30f;
    int pick = -1;
    for (int j = 0; j < NB; j++) {
        float dot = 0.0f;
        for (int d = 0; d < DIM; d++)
            dot += A[i * DIM + d] * B[j * DIM + d];
        if (dot >= top) {
            top = dot;
            pick = j;
        }
    }
    where[i] = pick;
}

__global__ void nearest_centroid(const float *pts, const float *cent, int *label, int npts)
{
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < npts) {
        int best = 0;
        float bestd = 3.0e38f;
        for (int c = 0; c < NC; c++) {
            float acc = 0.0f;
            for (int f = 0; f < NF; f++)
                acc += (pts[f * npts + p] - cent[c * NF + f]) * (pts[f * npts + p] - cent[c * NF + f]);
            float d = acc;
            if (d < bestd) {
                bestd = d;
                best = c;
            }
        }
        label[p] = best;
    }
}

int main()
{
    float *a, *b, *s;
    int *w;
    cudaMalloc(&a, NA * DIM * sizeof(float));
    cudaMalloc(&b, NB * DIM * sizeof(float));
    cudaMalloc(&s, NA * sizeof(float));
    cudaMalloc(&w, NA * sizeof(int));
    best_match<<<NA / 128, 128>>>(a, b, s, w);
    closest<<<NA / 256, 256>>>(a, b, w);
    guarded_best<<<(NA + 127) / 128, 128>>>(a, b, w, NA);
    last_best<<<NA / 128, 128>>>(a, b, w);
    nearest_centroid<<<(NA + 255) / 256, 256>>>(a, b, w, NA);
    cudaDeviceSynchronize();
    printf("done\n");
    return 0;
}
