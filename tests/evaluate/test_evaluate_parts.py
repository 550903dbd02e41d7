"""Source rules, the results file, peaks and the impossible check, name matching, ncu parsing, the CLI."""
from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from evaluate_fakes import FIXTURES
from mepgen.cli import main
from mepgen.errors import MepgenError
from mepgen.evaluate import peaks
from mepgen.evaluate.journal import Journal
from mepgen.evaluate.profile import kernel_regex, parse_csv
from mepgen.evaluate.results import EvalResult, Mismatch, Timed, WrongResult
from mepgen.evaluate.rules import check
from mepgen.evaluate.symbols import find_kernel, qualified_name

ORIGINAL = (FIXTURES / "heat" / "kernel.cu").read_text()


@pytest.mark.parametrize("addition, rule", [
    ("#define cudaEventRecord(e, s) cudaSuccess", "redefines"),
    ("static int s = [] { cudaStream_t st; cudaStreamCreate(&st); return 0; }();", "host API"),
    ("void go(float* p) { heat::diffuse_step<<<1, 1>>>(p, p, {}, 0, 0); }", "launches a kernel"),
    ('static FILE* f = fopen("../ref/set0/u_new.npy", "rb");', "files"),
    ("#include <thread>", "threads"),
    ("__device__ float cache[1 << 20];", "device-global state"),
    ("__device__ int calls = 0;", "device-global state"),
    ("__managed__ float m;", "device-global state"),
    ("__device__ const float table[2] = {1.0f, 2.0f};", "device-side state"),
    ("__constant__ float weights[4];", "device-side state"),
])
def test_rules_reject_added_cheats(addition, rule):
    violations = check(ORIGINAL + "\n" + addition + "\n", ORIGINAL)
    assert len(violations) >= 1 and rule in violations[0].rule, violations
    assert violations[0].line == ORIGINAL.count("\n") + 2


@pytest.mark.parametrize("addition", [
    "__device__ __forceinline__ float twice(const float* p) { return 2 * p[0]; }",
    "constexpr int kTile = 32;",
    "// cudaStreamCreate(&s); fopen(\"x\") in a comment is fine",
    'const char* note = "cudaMemcpy(";',
    "template <typename T> __device__ T sq(T v) { return v * v; }",
])
def test_rules_allow_ordinary_kernel_code(addition):
    assert check(ORIGINAL + "\n" + addition + "\n", ORIGINAL) == []


def test_rules_allow_what_the_original_already_has():
    original = ORIGINAL + "\n__device__ int counter;\n"
    assert check(original, original) == []


def test_result_round_trip():
    r = EvalResult(name="v", key="k", backend="native", status="wrong_result", stage="verify",
                   wrong=WrongResult([Mismatch("y", 1, "run", 10, 2, 0.5, 0.1, 3, 1.0, 1.5, rtol=1e-5, atol=0.0)],
                                     ["x"]),
                   timed=Timed(1.0, 0.01, 0.9, 1.1, 10, 2))
    back = EvalResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r
    assert "y (input set 1): 2 of 10 elements wrong" in back.feedback()
    assert "x: the kernel modified this input buffer" in back.feedback()


def test_journal_skips_a_torn_last_line_and_appends_after_it(tmp_path):
    path = tmp_path / "r.jsonl"
    j = Journal(path, "cg.axpy", "h")
    j.append(EvalResult(name="a", key="ka", backend="native"))
    with open(path, "a") as fh:
        fh.write('{"name": "b", "key": "kb", "backe')         # a crash mid-write
    j2 = Journal(path, "cg.axpy", "h")
    assert set(j2.results) == {"ka"} and j2.skipped_lines == 1
    j2.append(EvalResult(name="c", key="kc", backend="native"))
    assert set(Journal(path, "cg.axpy", "h").results) == {"ka", "kc"}


