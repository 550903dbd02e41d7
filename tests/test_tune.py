"""`mepgen tune`: the whole path's decisions, on a small application of our own (a real Makefile build, real runs,
a real check) with the GPU stages (capture, optimize, patch) standing in as scripted mepgen commands.

The application: `src.txt` holds one line per kernel, `k=slow`; `make` copies it to `bin.txt` and fails on a
`broken` line; `./run.sh` sleeps a little for each slow kernel (less when the kernel is fast), writes `out.txt`, and
exits 1 on a `crash` line; the check greps `out.txt` for `ok` (a `wrong` line makes it write `bad`). A scripted
patch turns `k=slow` into `k=<what the test wants>`, and its revert puts the line back.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from mepgen.cli import main
from mepgen.tune import command as tune_cmd
from mepgen.tune.stages import StageResult

RUN = """#!/bin/sh
grep -q crash bin.txt && exit 1
n=$(grep -c slow bin.txt)
sleep $(awk "BEGIN { print 0.05 + $n * 0.12 }")
if grep -q wrong bin.txt; then echo bad > out.txt; else echo ok > out.txt; fi
grep -q wrong bin.txt && echo FAIL || echo PASS
"""


def make_app(tmp_path: Path, kernels=("a", "b")) -> Path:
    app = tmp_path / "app"
    app.mkdir()
    (app / "src.txt").write_text("".join(f"{k}=slow\n" for k in kernels))
    (app / "Makefile").write_text("all:\n\t@! grep -q broken src.txt || (echo 'src.txt: error: broken' && false)\n"
                                  "\tcp src.txt bin.txt\n")
    (app / "run.sh").write_text(RUN)
    os.chmod(app / "run.sh", 0o755)
    (app / ".mepgen").mkdir()
    return app


class Stages:
    """Scripted `mepgen capture/optimize/patch`: `wins` maps a kernel to (MEP speedup, what its patch makes of it)."""

    def __init__(self, app: Path, wins: dict[str, tuple[float, str]], captured=("a", "b")):
        self.app, self.wins, self.captured = app, wins, captured
        self.calls: list[list[str]] = []
        self.fail_optimize = False
        self.needs_longer: set[str] = set()
        self.refuse_best: set[str] = set()       # kernels whose best patch refuses (its launch, say)
        self.others: dict[str, list[tuple[float, dict]]] = {}    # kernel -> other attempts (speedup, fields)
        self.flags_only: set[str] = set()        # kernels whose best differs from the original in nvcc flags alone

    def _set(self, kernel: str, value: str) -> None:
        src = self.app / "src.txt"
        lines = [f"{kernel}={value}" if l.split("=")[0] == kernel else l for l in src.read_text().splitlines()]
        src.write_text("\n".join(lines) + "\n")

    def __call__(self, args, log, cwd=None, echo=True, timeout=None):
        self.calls.append(args)
        ws = self.app / ".mepgen"
        if args[0] == "extract":
            (ws / "inventory.json").write_text(json.dumps({"files": {}}))
            return StageResult(0, {}, "")
        if args[0] == "capture" and "--gpu-times" in args:
            # the kernels' GPU time is the run's sleep: 120 ms a slow line, 30 ms a fast kernel
            binary = (self.app / "bin.txt").read_text()
            kernels = {f"{k}(float*)": {"launches": 2, "total_ms": 120.0 if f"{k}=slow" in binary else 30.0}
                       for k in "ab" if f"{k}=" in binary}
            extra = binary.count("slow") - sum(f"{k}=slow" in binary for k in "ab")
            return StageResult(0, {"gpu_total_ms": sum(v["total_ms"] for v in kernels.values()) + 120.0 * extra,
                                   "kernels": kernels}, "")
        if args[0] == "capture":
            return StageResult(0, [{"kernel": f"app::{k}", "outcome": "captured", "mep": str(ws / "meps" / f"app.{k}"),
                                    "complete": True, "kernel_ms": 1.0, "launched_as": f"{k}(float*)"}
                                   for k in self.captured], "")
        if args[0] == "optimize":
            if self.fail_optimize:
                raise KeyboardInterrupt          # the tune is killed in the middle of the batch
            batch = args[args.index("--run-name") + 1] if "--run-name" in args else args[args.index("--resume") + 1]
            for kid in args[args.index("--only") + 1].split(","):
                k = kid.split(".")[-1]
                sp = self.wins.get(k, (None, ""))[0]
                run = ws / "runs" / kid / batch
                (run / "best").mkdir(parents=True, exist_ok=True)
                (run / "best" / "kernel.cu").write_text(f"// {k} best\n")
                (run / "candidates").mkdir(exist_ok=True)
                lines = []
                for n, (osp, fields) in enumerate([(sp, {"launch": {"block": ["512"]}})] + self.others.get(k, [])):
                    same = n == 0 or fields.pop("best_text", False)       # the best's text (another launch)
                    (run / "candidates" / f"c{n}.cu").write_text(f"// {k} best\n" if same else f"// {k} text {n}\n")
                    lines.append(json.dumps({"kind": "attempt", "id": f"c{n}", "faster": True, "speedup": osp,
                                             "launch": None, "nvcc_flags": [], **fields}))
                (run / "trajectory.jsonl").write_text("\n".join(lines) + "\n")
                row = {"kernel": kid, "name": f"app::{k}", "status": "done", "speedup": sp, "run": str(run),
                       "original_ms": 1.0, "best_ms": 1.0 / sp if sp else 1.0, "change": "tile" if sp else None,
                       "fidelity_ratio": 1.01, "fidelity": {"ratio": 1.01, "ok": True, "forced": False}}
                limit = float(args[args.index("--time-limit") + 1])
                if k in self.needs_longer and limit < 90:
                    row = {"kernel": kid, "status": "failed", "error": "mepgen: the baseline of k needs about 13 s "
                           "(...); give --time-limit >= 90", "needs_time_limit_s": 90.0}
                (ws / "batches" / batch / "rows").mkdir(parents=True, exist_ok=True)
                (ws / "batches" / batch / "rows" / f"{kid}.json").write_text(json.dumps(row))
            return StageResult(0, {}, "")
        if args[0] == "patch":
            k = args[1].split(".")[-1]
            if "--revert" in args:
                self._set(k, "slow")
            elif k in self.refuse_best and args[args.index("--from") + 1].endswith("best/kernel.cu"):
                return StageResult(2, {}, "mepgen: main.cu:12: the grid there is not spelled with its block")
            elif k in self.flags_only and args[args.index("--from") + 1].endswith("best/kernel.cu"):
                return StageResult(0, {"unchanged": True, "nvcc_flags": ["-maxrregcount=64"]}, "")
            else:
                self._set(k, self.wins[k][1])
            return StageResult(0, {"file": "src.txt"}, "")
        raise AssertionError(args)


def tune(app: Path, stages: Stages, monkeypatch, *extra):
    monkeypatch.setattr(tune_cmd, "mepgen", stages)
    monkeypatch.chdir(app)
    monkeypatch.setenv("MEPGEN_CONFIG", str(app / "none.yaml"))
    (app / "none.yaml").write_text("{}\n")
    return CliRunner().invoke(main, ["tune", "-C", str(app), "--check", "grep -q ok out.txt", "--runs", "2",
                                     *extra, "--", "./run.sh"])


def report(app: Path) -> dict:
    return json.loads((app / ".mepgen" / "tune" / "report.json").read_text())


def test_wins_are_patched_rebuilt_checked_and_the_application_is_faster(tmp_path, monkeypatch):
    app = make_app(tmp_path)
    stages = Stages(app, {"a": (3.0, "fast"), "b": (2.0, "fast")})
    r = tune(app, stages, monkeypatch)
    assert r.exit_code == 0, r.output
    d = report(app)
    assert d["check_passed"] is True and sorted(d["kept"]) == ["app.a", "app.b"]
    assert d["app_verdict"] == "faster" and d["app_speedup"] > 1.5        # 0.29 s -> 0.05 s per run
    assert (app / "bin.txt").read_text() == "a=fast\nb=fast\n"             # rebuilt from the patched sources
    rows = {k["id"]: k for k in d["kernels"]}
    assert rows["app.a"]["mep_speedup"] == 3.0 and rows["app.a"]["fidelity_ratio"] == 1.01
    assert rows["app.a"]["patch"] == "applied"
    md = (app / ".mepgen" / "tune" / "report.md").read_text()
    assert "| app::a | captured | 1 | 1.01 | done | 3.00x | tile | applied | 120 / 30 (4.00x) |" in md
    assert rows["app.b"]["app_gpu_total_ms_before"] == 120.0 and rows["app.b"]["app_kernel_speedup"] == 4.0
    assert d["app_gpu_ms_before"] == 240.0 and d["app_gpu_ms_after"] == 60.0 and d["app_gpu_speedup"] == 4.0
    assert d["kernels_share"] > 0.5 and d["app_verdict_why"] is None
    assert d["bound"]["kernels_share"] > 0.5 and d["bound"]["max_app_speedup"] > 2     # 240 ms of a ~0.29 s run
    assert "making them infinitely fast would make it at most" in r.output


def test_a_patch_that_breaks_the_build_is_reverted_alone(tmp_path, monkeypatch):
    app = make_app(tmp_path)
    stages = Stages(app, {"a": (3.0, "fast"), "b": (2.0, "broken")})
    r = tune(app, stages, monkeypatch)
    assert r.exit_code == 0, r.output
    d = report(app)
    rows = {k["id"]: k for k in d["kernels"]}
    assert rows["app.b"]["patch"] == "reverted" and "breaks the application's build" in rows["app.b"]["patch_why"]
    assert d["kept"] == ["app.a"] and d["check_passed"] is True
    md = (app / ".mepgen" / "tune" / "report.md").read_text()      # the table cuts the reason; the list has it whole
    assert f"- app::b (reverted): {rows['app.b']['patch_why']}" in md.split("## Why a winner was not patched")[1]
    assert (app / "src.txt").read_text() == "a=fast\nb=slow\n"


@pytest.mark.parametrize("check", ["grep -q ok out.txt", 'grep -q PASS "$MEPGEN_TUNE_LOG"'])
def test_a_patch_that_fails_the_check_is_found_and_reverted(tmp_path, monkeypatch, check):
    app = make_app(tmp_path)
    stages = Stages(app, {"a": (3.0, "wrong"), "b": (2.0, "fast")})
    r = tune(app, stages, monkeypatch, "--check", check)
    assert r.exit_code == 0, r.output
    d = report(app)
    rows = {k["id"]: k for k in d["kernels"]}
    assert rows["app.a"]["patch"] == "reverted" and "check fails" in rows["app.a"]["patch_why"]
    assert d["kept"] == ["app.b"] and d["check_passed"] is True
    assert (app / "src.txt").read_text() == "a=slow\nb=fast\n" and (app / "bin.txt").read_text() == "a=slow\nb=fast\n"


def test_a_slower_application_gets_every_patch_reverted(tmp_path, monkeypatch):
    app = make_app(tmp_path, kernels=("a",))
    # the "win" makes the application slower: two slow lines' worth of sleep
    stages = Stages(app, {"a": (2.0, "slow\nz=slow\ny=slow")}, captured=("a",))
    r = tune(app, stages, monkeypatch)
    assert r.exit_code == 0, r.output
    d = report(app)
    assert d["kept"] == [] and "slower" in d["note"]
    assert (app / "src.txt").read_text().startswith("a=slow\n")


def test_an_application_failing_its_check_before_any_change_stops_the_tune(tmp_path, monkeypatch):
    app = make_app(tmp_path)
    (app / "src.txt").write_text("a=crash\n")
    stages = Stages(app, {})
    r = tune(app, stages, monkeypatch)
    assert r.exit_code == 5 and "fails before any change: the application exited with 1" in r.output
    assert not any(c[0] == "capture" for c in stages.calls)


def test_an_interrupted_tune_continues_where_it_stopped(tmp_path, monkeypatch):
    app = make_app(tmp_path)
    stages = Stages(app, {"a": (3.0, "fast"), "b": (2.0, "fast")})
    stages.fail_optimize = True
    r = tune(app, stages, monkeypatch)
    assert r.exit_code == 130
    state = json.loads((app / ".mepgen" / "tune" / "state.json").read_text())
    assert "before" in state and "capture" in state and "optimize" not in state
    stages.fail_optimize = False
    stages.calls.clear()
    r = tune(app, stages, monkeypatch)
    assert r.exit_code == 0, r.output
    assert "continuing the tune" in r.output
    assert [c[0] for c in stages.calls][:1] == ["optimize"]           # no second capture, no second reference run
    assert sorted(report(app)["kept"]) == ["app.a", "app.b"]


def test_nothing_captured_complete_is_exit_3_with_a_report(tmp_path, monkeypatch):
    app = make_app(tmp_path)
    stages = Stages(app, {}, captured=())
    r = tune(app, stages, monkeypatch)
    assert r.exit_code == 3 and "no launched kernel was captured with a complete MEP" in r.output
    assert report(app)["outcome"].startswith("nothing to tune")


def test_no_build_command_is_a_usage_error(tmp_path, monkeypatch):
    app = tmp_path / "bare"
    app.mkdir()
    monkeypatch.chdir(app)
    r = CliRunner().invoke(main, ["tune", "-C", str(app), "--", "./x"])
    assert r.exit_code == 2 and "no build command" in r.output


def test_a_kernel_whose_original_needs_a_longer_search_gets_it_once(tmp_path, monkeypatch):
    app = make_app(tmp_path)
    stages = Stages(app, {"a": (3.0, "fast"), "b": (2.0, "fast")})
    stages.needs_longer = {"b"}
    r = tune(app, stages, monkeypatch, "--time-limit", "40")
    assert r.exit_code == 0, r.output
    opt = [c for c in stages.calls if c[0] == "optimize"]
    # the 90 s its baseline needs, and the 40 s of search every kernel has on top
    assert len(opt) == 2 and opt[1][opt[1].index("--only") + 1] == "app.b" and "130.0" in opt[1]
    assert sorted(report(app)["kept"]) == ["app.a", "app.b"]


def test_kernels_under_the_hotspot_share_are_reported_not_optimized():
    """A kernel taking 0.5 % of the kernels' GPU time is not a hotspot: it is left out with its share, the others
    are optimized longest first; with a share of 0 every captured kernel is."""
    from mepgen.tune.command import _chosen
    outcomes = [{"outcome": "captured", "mep": f"/w/.mepgen/meps/{k}", "complete": True, "kernel": k,
                 "kernel_ms": ms, "launched_as": f"{k}(float*)"} for k, ms in (("big", 9.0), ("mid", 1.0), ("tiny", 0.05))]
    outcomes.append({"outcome": "captured", "mep": "/w/.mepgen/meps/open", "complete": False, "kernel": "open",
                     "launched_as": "open(int)"})
    gpu = {"gpu_total_ms": 10.0, "kernels": {"big(float*)": {"total_ms": 8.95}, "mid(float*)": {"total_ms": 1.0},
                                             "tiny(float*)": {"total_ms": 0.05}, "open(int)": {"total_ms": 0.0}}}
    chosen, minor = _chosen(outcomes, None, gpu, 0.01)
    assert [c["id"] for c in chosen] == ["big", "mid"]
    assert list(minor) == ["tiny"] and "0.50% of the kernels' GPU time" in minor["tiny"]
    chosen, minor = _chosen(outcomes, None, gpu, 0.0)
    assert [c["id"] for c in chosen] == ["big", "mid", "tiny"] and minor == {}
    assert [c["id"] for c in _chosen(outcomes, 1, gpu, 0.01)[0]] == ["big"]


def test_the_longest_kernels_are_those_with_the_most_gpu_time_over_the_run():
    """A kernel launched 100 times at 8.8 ms (878 ms in all) comes before one launched once at 391 ms: `--top 1`
    took the single long launch on the GPU. Without the run's profile the captured launch's time decides."""
    from mepgen.tune.command import _chosen
    outcomes = [{"outcome": "captured", "mep": f"/w/.mepgen/meps/{k}", "complete": True, "kernel": k,
                 "kernel_ms": ms, "launched_as": f"{k}(float*)"} for k, ms in (("once", 391.0), ("often", 8.8))]
    gpu = {"gpu_total_ms": 1269.0, "kernels": {"once(float*)": {"total_ms": 391.0},
                                               "often(float*)": {"total_ms": 878.0}}}
    assert [c["id"] for c in _chosen(outcomes, 1, gpu, 0.01)[0]] == ["often"]
    assert [c["id"] for c in _chosen(outcomes, 1, None, 0.01)[0]] == ["once"]


def _timing(*seconds):
    from mepgen.tune.appruns import Timing
    return Timing([{"seconds": s, "exit_code": 0, "ok": True} for s in seconds])


def test_a_wall_time_change_the_kernels_cannot_explain_is_no_change():
    """Seen on a real application: its wall time went 0.42 -> 0.35 s (noise 15 %) while its kernels saved 0.02 ms
    on the GPU; the other way round another one read 0.37 -> 0.42 s while its kernels got faster. Neither is the
    patches' doing; kernels slower on the GPU are, whatever the wall time says."""
    from mepgen.tune.appruns import judge
    gb = {"gpu_total_ms": 0.339}
    faster = judge(_timing(0.42, 0.43, 0.41), _timing(0.35, 0.35, 0.36), gb, {"gpu_total_ms": 0.319})
    assert faster["wall_verdict"] == "faster" and faster["verdict"] == "no measurable change"
    assert "not the patches' doing" in faster["why"] and faster["expected_speedup"] < 1.001
    assert "the wall time fell by 70 ms but the kernels' GPU time fell by 0.02 ms" in faster["why"]
    slower = judge(_timing(0.36, 0.37, 0.365), _timing(0.42, 0.42, 0.43), {"gpu_total_ms": 7.8}, {"gpu_total_ms": 7.1})
    assert slower["wall_verdict"] == "slower" and slower["verdict"] == "no measurable change"
    assert "the wall time rose by 55 ms but the kernels' GPU time fell by 0.7 ms" in slower["why"]
    gpu_slower = judge(_timing(1.0, 1.0, 1.0), _timing(1.0, 1.01, 1.0), {"gpu_total_ms": 100.0},
                       {"gpu_total_ms": 120.0})
    assert gpu_slower["verdict"] == "slower" and "instead of 100 ms" in gpu_slower["why"]
    explained = judge(_timing(1.0, 1.01, 0.99), _timing(0.6, 0.61, 0.6), {"gpu_total_ms": 700.0},
                      {"gpu_total_ms": 300.0})
    assert explained["verdict"] == "faster" and explained["why"] == "" and explained["gpu_speedup"] > 2
    wall_only = judge(_timing(1.0, 1.01, 0.99), _timing(0.6, 0.61, 0.6), None, None)
    assert wall_only["verdict"] == "faster" and wall_only["basis"] == "wall time"


