"""Compiler-flag proposals: the nvcc_flags transformation (fast math only within the outputs'
tolerances), Proposal.nvcc_flags through the library proposer, candidates, the evaluator's keys and
compile, the native build, best/mep.yaml, and the patch stage's note (it cannot write flags back)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mepgen.evaluate.evaluator as ev_mod
from evaluate_fakes import FakeNative, install, make_mep
from library_fixtures import load
from mepgen.evaluate import Evaluator, Options
from mepgen.evaluate.launchcfg import with_flags
from mepgen.evaluate.native import NativeBackend
from mepgen.evaluate.results import CompileFailed
from mepgen.extract import ExtractOptions, extract
from mepgen.optimize import candidates
from mepgen.optimize.best_files import write_launch
from mepgen.optimize.library.compiler_flags import CompilerFlags
from mepgen.optimize.library.proposer import LibraryProposer
from mepgen.optimize.library.source import Refused
from mepgen.optimize.proposer import Attempt, Context, Proposal
from mepgen.optimize.trajectory import content_hash
from mepgen.patch.command import extra_flags, flags_note
from mepgen.spec import load_spec

# one worker cuts this module's MEPs (its module fixture): spread over two, each cut them again (about 12 s)
pytestmark = pytest.mark.xdist_group("library_flags")

SEEN: list = []


@pytest.fixture(scope="module")
def meps(library_meps):
    return library_meps


def test_fast_math_only_within_tolerances(meps):
    t = CompilerFlags()
    src, spec, launch = load(meps["analysis.column_mean"])          # mean: rtol 1e-4
    assert t.space(src, spec, launch) == {"flags": ["-Xptxas -O3", "-use_fast_math", "-use_fast_math -Xptxas -O3"]}
    rw = t.apply(src, spec, launch, {"flags": "-use_fast_math"})
    assert rw.text == src.text and rw.nvcc_flags == ["-use_fast_math"] and rw.launch is None
    assert "fast math" in rw.explanation and "mepgen patch prints the flags" in rw.explanation
    src, spec, launch = load(meps["cg.axpy"])                       # y: rtol 1e-5
    assert t.space(src, spec, launch) == {"flags": ["-Xptxas -O3"]}
    with pytest.raises(Refused, match="-use_fast_math needs every output within rtol >= 0.0001: y has rtol 1e-05"):
        t.apply(src, spec, launch, {"flags": "-use_fast_math"})
    assert t.apply(src, spec, launch, {"flags": "-Xptxas -O3"}).nvcc_flags == ["-Xptxas", "-O3"]
    spec.build.nvcc_flags.extend(["-Xptxas", "-O3"])
    with pytest.raises(Refused, match="rtol 1e-05; mep.yaml already passes -Xptxas -O3"):
        t.space(src, spec, launch)


def test_fast_math_comes_first_where_the_kernel_calls_what_it_approximates(meps):
    """A kernel that calls powf (a `powf` per term of a sum bounds such a kernel) tries -use_fast_math before
    `-Xptxas -O3` (ptxas's default level at nvcc -O3); without such a call the order stays."""
    from mepgen.optimize.library.source import KernelSource
    t = CompilerFlags()
    src, spec, launch = load(meps["analysis.column_mean"])
    line = next(ln for ln in src.text.splitlines() if "mean[col] =" in ln)
    powered = KernelSource(src.text.replace(line, line.replace("mean[col] =", "mean[col] = powf(2.0f, 0.5f) *")), spec)
    assert "powf" in powered.calls()
    assert t.space(powered, spec, launch)["flags"][0] == "-use_fast_math"
    assert t.space(src, spec, launch)["flags"][0] == "-Xptxas -O3"


def test_fast_math_is_tried_second_where_the_kernel_calls_what_it_approximates(meps):
    """Where fast math is the first flag (a `powf`/`sqrtf` call), the proposer and the dry run try it right after
    the catalog's first applicable transformation (a short limit per kernel still reaches it), not last; a sqrtf
    counts like powf. Without such a call the catalog's order stays (flags last)."""
    from mepgen.optimize.dry_run import plan
    from mepgen.optimize.library.catalog import all_transformations, in_order
    from mepgen.optimize.library.source import KernelSource
    src, spec, launch = load(meps["analysis.column_mean"])
    line = next(ln for ln in src.text.splitlines() if "mean[col] =" in ln)
    rooted = KernelSource(src.text.replace(line, line.replace("mean[col] =", "mean[col] = sqrtf(2.0f) *")), spec)
    assert CompilerFlags().leads(rooted, spec) and not CompilerFlags().leads(src, spec)
    names = [c["name"] for c in plan(spec, rooted.text).candidates]
    assert len(names) > 2 and names[1] == "nvcc_flags", names
    assert [c["name"] for c in plan(spec, src.text).candidates][-1] == "nvcc_flags"
    ctx = Context(spec=spec, mep_dir=meps["analysis.column_mean"], original=rooted.text, gpu={})
    props = LibraryProposer().propose(ctx, None, 3)
    assert [p.transformations[0]["name"] for p in props][1] == "nvcc_flags"
    assert props[1].nvcc_flags == ["-use_fast_math"]
    # third: the first rewrite built with the flag (one round holds both and their pair); the round stays at 3
    first, pair = props[0], props[2]
    assert first.text != rooted.text and len(props) == 3
    assert pair.text == first.text and pair.launch == first.launch and pair.nvcc_flags == ["-use_fast_math"]
    assert [t["name"] for t in pair.transformations] == [first.transformations[0]["name"], "nvcc_flags"]
    assert pair.change.startswith(first.change) and pair.change.endswith("built with `-use_fast_math`")
    # without a call that fast math approximates, no pair
    plain = Context(spec=spec, mep_dir=meps["analysis.column_mean"], original=src.text, gpu={})
    assert all(len(p.transformations) == 1 for p in LibraryProposer().propose(plain, None, 8))
    catalog = all_transformations()
    assert in_order(catalog, src, spec) == catalog


def test_library_proposer_carries_flags(meps):
    src, spec, _ = load(meps["analysis.column_mean"])
    ctx = Context(spec=spec, mep_dir=meps["analysis.column_mean"], original=src.text, gpu={})
    props = LibraryProposer(transformations=[CompilerFlags()]).propose(ctx, None, 3)
    assert [p.nvcc_flags for p in props] == [["-Xptxas", "-O3"], ["-use_fast_math"],
                                             ["-use_fast_math", "-Xptxas", "-O3"]]
    assert all(p.text == src.text for p in props)
    parent = Attempt("a0", props[1], result=None)
    child = LibraryProposer().propose(ctx, parent, 4)
    assert child and all(p.nvcc_flags == ["-use_fast_math"] for p in child)        # composed rewrites keep them
    assert all(p.transformations[0]["name"] == "nvcc_flags" for p in child)
    assert content_hash(src.text, None, ["-use_fast_math"]) != content_hash(src.text, None)
    assert content_hash(src.text, None, []) == content_hash(src.text, None)          # old hashes stay valid


class FlagsFake(FakeNative):
    def compile(self, kernel_file, launch=None, flags=()):
        SEEN.append(tuple(flags))
        return super().compile(kernel_file, launch, flags)


@pytest.fixture
def ev(tmp_path, monkeypatch):
    install(monkeypatch)
    monkeypatch.setattr(ev_mod, "make_backend", lambda name, spec, mep_dir, build_dir, device, rt, ct:
                        FlagsFake(spec, mep_dir, build_dir, device=device, run_timeout=rt, compile_timeout=ct))
    mep = make_mep(tmp_path)
    e = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(reps=5, rounds=2, run_timeout=5.0))
    e.prepare()
    yield e
    e.close()