def test_journal_rejects_other_files(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    with pytest.raises(MepgenError, match="notes.txt: not a mepgen results file"):
        Journal(other, "cg.axpy", "h")
    Journal(tmp_path / "r.jsonl", "cg.axpy", "h")
    with pytest.raises(MepgenError, match="results for kernel 'cg.axpy', not 'heat.diffuse_step'"):
        Journal(tmp_path / "r.jsonl", "heat.diffuse_step", "h")


# --- peaks and the impossible -------------------------------------------------------------------------

PEAKS = peaks.Peaks("H200", bandwidth_gbs=4000.0, gflops=60000.0, l2_bytes=50 << 20, raw={})


def test_achieved_throughput_and_share_of_peak():
    a = peaks.achieved(4_000_000_000, None, 2.0, PEAKS)
    assert a.gbps == pytest.approx(2000.0) and a.pct_bw == pytest.approx(50.0) and a.impossible is None


def test_faster_than_dram_is_impossible():
    a = peaks.achieved(4_000_000_000, None, 0.5, PEAKS)      # 8 TB/s on a 4 TB/s GPU
    assert a.impossible and "must cross DRAM" in a.impossible


def test_working_set_in_l2_is_not_judged_by_dram():
    assert peaks.achieved(40 << 20, None, 1e-4, PEAKS).impossible is None


def test_too_many_flops_is_impossible():
    a = peaks.achieved(None, 10**12, 1.0, PEAKS)             # 1 PFLOP/s
    assert a.impossible and "GFLOP/s" in a.impossible


def test_peaks_cache_respects_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(peaks, "gpu_identity", lambda d: "H200|570|0000:01:00.0")
    rec = {"device": "H200", "copy_gbs": 3900.0, "read_gbs": 4100.0, "fp32_gflops": 60000.0, "fp64_gflops": 30000.0,
           "l2_bytes": 52428800, "stream_curve": [[4 << 20, 900.0, 1000.0], [64 << 20, 3500.0, 3600.0]]}
    calls = []
    monkeypatch.setattr(peaks, "measure", lambda device, build_dir: calls.append(device) or rec)
    first = peaks.get(0, tmp_path / "b")
    second = peaks.get(0, tmp_path / "b")
    assert calls == [0] and first == second and first.bandwidth_gbs == 4100.0
    assert json.loads((tmp_path / "mepgen" / "peaks.json").read_text())["H200|570|0000:01:00.0"] == rec


def test_peaks_measured_before_the_stream_curve_are_measured_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(peaks, "gpu_identity", lambda d: "H200|570|0000:01:00.0")
    old = {"device": "H200", "copy_gbs": 3900.0, "read_gbs": 4100.0, "fp32_gflops": 6e4, "fp64_gflops": 3e4,
           "l2_bytes": 52428800}
    (tmp_path / "mepgen").mkdir()
    (tmp_path / "mepgen" / "peaks.json").write_text(json.dumps({"H200|570|0000:01:00.0": old}))
    new = dict(old, stream_curve=[[4 << 20, 900.0, 1000.0]])
    monkeypatch.setattr(peaks, "measure", lambda device, build_dir: new)
    assert peaks.get(0, tmp_path / "b").stream_curve == [(4 << 20, 1000.0)]


def test_stream_ceiling_interpolates_by_size_and_scores_short_kernels_against_it():
    rec = {"device": "H200", "copy_gbs": 4200.0, "read_gbs": 4400.0, "fp32_gflops": 6e4, "fp64_gflops": 3e4,
           "l2_bytes": 60 << 20, "buffer_bytes": 1 << 30,
           "stream_curve": [[16 << 20, 2100.0, 2200.0], [64 << 20, 3500.0, 3600.0], [256 << 20, 4200.0, 4000.0]]}
    p = peaks.Peaks.from_record(rec)
    assert p.bandwidth_gbs == 4400.0
    assert p.stream_gbs(16 << 20) == pytest.approx(2200.0) and p.stream_gbs(64 << 20) == pytest.approx(3600.0)
    assert p.stream_gbs(32 << 20) == pytest.approx(2900.0)        # halfway in log(size) between 16 and 64 MiB
    assert p.stream_gbs(8 << 20) is None                          # below the curve: latency-bound, no ceiling
    assert p.stream_gbs(512 << 20) == pytest.approx(4300.0)       # between the curve and the 1 GiB peak
    assert p.stream_gbs(4 << 30) == 4400.0
    # a 64 MiB kernel in 20 us: 76% of the peak, 93% of what one perfect streaming launch of 64 MiB reaches
    a = peaks.achieved(64 << 20, None, 0.020, p)
    assert a.pct_bw == pytest.approx(100 * 3355.4432 / 4400, rel=1e-4)
    assert a.pct_stream == pytest.approx(100 * 3355.4432 / 3600, rel=1e-4)
    assert peaks.achieved(64 << 20, None, 0.020, PEAKS).pct_stream is None     # no curve measured: no claim


# --- names and profiles ------------------------------------------------------------------------------

def test_qualified_name_of_demangled_signatures():
    assert qualified_name("void cg::axpy<float>(int, float, float const*, float*)") == "cg::axpy<float>"
    assert qualified_name("heat::diffuse_step(float const*, float*, heat::Grid, float, float)") == "heat::diffuse_step"


def test_find_kernel_needs_a_unique_match():
    entries = ["_ZN2cg4axpyIfEEviT_PKS1_PS1_", "_ZN2cg4axpyIdEEviT_PKS1_PS1_"]
    if shutil.which("c++filt") or shutil.which("cu++filt"):
        assert find_kernel(entries, "cg::axpy<double>") == "_ZN2cg4axpyIdEEviT_PKS1_PS1_"
    with pytest.raises(MepgenError, match="cannot tell which entry point"):
        find_kernel(entries, "cg::axpy")
    assert find_kernel(["_Z3fooPf"], "bar") == "_Z3fooPf"       # the only kernel in the file


def test_ncu_csv_parsing():
    text = """==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","mep","h","axpy","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","91.52"
"0","1","mep","h","axpy","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","16"
"0","1","mep","h","axpy","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","12.5"
"""
    m = parse_csv(text)
    assert m == {"dram_pct": 91.52, "registers": 16.0, "duration_ns": 12500.0}
    assert kernel_regex("cg::axpy<float>") == "regex:^axpy$"


# --- the command line --------------------------------------------------------------------------------

MINI_HARNESS = """#include MEP_KERNEL_FILE
int main() { void (*k)(int, float, const float*, float*) = cg::axpy<float>; return k == nullptr; }
"""


@pytest.fixture
def app(tmp_path, monkeypatch):
    app = tmp_path / "app"
    mep = app / ".mepgen" / "meps" / "cg.axpy"
    shutil.copytree(FIXTURES / "axpy", mep)
    (mep / "harness.cu").write_text(MINI_HARNESS)
    (app / ".mepgen" / "inventory.json").write_text("{}")
    import mepgen.evaluate.evaluator as ev_mod
    monkeypatch.setattr(ev_mod, "list_gpus", lambda: ([], "nvidia-smi -L found none"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    return app


@pytest.mark.nvcc
def test_run_without_gpu_compiles_then_says_so(app, tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text("#include <cstdio>\n" + (app / ".mepgen/meps/cg.axpy/kernel.cu").read_text().replace("a * x[i]", "a * q"))
    r = CliRunner().invoke(main, ["run", "cg.axpy", "-C", str(app), "--backend", "native", "--variant", str(bad)])
    assert r.exit_code == 4
    assert "bad.cu: COMPILE FAILED" in r.output and 'identifier "q" is undefined' in r.output
    assert r.output.strip().splitlines()[-1] == "mepgen: no CUDA device: nvidia-smi -L found none"


@pytest.mark.nvcc
def test_run_with_a_broken_mep_kernel_exits_3(app):
    k = app / ".mepgen/meps/cg.axpy/kernel.cu"
    k.write_text(k.read_text().replace("+ y[i];", "+ y[i]"))
    r = CliRunner().invoke(main, ["run", "cg.axpy", "-C", str(app), "--backend", "native"])
    assert r.exit_code == 3 and "mepgen: the MEP's own kernel.cu does not compile" in r.output


def test_run_unknown_kernel_is_one_line(app):
    r = CliRunner().invoke(main, ["run", "nope.kernel", "-C", str(app)])
    assert r.exit_code == 2 and r.output.strip() == (
        f"mepgen: no MEP for 'nope.kernel' in {app.resolve() / '.mepgen' / 'meps'}: run `mepgen mep nope.kernel` first")


def test_pycuda_without_pycuda_is_one_line(app, monkeypatch):
    import mepgen.evaluate.devices as devices
    monkeypatch.setattr(devices, "have_pycuda", lambda: False)
    r = CliRunner().invoke(main, ["run", "cg.axpy", "-C", str(app), "--backend", "pycuda"])
    assert r.exit_code == 2 and "pip install 'mepgen[gpu]'" in r.output


def test_profile_builds_the_candidates_own_launch_and_flags(tmp_path, monkeypatch):
    """ncu must profile the candidate as it was timed: a rewrite that needs another grid (warp_per_row) run
    on mep.yaml's launch would do a fraction of the work and report an impossible duration."""
    from mepgen.evaluate import evaluator as evaluator_mod
    from mepgen.evaluate.backend import InputSet
    from mepgen.evaluate.native import NativeBackend
    from mepgen.spec import load_spec
    from mepgen.evaluate.launchcfg import launch_from
    from mepgen.evaluate.results import CompileInfo

    mep = tmp_path / "axpy"
    shutil.copytree(FIXTURES / "axpy", mep)
    spec = load_spec(mep / "mep.yaml")
    ev = evaluator_mod.Evaluator(spec, mep, evaluator_mod.Options(backend="native", profile=True))
    seen = []

    def fake_compile(self, kernel_file, launch=None, flags=()):
        seen.append((launch, tuple(flags)))
        return evaluator_mod.Built(kernel_file, tmp_path / "mep", "k", CompileInfo())

    monkeypatch.setattr(NativeBackend, "compile", fake_compile)
    monkeypatch.setattr(evaluator_mod.profile_mod, "run_ncu", lambda *a, **k: {"dram_pct": 80.0})
    ev.sets = [InputSet(0, tmp_path / "set0")]
    worker = ev.workers[0]
    launch = launch_from(spec, {"grid": ["(N * 32 + 255) / 256"], "block": ["256"], "shared_mem": "0"})
    assert ev.profile(mep / "kernel.cu", worker, launch, ("-use_fast_math",)) == {"dram_pct": 80.0}
    assert ev.profile(mep / "kernel.cu", worker) == {"dram_pct": 80.0}
    assert seen == [(launch, ("-use_fast_math",)), (None, ())]


def test_a_harness_that_mep_yaml_no_longer_renders_is_named(heatcg_meps, tmp_path):
    """mep.yaml edited after `mepgen mep` (here a buffer's placement) without --refresh: the native backend would
    run the old harness.cu while pycuda follows mep.yaml; the evaluator's results say so (a note on each)."""
    from mepgen.evaluate.launchcfg import stale_harness
    from mepgen.spec import load_spec
    app, _ = heatcg_meps
    mep = tmp_path / "analysis.dense_matvec"
    shutil.copytree(app / ".mepgen/meps/analysis.dense_matvec", mep)
    y = mep / "mep.yaml"
    assert stale_harness(load_spec(y), mep) is None
    assert "role: in," in y.read_text()
    y.write_text(y.read_text().replace("role: in,", "role: in, placement: 8,", 1))
    why = stale_harness(load_spec(y), mep)
    assert why.startswith("harness.cu is not what mep.yaml renders") and \
        "`mepgen mep analysis.dense_matvec --refresh`" in why


def test_the_file_limit_covers_the_mep_s_own_buffers(tmp_path):
    """A captured struct's pointers reach buffers of the MEP's own (`buffers:`), written back like parameters:
    the harness's file-size limit must cover the largest of them (SIGXFSZ killed three captured MEPs)."""
    import dataclasses
    import types

    from evaluate_fakes import make_mep
    from mepgen.evaluate.native import NativeBackend
    from mepgen.spec import Buffer, load_spec
    spec = load_spec(make_mep(tmp_path) / "mep.yaml")
    small = NativeBackend._file_limit(types.SimpleNamespace(spec=spec))
    big = Buffer(name="cells", ctype="double *", dtype="float64", count="1 << 24", role="inout")
    grown = dataclasses.replace(spec, buffers=[*spec.buffers, big])
    assert NativeBackend._file_limit(types.SimpleNamespace(spec=grown)) >= (1 << 24) * 8 > small