def test_the_best_s_own_text_at_the_original_launch_is_patched_where_its_launch_is_refused(tmp_path, monkeypatch):
    """The best is a text change plus a grid patch cannot write (a captured grid), and its text alone was verified
    faster before the grid moved: that text is the fallback, though it equals the best's (seen on the GPU: a
    grid-stride sum, 383x with the grid, 261x without it, left unpatched)."""
    app = make_app(tmp_path)
    stages = Stages(app, {"a": (3.0, "fast")})
    stages.refuse_best = {"a"}
    stages.others = {"a": [(2.6, {"best_text": True}), (1.4, {})]}
    r = tune(app, stages, monkeypatch)
    assert r.exit_code == 0, r.output
    patches = json.loads((app / ".mepgen" / "tune" / "state.json").read_text())["patch"]
    assert patches["app.a"]["state"] == "applied" and patches["app.a"]["speedup"] == 2.6
    assert Path(patches["app.a"]["variant"]).read_text() == "// a best\n"


def test_a_win_of_build_flags_alone_is_not_a_kept_patch(tmp_path, monkeypatch):
    """`mepgen patch` accepts a winner that differs in nvcc flags alone and writes nothing (its note: add them to the
    build). tune called that `applied` and measured the application with its kernel unchanged (seen on the GPU:
    1.22x in the MEP, 1.00x in the application). Now it is refused with the reason, and the fastest text-only
    variant is patched where there is one."""
    app = make_app(tmp_path)
    stages = Stages(app, {"a": (1.5, "fast"), "b": (1.3, "fast")})
    stages.flags_only = {"a", "b"}
    stages.others = {"a": [(1.2, {})]}                                   # b: nothing else faster
    r = tune(app, stages, monkeypatch)
    assert r.exit_code == 0, r.output
    patches = json.loads((app / ".mepgen" / "tune" / "state.json").read_text())["patch"]
    assert patches["app.a"]["state"] == "applied" and patches["app.a"]["speedup"] == 1.2
    assert "build flags only (-maxrregcount=64)" in patches["app.a"]["why"]
    assert patches["app.b"]["state"] == "refused" and "build flags only" in patches["app.b"]["why"]


