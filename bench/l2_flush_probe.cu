// l2_flush_probe.cu -- does the way an MEP empties the L2 before a timed launch cost the timed launch?
//
// The harness (and the pycuda worker) empty the L2 with a memset of 2 x L2 bytes just before the start event.
// A memset leaves the L2 full of dirty lines; a kernel that then streams its inputs evicts them, and the
// write-backs share the DRAM bus with its reads inside the timed window. This probe times the same streaming
// kernels (read-only sum, copy, axpy-shaped read-read-write) over a range of sizes after four preparations:
//   memset      the harness's flush (a memset of 2 x L2)
//   readflush   a read-only kernel over 2 x L2 (the L2 ends full of clean lines)
//   both        the memset, then the read-only kernel (what a cleaned memset flush costs)
//   none        nothing (warm L2 where the working set fits)
// and prints one JSON line per (kernel, size, preparation) with the median and spread of the event times.
//
//   nvcc -O3 -arch=native -o /tmp/l2probe bench/l2_flush_probe.cu && /tmp/l2probe [--brief]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); std::exit(3); } } while (0)

__global__ void read_sum(const float4* __restrict__ a, float* out, size_t n)
{
    float s = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = a[i];
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 1234.5f) out[0] = s;
}

__global__ void copy4(const float4* __restrict__ a, float4* __restrict__ b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        b[i] = a[i];
}

__global__ void axpy4(const float4* __restrict__ x, float4* __restrict__ y, float a, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 u = x[i], v = y[i];
        v.x += a * u.x; v.y += a * u.y; v.z += a * u.z; v.w += a * u.w;
        y[i] = v;
    }
}

int main(int argc, char** argv)
{
    const bool brief = argc > 1 && std::strcmp(argv[1], "--brief") == 0;   // under ncu: 64 MiB, 3 reps
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0;
    CHECK(cudaDriverGetVersion(&driver));
    const size_t l2 = prop.l2CacheSize, flush_bytes = 2 * l2;
    const size_t max_bytes = (size_t)512 << 20;
    float4 *a, *b, *flush;
    float* out;
    CHECK(cudaMalloc(&a, max_bytes));
    CHECK(cudaMalloc(&b, max_bytes));
    CHECK(cudaMalloc(&flush, flush_bytes));
    CHECK(cudaMalloc(&out, 64));
    CHECK(cudaMemset(a, 0, max_bytes));
    CHECK(cudaMemset(b, 0, max_bytes));
    CHECK(cudaMemset(flush, 0, flush_bytes));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    const int blocks = prop.multiProcessorCount * 8, threads = 512;
    std::printf("{\"device\": \"%s\", \"driver\": %d, \"l2_bytes\": %zu, \"sms\": %d}\n", prop.name, driver, l2,
                prop.multiProcessorCount);

    const char* preps[] = {"memset", "readflush", "both", "none"};
    const char* kernels[] = {"read", "copy", "axpy"};
    const int reps = brief ? 3 : 30;
    for (int kk = 0; kk < 3; ++kk) {
        for (size_t mib : {16, 32, 48, 64, 96, 128, 256, 512}) {
            if (brief && mib != 64) continue;
            const size_t bytes = mib << 20;    // bytes the kernel moves (counted as the roofline counts them)
            auto launch = [&] {
                if (kk == 0) read_sum<<<blocks, threads>>>(a, out, bytes / 16);
                else if (kk == 1) copy4<<<blocks, threads>>>(a, b, bytes / 32);
                else axpy4<<<blocks, threads>>>(a, b, 1.0001f, bytes / 48);
            };
            for (int p = 0; p < 4; ++p) {
                std::vector<float> t;
                for (int r = 0; r < reps + 2; ++r) {
                    if (p == 0 || p == 2) CHECK(cudaMemsetAsync(flush, r & 0xff, flush_bytes));
                    if (p == 1 || p == 2) read_sum<<<blocks, threads>>>(flush, out, flush_bytes / 16);
                    CHECK(cudaEventRecord(e0));
                    launch();
                    CHECK(cudaEventRecord(e1));
                    CHECK(cudaEventSynchronize(e1));
                    float ms = 0;
                    CHECK(cudaEventElapsedTime(&ms, e0, e1));
                    if (r >= 2) t.push_back(ms);
                }
                std::sort(t.begin(), t.end());
                const float med = t[t.size() / 2];
                std::printf("{\"kernel\": \"%s\", \"mib\": %zu, \"prep\": \"%s\", \"median_us\": %.2f, \"min_us\": %.2f, "
                            "\"max_us\": %.2f, \"gbs\": %.1f}\n", kernels[kk], mib, preps[p], med * 1e3, t.front() * 1e3,
                            t.back() * 1e3, bytes / (med * 1e6));
            }
        }
    }
    CHECK(cudaGetLastError());
    return 0;
}
