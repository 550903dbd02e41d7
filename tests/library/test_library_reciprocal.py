"""reciprocal on hand-written kernels: a floating-point division in a loop by a value the loop does not change becomes
one division before the loop and a multiplication in it; where the divisor changes, the output is an integer, or the
tolerance is exact, the refusal says why; each rewrite compiles (nvcc)."""
from __future__ import annotations

import pytest

from mepgen.optimize.dry_run import plan
from mepgen.optimize.library.reciprocal import Reciprocal
from mepgen.optimize.library.source import Refused
from library_fixtures import compiles, written

YAML = """version: 1
kernel: {{name: {name}, id: {name}, source: k.cu, source_sha256: "0", start_byte: 0, end_byte: 1}}
sizes: {{N: 65536, M: 64}}
params:
  - {{name: x, role: in, ctype: const float *, dtype: float32, count: N + M, init: {{kind: uniform, low: -1.0, high: 1.0}}}}
  - {{name: s, role: in, ctype: const float *, dtype: float32, count: N, init: {{kind: uniform, low: 0.5, high: 2.0}}}}
  - {{name: out, role: out, ctype: {out_type} *, dtype: {out_dtype}, count: N}}
  - {{name: n, role: scalar, ctype: int, dtype: int32, value: N}}
  - {{name: m, role: scalar, ctype: int, dtype: int32, value: M}}
constants: []
launch: {{grid: [(N + 127) / 128], block: [128], shared_mem: '0'}}
build: {{arch: sm_90, std: c++17, nvcc_flags: [-O3]}}
verify: {{input_sets: 2, seed: 1, tolerance: {tolerance}}}
timing: {{warmup: 5, reps: 50, flush_l2: true}}
todo: []
"""


def make(tmp_path, text, name, out_type="float", out_dtype="float32", tolerance="{out: {rtol: 0.00001, atol: 0.000001}}"):
    return written(tmp_path, YAML.format(name=name, out_type=out_type, out_dtype=out_dtype, tolerance=tolerance), text)


# a window of m inputs normalized by the thread's own scale, which the loop never changes
NORMALIZED = """__global__ void normalized(const float *x, const float *s, float *out, int n, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float scale = s[i] * 0.5f + 1.0f, acc = 0.0f;
    for (int k = 0; k < m; ++k) {
        float v = (x[i + k] - 0.25f) / scale;
        acc += v * v / 2.0f;
    }
    acc /= (float)m;
    out[i] = acc;
}
"""


def test_a_loop_invariant_divisor_is_divided_once(tmp_path):
    src, spec, launch = make(tmp_path, NORMALIZED, "normalized")
    t = Reciprocal()
    assert t.space(src, spec, launch) == {}
    rw = t.apply(src, spec, launch, {})
    assert "{\n            const float mepgen_inv0 = (float)1 / (float)(scale);\n            for (int k = 0; k < m; ++k)" \
        in rw.text
    assert "float v = ((x[i + k] - 0.25f)) * mepgen_inv0;" in rw.text
    assert "acc += v * v / 2.0f;" in rw.text        # a power of two: nvcc multiplies by its exact inverse itself
    assert "acc /= (float)m;" in rw.text            # after the loop: one division per thread, nothing to gain
    assert rw.launch is None and "division by scale" in rw.explanation
    compiles(tmp_path, spec, rw.text)
    assert "reciprocal" in [c["name"] for c in plan(spec, NORMALIZED).candidates]


def test_a_compound_division_and_a_double(tmp_path):
    text = """__global__ void damped(const float *x, const float *s, double *out, int n, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double d = 1.0 + (double)s[i], acc = 1.0;
    for (int k = 0; k < m; ++k) { acc += (double)x[i + k]; acc /= d; }
    out[i] = acc;
}
"""
    src, spec, launch = make(tmp_path, text, "damped", out_type="double", out_dtype="float64",
                             tolerance="{out: {rtol: 0.00001, atol: 0.000001}}")
    rw = Reciprocal().apply(src, spec, launch, {})
    assert "const double mepgen_inv0 = (double)1 / (double)(d);" in rw.text and "acc *= mepgen_inv0;" in rw.text
    compiles(tmp_path, spec, rw.text)


@pytest.mark.parametrize("old, new, kw, reason", [
    # the divisor changes on every iteration
    ("/ scale;", "/ (scale + k);", {}, "divides by a value its loop changes (k is declared inside it)"),
    # the divisor is read from memory the loop could see change
    ("/ scale;", "/ s[i];", {}, "reads memory or calls a function"),
    # an exact comparison of the output
    (None, None, {"tolerance": "{out: {rtol: 0.0, atol: 0.0}}"}, "relative tolerance below 1e-06"),
])
def test_refusals_say_why(tmp_path, old, new, kw, reason):
    text = NORMALIZED if old is None else NORMALIZED.replace(old, new)
    src, spec, launch = make(tmp_path, text, "normalized", **kw)
    with pytest.raises(Refused) as e:
        Reciprocal().space(src, spec, launch)
    assert reason in str(e.value)


def test_an_integer_output_is_left_alone(tmp_path):
    text = NORMALIZED.replace("float *out", "int *out").replace("out[i] = acc;", "out[i] = (int)acc;")
    src, spec, launch = make(tmp_path, text, "normalized", out_type="int", out_dtype="int32", tolerance="{}")
    with pytest.raises(Refused, match="output out is int32: a quotient that rounds differently could change it"):
        Reciprocal().space(src, spec, launch)


def test_any_loop_shape_and_the_outermost_loop_that_leaves_the_divisor_alone(tmp_path):
    """A `while` loop around a `<=` loop: the divisor changes in neither, so it is divided once before the outer one;
    a second divisor that the outer loop changes is divided before the inner one."""
    text = """__global__ void sweeps(const float *x, const float *s, float *out, int n, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float scale = s[i] + 2.0f, acc = 0.0f, w = 1.0f;
    int pass = 0;
    while (pass < 3) {
        for (int k = 0; k <= m - 1; k++) acc += x[i + k] / scale + x[i + k] / w;
        w += 1.0f;
        pass++;
    }
    out[i] = acc;
}
"""
    src, spec, launch = make(tmp_path, text, "sweeps")
    rw = Reciprocal().apply(src, spec, launch, {})
    outer = rw.text.index("const float mepgen_inv0 = (float)1 / (float)(scale);")
    inner = rw.text.index("const float mepgen_inv1 = (float)1 / (float)(w);")
    assert outer < rw.text.index("while (pass < 3)") < inner < rw.text.index("for (int k = 0; k <= m - 1; k++)")
    assert "(x[i + k]) * mepgen_inv0 + (x[i + k]) * mepgen_inv1;" in rw.text
    compiles(tmp_path, spec, rw.text)


def test_a_divisor_a_call_may_change_is_left_alone(tmp_path):
    text = NORMALIZED.replace("__global__", "__device__ void bump(float &v) { v += 1.0f; }\n__global__").replace(
        "        acc += v * v / 2.0f;", "        acc += v * v / 2.0f;\n        bump(scale);")
    src, spec, launch = make(tmp_path, text, "normalized")
    with pytest.raises(Refused, match="the loop hands scale to `bump`, which may change it"):
        Reciprocal().space(src, spec, launch)
