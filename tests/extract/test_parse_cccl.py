"""Thrust, CUB and libcu++ headers from the toolkit, as nvcc finds them (`<toolkit>/include/cccl` since CUDA 13):
a kernel whose helper returns a `thrust::tuple` is parsed, not skipped for an undeclared `thrust`."""
from __future__ import annotations

import pytest

from mepgen.parsing.clang import cccl_include_dir
from mep_apps import make_app, run

pytestmark = pytest.mark.skipif(cccl_include_dir() is None, reason="no CUDA toolkit with include/cccl here")


def test_a_kernel_using_thrust_tuple_gets_its_mep(tmp_path):
    app = make_app(tmp_path, """
        #include <thrust/tuple.h>
        #define LEN 1000
        __device__ thrust::tuple<float, float> split(float v) { return thrust::make_tuple(v, -v); }
        __global__ void spread(float* a, float* b, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) { thrust::tuple<float, float> t = split(a[i]); b[i] = thrust::get<1>(t); }
        }
        int main()
        {
            float *a, *b;
            cudaMalloc(&a, LEN * sizeof(float));
            cudaMalloc(&b, LEN * sizeof(float));
            spread<<<(LEN + 127) / 128, 128>>>(a, b, LEN);
            return 0;
        }
    """)
    r = run("spread", "-C", app)
    assert r.exit_code == 0, r.output
    kernel = (app / ".mepgen" / "meps" / "spread" / "kernel.cu").read_text()
    assert "#include <thrust/tuple.h>" in kernel and "split(" in kernel