def test_a_win_patch_refuses_gives_way_to_the_fastest_variant_that_changes_only_the_text(tmp_path, monkeypatch):
    """The best changed the launch and patch refuses it; the run's next fastest verified variant without a launch
    or flag change is patched instead (and kept, the application being faster); without one, the kernel is out."""
    app = make_app(tmp_path)
    stages = Stages(app, {"a": (3.0, "fast"), "b": (2.0, "fast")})
    stages.refuse_best = {"a", "b"}
    stages.others = {"a": [(1.6, {}), (1.4, {}), (2.5, {"nvcc_flags": ["-use_fast_math"]})]}   # b: none
    r = tune(app, stages, monkeypatch)
    assert r.exit_code == 0, r.output
    patches = json.loads((app / ".mepgen" / "tune" / "state.json").read_text())["patch"]
    kernels = report(app)["kernels"]
    kernels = {k["id"]: k for k in kernels}
    assert kernels["app.a"]["patch"] == "applied" and kernels["app.a"]["patch_speedup"] == 1.6
    assert patches["app.a"]["state"] == "applied" and patches["app.a"]["speedup"] == 1.6
    assert "the best (3.00x) was refused" in patches["app.a"]["why"] and "1.60x" in patches["app.a"]["why"]
    assert Path(patches["app.a"]["variant"]).read_text() == "// a text 1\n"
    assert patches["app.b"]["state"] == "refused" and "not spelled with its block" in patches["app.b"]["why"]
    froms = [c[c.index("--from") + 1] for c in stages.calls if c[0] == "patch" and "--from" in c]
    assert sum(f.endswith("fallback/kernel.cu") for f in froms) == 1


