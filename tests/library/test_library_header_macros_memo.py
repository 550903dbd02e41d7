"""The macros of the headers kernel.cu includes are read from the translation unit once per set of kernel.cu's
preprocessor lines (source._HEADER_MACROS): a candidate that changes code only reuses them, one that changes a
directive (a define the header tests, an include) reads them again, and the answer is the same as without it."""
from __future__ import annotations

from mepgen.optimize.library import macros, source
from mepgen.optimize.library.source import KernelSource
from mepgen.spec import load_spec

YAML = """version: 1
kernel: {name: k, id: k, source: k.cu, source_sha256: "0", start_byte: 0, end_byte: 1}
sizes: {N: 4096}
params:
  - {name: x, role: inout, ctype: float *, dtype: float32, count: N, init: {kind: uniform, low: 0.0, high: 1.0}}
  - {name: n, role: scalar, ctype: int, dtype: int32, value: N}
constants: []
launch: {grid: ['N / 256'], block: ['256'], shared_mem: '0'}
build: {arch: sm_90, std: c++17, nvcc_flags: [-O3]}
verify: {input_sets: 1, seed: 1, tolerance: {x: {rtol: 0.00001, atol: 0.000001}}}
timing: {warmup: 5, reps: 50, flush_l2: true}
todo: []
"""

KERNEL = """{directives}
__global__ void k(float *x, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = SCALE(x[i]){extra};
}}
"""


def test_header_macros_are_read_once_per_set_of_directives(tmp_path, monkeypatch):
    header = tmp_path / "app_macros.h"
    header.write_text("#ifdef DOUBLE_IT\n#define SCALE(v) ((v) * 2.0f)\n#else\n#define SCALE(v) (v)\n#endif\n")
    (tmp_path / "mep.yaml").write_text(YAML)
    spec = load_spec(tmp_path / "mep.yaml")
    monkeypatch.setattr(source, "_HEADER_MACROS", {})
    monkeypatch.setattr(source, "_MACROS", {})
    scans = []
    real = macros.active_definitions
    monkeypatch.setattr(macros, "active_definitions", lambda tu, skip: scans.append(1) or real(tu, skip))
    include = f'#include "{header}"'

    def macros_of(directives: str, extra: str = "") -> dict:
        return KernelSource(KERNEL.format(directives=directives, extra=extra), spec).macros()
    plain = macros_of(include)
    assert plain["SCALE"] == (["v"], "( v )") and len(scans) == 1
    assert macros_of(include, extra=" + 1.0f")["SCALE"] == plain["SCALE"] and len(scans) == 1    # code only
    doubled = macros_of("#define DOUBLE_IT\n" + include)                                         # a directive
    assert doubled["SCALE"] == (["v"], "( ( v ) * 2.0f )") and len(scans) == 2