def test_candidates_with_flags_are_other_candidates(ev, tmp_path):
    SEEN.clear()
    text = ev.original_text + "\n// same text\n"
    plain = Proposal(text=text, change="plain", source="library")
    fast = Proposal(text=text, change="fast math", source="library", nvcc_flags=["-use_fast_math"])
    assert candidates.candidate_name(plain) != candidates.candidate_name(fast)
    res = candidates.evaluate(ev, ev.mep_dir, ev.spec, [plain, fast], tmp_path / "work")
    assert [r.status for r in res] == ["ok", "ok"] and res[0].key != res[1].key
    assert any("extra nvcc flags: -use_fast_math" in n for n in res[1].notes)
    assert sorted(SEEN) == [(), ("-use_fast_math",)]       # built side by side: in either order
    meta = (tmp_path / "work" / candidates.candidate_name(fast) / "proposal.json").read_text()
    assert '"-use_fast_math"' in meta


def test_best_yaml_and_patch_note(meps, tmp_path):
    spec = load_spec(meps["analysis.column_mean"] / "mep.yaml")
    out = tmp_path / "best" / "mep.yaml"
    out.parent.mkdir()
    write_launch(spec, None, out, ["-use_fast_math"])
    winner = load_spec(out)
    assert winner.build.nvcc_flags == [*spec.build.nvcc_flags, "-use_fast_math"]     # the application's, then it
    assert winner.launch.grid == spec.launch.grid and "nvcc flags" in out.read_text()
    assert extra_flags(spec, winner) == ["-use_fast_math"] and extra_flags(spec, spec) == []
    note = flags_note(["-use_fast_math"])
    assert "-use_fast_math" in note and "does not write build flags back" in note