def test_the_report_names_kernels_launched_with_several_configurations(tmp_path):
    from mepgen.tune.report import Report
    rep = Report(tmp_path, tmp_path, ["./app"], "make", None, 3)
    configs = [{"grid": [16384, 1, 1], "block": [64, 1, 1], "shared_mem": 0, "launches": 3, "total_ms": 3.0},
               {"grid": [4096, 1, 1], "block": [256, 1, 1], "shared_mem": 0, "launches": 1, "total_ms": 1.0}]
    rep.add_captures([{"kernel": "mirror", "outcome": "captured", "complete": True, "app_gpu": {"configs": configs}},
                      {"kernel": "once", "outcome": "captured", "complete": True,
                       "app_gpu": {"configs": configs[:1]}}])
    md = rep.markdown(rep.to_dict())
    assert "## Kernels the application launched with several configurations" in md
    assert ("- mirror: 2 configurations (grid (16384, 1, 1) block (64, 1, 1): 3 launch(es), 75 % of its time; "
            "grid (4096, 1, 1) block (256, 1, 1): 1 launch(es), 25 % of its time)") in md
    assert "- once:" not in md
    assert [k["configurations"] for k in rep.to_dict()["kernels"]] == [2, 1]
    from mepgen.report.page import tune_view
    view = tune_view(rep.to_dict())
    at = view["columns"].index("configurations")
    assert [r[at] for r in view["rows"]] == ["2", "1"]           # a column of the HTML report's tune table
