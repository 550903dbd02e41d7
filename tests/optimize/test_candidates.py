"""candidates.evaluate: proposals become kernel files in a work folder and are judged by the evaluator,
each with its own launch configuration when it carries one (against the original with mep.yaml's)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import mepgen.evaluate.evaluator as ev_mod
from evaluate_fakes import FakeNative, install, make_mep
from mepgen.errors import MepgenError
from mepgen.evaluate import Evaluator, Options
from mepgen.evaluate.launchcfg import launch_from
from mepgen.evaluate.native import NativeBackend
from mepgen.optimize import candidates
from mepgen.optimize.proposer import Proposal
from mepgen.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
SEEN: list = []


class LaunchFake(FakeNative):
    def compile(self, kernel_file, launch=None):
        SEEN.append(launch)
        return super().compile(kernel_file, launch)


@pytest.fixture
def ev(tmp_path, monkeypatch):
    install(monkeypatch)
    monkeypatch.setattr(ev_mod, "make_backend", lambda name, spec, mep_dir, build_dir, device, rt, ct:
                        LaunchFake(spec, mep_dir, build_dir, device=device, run_timeout=rt, compile_timeout=ct))
    mep = make_mep(tmp_path)
    e = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(reps=5, rounds=2, run_timeout=5.0))
    e.prepare()
    yield e
    e.close()


def test_proposals_with_and_without_launch(ev, tmp_path):
    SEEN.clear()
    text = ev.original_text + "\n// a rewrite\n"
    plain = Proposal(text=text, change="plain", source="library")
    wide = Proposal(text=text, change="wider blocks", source="library",
                    launch={"grid": ["(N + 511) / 512"], "block": ["512"]})
    res = candidates.evaluate(ev, ev.mep_dir, ev.spec, [plain, wide], tmp_path / "work")
    assert [r.status for r in res] == ["ok", "ok"]
    assert res[0].key != res[1].key          # same text, other launch: another candidate
    assert any("own launch: grid ((N + 511) / 512), block (512)" in n for n in res[1].notes)
    own = [launch for launch in SEEN if launch is not None]      # built side by side: in either order
    assert len(SEEN) == 2 and len(own) == 1 and own[0].block == ["512"] and own[0].callee == "cg::axpy<float>"
    folder = tmp_path / "work" / candidates.candidate_name(wide)
    assert (folder / "kernel.cu").read_text() == text and "wider blocks" in (folder / "proposal.json").read_text()


def test_launch_override_validation(ev):
    assert launch_from(ev.spec, None) is None
    assert launch_from(ev.spec, {"grid": ["(N + 255) / 256"], "block": ["256"]}) is None   # changes nothing
    with pytest.raises(MepgenError, match="unknown launch key"):
        launch_from(ev.spec, {"threads": 5})
    with pytest.raises(MepgenError, match="1 to 3 dimension"):
        launch_from(ev.spec, {"block": [1, 2, 3, 4]})


def test_wrong_mep_is_refused(ev, tmp_path):
    with pytest.raises(MepgenError, match="given to the evaluator"):
        candidates.evaluate(ev, tmp_path, ev.spec, [], tmp_path / "work")


@pytest.fixture(scope="module")
def heat_meps(tmp_path_factory):
    root = tmp_path_factory.mktemp("app") / "heatcg"
    shutil.copytree(REPO / "examples" / "heatcg", root)
    for cmd in (["mepgen", "extract", "."], ["mepgen", "mep", "analysis::dense_matvec"]):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)
    return root / ".mepgen" / "meps"


@pytest.mark.nvcc
def test_native_builds_a_harness_with_the_candidates_launch(heat_meps, tmp_path):
    mep = heat_meps / "analysis.dense_matvec"
    spec = load_spec(mep / "mep.yaml")
    be = NativeBackend(spec, mep, tmp_path / "build")
    launch = launch_from(spec, {"grid": ["(MAT_N + 7) / 8"], "block": ["256"]})
    built = be.compile(mep / "kernel.cu", launch=launch)
    assert not hasattr(built, "message"), getattr(built, "message", "")
    harness = next((tmp_path / "build").glob("harness-*/harness.cu")).read_text()
    assert "const dim3 grid((MEPGEN_SIZE_MAT_N + 7) / 8);" in harness     # sizes as the build defines them
    assert built.key != be.build_key(mep / "kernel.cu")


def test_hand_edited_harness_refuses_overrides(heat_meps, tmp_path):
    mep = tmp_path / "m"
    shutil.copytree(heat_meps / "analysis.dense_matvec", mep)
    (mep / "harness.cu").write_text((mep / "harness.cu").read_text() + "\n// edited\n")
    spec = load_spec(mep / "mep.yaml")
    failed = NativeBackend(spec, mep, tmp_path / "build").compile(
        mep / "kernel.cu", launch=launch_from(spec, {"block": ["128"]}))
    assert "--refresh" in failed.message


def test_the_stream_streams_only_with_lint_workers_and_judges_alike(ev, tmp_path):
    """candidates.Stream: on few cores (no lint workers) the search calls it with whole rounds (`submit` None); with
    workers each proposal is submitted alone; either way the verdicts are those of candidates.evaluate."""
    good = Proposal(text=ev.original_text + "\n// a rewrite\n", change="plain", source="library")
    cheat = Proposal(text="__device__ float kept[8];\n" + ev.original_text, change="state", source="library")
    alone = candidates.evaluate(ev, ev.mep_dir, ev.spec, [good, cheat], tmp_path / "a")
    batch = candidates.Stream(ev, ev.mep_dir, ev.spec, lint_processes=0)
    try:
        assert batch.submit is None
        rounds = batch([good, cheat], tmp_path / "b")
    finally:
        batch.close()
    stream = candidates.Stream(ev, ev.mep_dir, ev.spec, lint_processes=1)
    try:
        streamed = [f.result() for f in (stream.submit(good, tmp_path / "c"), stream.submit(cheat, tmp_path / "c"))]
    finally:
        stream.close()
    for res in (alone, rounds, streamed):
        assert [r.status for r in res] == ["ok", "rejected_by_rules"] and res[1].stage == "lint"
        assert [r.key for r in res] == [r.key for r in alone]
