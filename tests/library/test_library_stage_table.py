"""stage_table: a small read-only table read in loops, copied to shared memory once per block, on hand-written
kernels and specs (no extraction)."""
from __future__ import annotations


import pytest

from library_fixtures import nvcc_cubin
from mepgen.optimize.dry_run import plan
from mepgen.optimize.library.base import current_launch
from mepgen.optimize.library.source import KernelSource, Refused
from mepgen.optimize.library.stage_table import StageTable
from mepgen.spec import load_spec

YAML = """version: 1
kernel: {{name: mix, id: mix, source: k.cu, source_sha256: "0", start_byte: 0, end_byte: 1}}
sizes: {{N: 65536, K: 16}}
params:
  - {{name: coef, role: {role}, ctype: const float *, dtype: float32, count: {count}, init: {{kind: uniform, low: -1.0, high: 1.0}}}}
  - {{name: x, role: in, ctype: const float *, dtype: float32, count: N * K, init: {{kind: uniform, low: -1.0, high: 1.0}}}}
  - {{name: y, role: out, ctype: float *, dtype: float32, count: N}}
  - {{name: n, role: scalar, ctype: int, dtype: int32, value: N}}
  - {{name: k, role: scalar, ctype: int, dtype: int32, value: K}}
constants: []
launch: {{grid: [(N + 127) / 128], block: [128], shared_mem: '0'}}
build: {{arch: sm_90, std: c++17, nvcc_flags: [-O3]}}
verify: {{input_sets: 2, seed: 1, tolerance: {{y: {{rtol: 0.00001, atol: 0.000001}}}}}}
timing: {{warmup: 5, reps: 50, flush_l2: true}}
todo: []
"""

# each output mixes K inputs with a K x K coefficient table that every thread reads whole
MIX = """__global__ void mix(const float *coef, const float *x, float *y, int n, int k) {
    const float *c = (const float *) coef;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    float acc = 0.0f;
    for (int a = 0; a < k; ++a)
        for (int b = 0; b < k; ++b)
            acc += c[a * k + b] * x[t * k + b];
    y[t] = acc;
}
"""


def make(tmp_path, text=MIX, role="in", count="K * K"):
    (tmp_path / "mep.yaml").write_text(YAML.format(role=role, count=count))
    spec = load_spec(tmp_path / "mep.yaml")
    return KernelSource(text, spec), spec, current_launch(spec, None)


def test_a_coefficient_table_is_staged_once_per_block(tmp_path):
    src, spec, launch = make(tmp_path)
    t = StageTable()
    assert t.space(src, spec, launch) == {}
    rw = t.apply(src, spec, launch, {})
    assert rw.launch is None
    assert "__shared__ float mepgen_tbl_coef[256];" in rw.text
    # the extent at run time from the kernel's own parameter (mep.yaml's K is `k`): a larger run reads global memory
    assert "const long long mepgen_n_coef = (long long)(((k) * (k)));" in rw.text
    # the parameter is renamed and a local of its name points at the copy: every use reads it, unedited (the local
    # alias too, and uses inside macros would)
    assert "__global__ void mix(const float *mepgen_in_coef," in rw.text
    assert "const float * coef = mepgen_n_coef <= 256 ? mepgen_tbl_coef : mepgen_in_coef;" in rw.text
    assert "mepgen_tbl_coef[q] = mepgen_in_coef[q];" in rw.text
    # the copy and its barrier come first, before any thread can leave
    assert "const float *c = (const float *) coef;" in rw.text
    assert rw.text.index("__syncthreads();") < rw.text.index("int t = ")
    f = tmp_path / "kernel.cu"
    f.write_text(rw.text)
    done = nvcc_cubin(spec, f, tmp_path / "k.cubin")
    assert done.returncode == 0, done.stderr
    p = plan(spec, src.text)
    assert "stage_table" in p.structural


@pytest.mark.parametrize("edit, role, count, why", [
    (None, "inout", "K * K", "coef: mep.yaml's role is inout, not in"),
    (None, "in", "N * K", "coef: 4194304 bytes: larger than the 16384 a block stages"),
    (("c[a * k + b] * x", "c[t * k + b] * x"), "in", "K * K", None),      # per-thread rows in a loop: still staged
    (("for (int a = 0; a < k; ++a)", "for (int a = threadIdx.x; a < k; a += blockDim.x)"), "in", "K * K",
     "coef: read in loops that stride over threads"),
    (("float acc = 0.0f;", "float acc = c[t % k];"), "in", "K * K", None),
    (("float acc = 0.0f;", "float acc = *coef;"), "in", "K * K", "coef: `coef` is used other than as coef[index]"),
    (("y[t] = acc;", "y[t] = acc; c = x;"), "in", "K * K", "coef: the local pointer c to it is reassigned"),
])
def test_refusals_say_why(tmp_path, edit, role, count, why):
    text = MIX if edit is None else MIX.replace(*edit)
    assert edit is None or edit[0] in MIX
    src, spec, launch = make(tmp_path, text, role, count)
    if why is None:
        StageTable().space(src, spec, launch)
        return
    with pytest.raises(Refused) as e:
        StageTable().space(src, spec, launch)
    assert why in str(e.value)


def test_an_extent_the_kernel_cannot_compute_is_refused(tmp_path):
    (tmp_path / "mep.yaml").write_text(YAML.format(role="in", count="K * K").replace("value: K}", "value: 16}"))
    spec = load_spec(tmp_path / "mep.yaml")
    src = KernelSource(MIX, spec)
    with pytest.raises(Refused, match="its extent `K \\* K` uses K, which the kernel has no value of"):
        StageTable().space(src, spec, current_launch(spec, None))


def test_the_same_results_on_the_cpu(tmp_path):
    """The staged kernel on the CPU simulation of a block (library_fixtures.CPU_SIM_BLOCKS), with a table that fits
    and, through a larger k at run time, one that does not (the global table is read): the same sums, bit for bit."""
    from library_fixtures import assert_same_on_cpu
    src, spec, launch = make(tmp_path)
    rw = StageTable().apply(src, spec, launch, {})
    main = """
    for (int k : {16, 20}) {
        const int n = 300;
        std::vector<float> coef(k * k), x(n * k), a(n, -1.0f), b(n, -1.0f);
        for (int i = 0; i < k * k; i++) coef[i] = (float)(i % 7) - 3.0f;
        for (int i = 0; i < n * k; i++) x[i] = (float)(i % 11) / 4.0f;
        launch((n + 127) / 128, 128, 1, [&] { before::mix(coef.data(), x.data(), a.data(), n, k); });
        launch((n + 127) / 128, 128, 1, [&] { after::mix(coef.data(), x.data(), b.data(), n, k); });
        for (int i = 0; i < n; i++) if (a[i] != b[i]) { printf("k=%d: %d differs\\n", k, i); return 1; }
    }
    return 0;"""
    assert_same_on_cpu(tmp_path, MIX, rw.text, main, blocks=True)