@pytest.mark.nvcc
def test_native_build_takes_flags(meps, tmp_path):
    mep = meps["cg.xpay"]
    spec = load_spec(mep / "mep.yaml")
    be = NativeBackend(spec, mep, tmp_path / "build")
    kernel = mep / "kernel.cu"
    assert be.build_key(kernel) != be.build_key(kernel, None, with_flags(spec, ["-Xptxas", "-O3"]))
    built = be.compile(kernel, flags=("-Xptxas", "-O3"))
    assert not isinstance(built, CompileFailed), built.message
    plain = be.compile(kernel)
    assert not isinstance(plain, CompileFailed) and plain.key != built.key


def _winner(app, tmp_path, edit_kernel: bool) -> Path:
    r = subprocess.run([sys.executable, "-m", "mepgen.cli", "mep", "analysis::dense_matvec"], cwd=app,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    mep = app / ".mepgen/meps/analysis.dense_matvec"
    out = tmp_path / "winner"
    out.mkdir()
    text = (mep / "kernel.cu").read_text()
    if edit_kernel:
        text = text.replace("y[row] = 0;", "y[row] = 0.0f;")
    (out / "kernel.cu").write_text(text)
    (out / "mep.yaml").write_text(re.sub(r"nvcc_flags: \[([^\]]*)\]", r"nvcc_flags: [\1, -use_fast_math]",
                                         (mep / "mep.yaml").read_text(), count=1))     # after the application's
    return out


@pytest.fixture
def app(heatcg_copy):
    extract(heatcg_copy, ExtractOptions(jobs=2))
    return heatcg_copy


def test_patch_prints_flags_it_cannot_write_back(app, tmp_path):
    w = _winner(app, tmp_path, edit_kernel=True)
    r = subprocess.run([sys.executable, "-m", "mepgen.cli", "patch", "dense_matvec", "--from", str(w / "kernel.cu"),
                        "--json"], cwd=app, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["nvcc_flags"] == ["-use_fast_math"] and out["launch"] == []
    r = subprocess.run([sys.executable, "-m", "mepgen.cli", "patch", "dense_matvec", "--from", str(w / "kernel.cu")],
                       cwd=app, capture_output=True, text=True)
    assert r.returncode == 0 and "extra nvcc flags: -use_fast_math -- mepgen patch does not write build flags" in r.stdout


def test_patch_of_a_flags_only_winner_says_so(app, tmp_path):
    w = _winner(app, tmp_path, edit_kernel=False)
    r = subprocess.run([sys.executable, "-m", "mepgen.cli", "patch", "dense_matvec", "--from", str(w / "kernel.cu"),
                        "--json"], cwd=app, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"kernel": "analysis::dense_matvec", "unchanged": True,
                                    "nvcc_flags": ["-use_fast_math"]}
    assert not (app / ".mepgen/patches/analysis.dense_matvec.diff").exists()
