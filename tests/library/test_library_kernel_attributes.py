"""Kernel attributes (`__launch_bounds__`, `__maxnreg__`) where a macro spells `__global__`: a header's
`#define DEVICE_KERNEL __global__` is common in large applications. The attribute goes right before the kernel's
name then, the form nvcc takes among the declaration's specifiers; the result compiles."""
from __future__ import annotations

import pytest

from library_fixtures import compiles, written
from mepgen.optimize.library.launch_bounds import LaunchBounds
from mepgen.optimize.library.source import Refused
from mepgen.optimize.library.tunables import TuneParams

YAML = """version: 1
kernel: {name: smooth, id: smooth, source: k.cu, source_sha256: "0", start_byte: 0, end_byte: 1}
sizes: {N: 4096}
params:
  - {name: a, role: in, ctype: const float *, dtype: float32, count: N, init: {kind: uniform, low: 0.0, high: 1.0}}
  - {name: b, role: out, ctype: float *, dtype: float32, count: N, init: {kind: zeros}}
  - {name: n, role: scalar, ctype: int, dtype: int32, value: N}
constants: []
launch: {grid: ['(N + 127) / 128'], block: ['128'], shared_mem: '0'}
build: {arch: sm_90, std: c++17, nvcc_flags: [-O3]}
verify: {input_sets: 2, seed: 1}
timing: {warmup: 5, reps: 50, flush_l2: true}
todo: []
"""

MACRO = """#define DEVICE_KERNEL __global__
DEVICE_KERNEL static void smooth(const float *a, float *b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > 0 && i < n - 1) b[i] = 0.25f * a[i - 1] + 0.5f * a[i] + 0.25f * a[i + 1];
}
"""

# a macro makes the whole head: there is no place to write an attribute that mepgen could show
NAMED = """#define DEFINE_KERNEL(name) __global__ void name(const float *a, float *b, int n)
DEFINE_KERNEL(smooth) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = a[i];
}
"""


def test_launch_bounds_before_the_name_where_a_macro_spells_global(tmp_path):
    src, spec, launch = written(tmp_path, YAML, MACRO)
    rw = LaunchBounds().apply(src, spec, launch, {"min_blocks": 4})
    assert "DEVICE_KERNEL static void __launch_bounds__(128, 4) smooth(const float *a" in rw.text
    compiles(tmp_path, spec, rw.text)


def test_tuned_bounds_and_register_cap_where_a_macro_spells_global(tmp_path):
    src, spec, launch = written(tmp_path, YAML, MACRO)
    t = TuneParams()
    space = t.space(src, spec, launch)
    assert "bounds" in space and "regs" in space
    capped = t.apply(src, spec, launch, {"regs": 32})
    assert "static void __maxnreg__(32) smooth(" in capped.text and capped.nvcc_flags == []
    compiles(tmp_path, spec, capped.text)
    bounded = t.apply(src, spec, launch, {"bounds": 2, "regs": 32})
    assert "static void __launch_bounds__(128, 2) smooth(" in bounded.text
    assert bounded.nvcc_flags == ["-maxrregcount=32"]      # nvcc refuses __maxnreg__ beside __launch_bounds__
    compiles(tmp_path, spec, bounded.text)


def test_a_head_made_by_a_macro_is_refused_with_its_reason(tmp_path):
    src, spec, launch = written(tmp_path, YAML, NAMED)
    with pytest.raises(Refused, match="neither __global__ nor the kernel's name is spelled"):
        LaunchBounds().apply(src, spec, launch, {"min_blocks": 2})
