// peaks.cu -- measure what one GPU can actually do: DRAM bandwidth (copy and read-only streams over
// buffers far larger than L2) and FP32/FP64 FMA throughput. mepgen runs it once per GPU and driver,
// caches the numbers, and flags any candidate that claims to beat them. Also the streaming curve: one read-only
// and one copy launch over 4 MiB .. 512 MiB, each timed as the MEP harness times a kernel (after the L2 flush
// of templates/harness/l2_flush.h, events around the one launch): what a perfect streaming kernel of that many
// bytes reaches, launch and ramp included. Prints one JSON line.
#include <algorithm>
#include <cstdio>
#include <string>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    std::printf("{\"status\": \"cuda_error\", \"error\": \"%s\", \"call\": \"%s\"}\n", cudaGetErrorName(e_), #x); \
    return 3; } } while (0)

__global__ void copy_kernel(const float4* __restrict__ a, float4* __restrict__ b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        b[i] = a[i];
}

__global__ void read_kernel(const float4* __restrict__ a, float* out, size_t n)
{
    float s = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = a[i];
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 1234.5f) out[0] = s;   // never true for the zeroed buffer; keeps the loads alive
}

template <typename T>
__global__ void fma_kernel(T* out, int iters)
{
    T x[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = (T)(threadIdx.x + k);
    const T a = (T)0.999, b = (T)0.001;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int k = 0; k < 8; ++k) x[k] = x[k] * a + b;
    }
    T s = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) s += x[k];
    if (s == (T)-1) out[0] = s;
}

#include "l2_flush.h"   // the harness's own flush (templates/harness/), copied beside this file when built

template <typename F>
static float best_ms(F launch, int reps, cudaEvent_t e0, cudaEvent_t e1)
{
    float best = 1e30f;
    for (int r = 0; r < reps; ++r) {
        cudaEventRecord(e0);
        launch();
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        if (ms < best) best = ms;
    }
    return best;
}

int main()
{
    int dev = 0, driver = 0;
    CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, dev));
    CHECK(cudaDriverGetVersion(&driver));
    size_t bytes = (size_t)1 << 30;
    if (bytes * 4 > prop.totalGlobalMem) bytes = prop.totalGlobalMem / 8;
    const size_t n = bytes / sizeof(float4);
    float4 *a = nullptr, *b = nullptr;
    float* out = nullptr;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMalloc(&out, 64));
    CHECK(cudaMemset(a, 0, bytes));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    const int blocks = prop.multiProcessorCount * 8, threads = 512;

    copy_kernel<<<blocks, threads>>>(a, b, n);
    CHECK(cudaDeviceSynchronize());
    const float copy_ms = best_ms([&] { copy_kernel<<<blocks, threads>>>(a, b, n); }, 20, e0, e1);
    read_kernel<<<blocks, threads>>>(a, out, n);
    CHECK(cudaDeviceSynchronize());
    const float read_ms = best_ms([&] { read_kernel<<<blocks, threads>>>(a, out, n); }, 20, e0, e1);

    const int iters = 4096, fblocks = prop.multiProcessorCount * 16, fthreads = 256;
    const double flops = 2.0 * 8 * iters * (double)fblocks * fthreads;
    fma_kernel<float><<<fblocks, fthreads>>>((float*)out, iters);
    CHECK(cudaDeviceSynchronize());
    const float f32_ms = best_ms([&] { fma_kernel<float><<<fblocks, fthreads>>>((float*)out, iters); }, 10, e0, e1);
    fma_kernel<double><<<fblocks, fthreads>>>((double*)out, iters / 4);
    CHECK(cudaDeviceSynchronize());
    const float f64_ms = best_ms([&] { fma_kernel<double><<<fblocks, fthreads>>>((double*)out, iters / 4); }, 10, e0, e1);
    CHECK(cudaGetLastError());

    // the streaming curve, timed like the harness: flush (clean lines), event, one launch, event; median of 15
    const size_t flush_bytes = mepgen_l2_flush_bytes(prop.l2CacheSize);
    void* flush = nullptr;
    CHECK(cudaMalloc(&flush, flush_bytes));
    CHECK(cudaMemset(flush, 0, flush_bytes));
    std::string curve;
    for (size_t mib = 4; mib <= 512 && (mib << 20) <= bytes; mib *= 2) {
        const size_t cb = mib << 20;
        float med[2];
        for (int kind = 0; kind < 2; ++kind) {
            float t[15];
            for (int r = 0; r < 15; ++r) {
                mepgen_l2_flush_launch(flush, flush_bytes, (int*)out, prop.multiProcessorCount, 0);
                cudaEventRecord(e0);
                if (kind == 0) read_kernel<<<blocks, threads>>>(a, out, cb / 16);
                else copy_kernel<<<blocks, threads>>>(a, b, cb / 32);
                cudaEventRecord(e1);
                cudaEventSynchronize(e1);
                cudaEventElapsedTime(&t[r], e0, e1);
            }
            std::sort(t, t + 15);
            med[kind] = t[7];
        }
        char item[96];
        std::snprintf(item, sizeof(item), "%s[%zu, %.1f, %.1f]", curve.empty() ? "" : ", ", cb,
                      cb / (med[0] * 1e6), cb / (med[1] * 1e6));
        curve += item;
    }
    CHECK(cudaGetLastError());

    std::printf("{\"status\": \"ok\", \"device\": \"%s\", \"cc\": \"%d.%d\", \"driver\": %d, \"l2_bytes\": %d, "
                "\"buffer_bytes\": %zu, \"copy_gbs\": %.1f, \"read_gbs\": %.1f, \"fp32_gflops\": %.1f, "
                "\"fp64_gflops\": %.1f, \"stream_curve\": [%s]}\n",
                prop.name, prop.major, prop.minor, driver, prop.l2CacheSize, bytes,
                2.0 * bytes / (copy_ms * 1e6), bytes / (read_ms * 1e6), flops / (f32_ms * 1e6),
                flops / 4 / (f64_ms * 1e6), curve.c_str());
    return 0;
}
