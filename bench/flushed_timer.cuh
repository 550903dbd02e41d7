// flushed_timer.cuh -- the hand-written benchmark programs' timer (histogram_variants.cu, window_stencil_variants.cu):
// each timed launch as the MEP harness times it, after the harness's own read-only L2 flush, between two events.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>
#include <cuda_runtime.h>
#include "../templates/harness/l2_flush.h"

#ifndef CHECK
#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); std::exit(3); } } while (0)
#endif

struct Timer {
    void* flush; int* sink; size_t bytes; int sms;
    cudaEvent_t a, b;
    Timer()
    {
        cudaDeviceProp p; CHECK(cudaGetDeviceProperties(&p, 0));
        bytes = mepgen_l2_flush_bytes(p.l2CacheSize); sms = p.multiProcessorCount;
        CHECK(cudaMalloc(&flush, bytes)); CHECK(cudaMalloc(&sink, 4)); CHECK(cudaMemset(flush, 0, bytes));
        CHECK(cudaEventCreate(&a)); CHECK(cudaEventCreate(&b));
    }
    // median, min, max of 30 launches, each after the flush (and `reset`, outside the events: a histogram's bins)
    std::vector<float> time(const std::function<void()>& launch, const std::function<void()>& reset = [] {})
    {
        for (int w = 0; w < 5; ++w) { reset(); launch(); }
        CHECK(cudaDeviceSynchronize());
        std::vector<float> ms;
        for (int r = 0; r < 30; ++r) {
            reset();
            mepgen_l2_flush_launch(flush, bytes, sink, sms, 0);
            CHECK(cudaEventRecord(a)); launch(); CHECK(cudaEventRecord(b)); CHECK(cudaEventSynchronize(b));
            float t; CHECK(cudaEventElapsedTime(&t, a, b)); ms.push_back(t);
        }
        CHECK(cudaGetLastError());
        std::sort(ms.begin(), ms.end());
        return {ms[15], ms.front(), ms.back()};
    }
};
