"""Grid-stride loops spelled through locals (`int first = global index; int step = blockDim.x * gridDim.x;
for (int i = first; ...; i += step)`) with a body that is one statement without braces: vector_loads and
grid_stride see them, on a hand-written kernel and spec."""
from __future__ import annotations


import pytest

from library_fixtures import nvcc_cubin
from mepgen.optimize.library.base import current_launch
from mepgen.optimize.library.grid_stride import GridStride
from mepgen.optimize.library.source import KernelSource, Refused
from mepgen.optimize.library.vector_loads import VectorLoads
from mepgen.spec import load_spec

YAML = """version: 1
kernel: {name: accumulate, id: accumulate, source: k.cu, source_sha256: "0", start_byte: 0, end_byte: 1}
sizes: {N: 1048576}
params:
  - {name: n, role: scalar, ctype: int, dtype: int32, value: N}
  - {name: src, role: in, ctype: const float *, dtype: float32, count: N, init: {kind: uniform, low: -1.0, high: 1.0}}
  - {name: dst, role: inout, ctype: float *, dtype: float32, count: N, init: {kind: uniform, low: -1.0, high: 1.0}}
constants: []
launch: {grid: [(N + 255) / 256], block: ['256'], shared_mem: '0'}
build: {arch: sm_90, std: c++17, nvcc_flags: [-O3]}
verify: {input_sets: 2, seed: 1, tolerance: {dst: {rtol: 0.00001, atol: 0.000001}}}
timing: {warmup: 5, reps: 50, flush_l2: true}
todo: []
"""

ACCUMULATE = """__global__ void accumulate(int n, const float *src, float *dst) {
    int first = blockIdx.x * blockDim.x + threadIdx.x;
    int step = blockDim.x * gridDim.x;
    for (int i = first; i < n; i += step)
        dst[i] += src[i];
}
"""


@pytest.fixture
def kernel(tmp_path):
    (tmp_path / "mep.yaml").write_text(YAML)
    spec = load_spec(tmp_path / "mep.yaml")
    return KernelSource(ACCUMULATE, spec), spec, current_launch(spec, None)


def test_vector_loads_through_the_locals_keep_every_statement_whole(kernel, tmp_path):
    src, spec, launch = kernel
    rw = VectorLoads().apply(src, spec, launch, {})
    assert "for (int mepgen_q = first; mepgen_q < mepgen_n4; mepgen_q += step) {" in rw.text
    # the one-statement body keeps its `;` in the lanes, the scalar tail and the unaligned path
    assert "mepgen_dst.c[mepgen_l] += mepgen_src.c[mepgen_l];" in rw.text
    assert rw.text.count("dst[i] += src[i];") == 2
    f = tmp_path / "kernel.cu"
    f.write_text(rw.text)
    done = nvcc_cubin(spec, f, tmp_path / "k.cubin")
    assert done.returncode == 0, done.stderr


def test_grid_stride_through_the_locals(kernel):
    src, spec, launch = kernel
    rw = GridStride().apply(src, spec, launch, {"per_thread": 32})
    assert rw.launch["grid"] == ["((N) + (256) * 32 - 1) / ((256) * 32)"] and rw.text == src.text
    # the global index read elsewhere would change with the grid: refused by name
    other = KernelSource(ACCUMULATE.replace("dst[i] += src[i];", "dst[i] += src[i] + first;"), spec)
    with pytest.raises(Refused, match="first \\(the global index\\) is used other than to start"):
        GridStride().space(other, spec, launch)
