"""Kernels written with what nvcc's headers and the toolkit's libraries provide parse without those headers:
CUB collectives, cuRAND states, texture fetches, cuComplex, and min/max on mixed integer widths."""
from __future__ import annotations

import textwrap

from mepgen.extract import ExtractOptions, extract


def _kernels(tmp_path, source: str) -> dict:
    (tmp_path / "k.cu").write_text(textwrap.dedent(source))
    inv = extract(tmp_path, ExtractOptions(jobs=1, use_cache=False))
    assert inv["skipped"] == [], inv["skipped"]
    return {k["name"]: k for k in inv["kernels"]}


def test_cub_block_reduce_and_device_scan(tmp_path):
    ks = _kernels(tmp_path, """
        #include <cub/cub.cuh>
        template <int BLOCK>
        __global__ void block_sums(const float *in, float *out, int n) {
          typedef cub::BlockReduce<float, BLOCK> Reduce;
          __shared__ typename Reduce::TempStorage scratch;
          int i = blockIdx.x * BLOCK + threadIdx.x;
          float total = Reduce(scratch).Sum(i < n ? in[i] : 0.0f);
          if (threadIdx.x == 0) out[blockIdx.x] = total;
        }
        int main() {
          float *in, *out; int *a, *b; void *tmp = nullptr; size_t bytes = 0;
          cudaMalloc(&in, 4096); cudaMalloc(&out, 64);
          block_sums<256><<<4, 256>>>(in, out, 1024);
          cub::DeviceScan::ExclusiveSum(tmp, bytes, a, b, 1024);
        }
    """)
    assert ks["block_sums"]["launch_sites"][0]["template_args"] == ["256"]


def test_curand_states_and_texture_objects(tmp_path):
    ks = _kernels(tmp_path, """
        #include <curand_kernel.h>
        __global__ void noise(curandState *st, float *x, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) { curand_init(1234, i, 0, &st[i]); x[i] = curand_uniform(&st[i]); }
        }
        __global__ void gather(cudaTextureObject_t t, float *y, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) y[i] = tex1Dfetch<float>(t, i);
        }
        int main() { curandState *s; float *x; cudaMalloc(&s, 1 << 16); cudaMalloc(&x, 4096);
                     noise<<<4, 256>>>(s, x, 1024); gather<<<4, 256>>>(0, x, 1024); }
    """)
    assert set(ks) == {"noise", "gather"} and "texture" in ks["gather"]["features"]


def test_complex_numbers_and_mixed_width_min_max(tmp_path):
    ks = _kernels(tmp_path, """
        #include <cuComplex.h>
        __host__ __device__ short top3(short a, short b, short c) { return max(max(a, b), c); }
        __device__ int clamp_index(size_t v, int hi) { return (int)min((size_t)hi, v); }
        __global__ void magnitudes(const cuFloatComplex *z, float *m, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) m[clamp_index(i, n - 1)] = cuCabsf(z[i]) + top3(1, 2, 3);
        }
        int main() { cuFloatComplex *z; float *m; cudaMalloc(&z, 8192); cudaMalloc(&m, 4096);
                     magnitudes<<<4, 256>>>(z, m, 1024); }
    """)
    assert [f["name"] for f in ks["magnitudes"]["closure"]["device_functions"]] == ["top3", "clamp_index"]


def test_wmma_fragments_half_compares_and_pitched_memory(tmp_path):
    ks = _kernels(tmp_path, """
        #include <mma.h>
        #include <cuda_fp16.h>
        using namespace nvcuda;
        __global__ void tile16(const half *a, const half *b, float *c) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
          wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
          wmma::fill_fragment(acc, 0.0f);
          wmma::load_matrix_sync(fa, a, 16);
          wmma::load_matrix_sync(fb, b, 16);
          wmma::mma_sync(acc, fa, fb, acc);
          wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
        }
        __global__ void positive(half2 *v) { v[threadIdx.x] = __hgt2(v[threadIdx.x], __float2half2_rn(0.f)); }
        int main() {
          half *a, *b; float *c; half2 *v; cudaPitchedPtr p; cudaExtent e = make_cudaExtent(64, 64, 8);
          cudaMalloc3D(&p, e); cudaMalloc(&a, 512); cudaMalloc(&b, 512); cudaMalloc(&c, 1024); cudaMalloc(&v, 128);
          tile16<<<1, 32>>>(a, b, c); positive<<<1, 32>>>(v);
        }
    """)
    assert set(ks) == {"tile16", "positive"}


def test_noinline_as_the_toolkit_and_libstdcxx_13_spell_it(tmp_path):
    """libstdc++ 13 writes `__attribute__((__noinline__))` in headers <random> and <chrono> reach; nvcc's headers make
    `__noinline__` a specifier. Both parse (a variant with either was refused by patch as "does not parse")."""
    from mepgen.parsing import clang
    (tmp_path / "v.cu").write_text(textwrap.dedent("""
        __attribute__((__noinline__)) void host_side(int);
        __noinline__ __device__ int plus_one(int x) { return x + 1; }
        __global__ void bump(int *p) { p[threadIdx.x] = plus_one(p[threadIdx.x]); }
    """))
    tu = clang.parse(tmp_path / "v.cu", [])
    assert [d.spelling for d in tu.diagnostics if d.severity >= 3] == []
    ks = _kernels(tmp_path, (tmp_path / "v.cu").read_text())
    assert "bump" in ks
