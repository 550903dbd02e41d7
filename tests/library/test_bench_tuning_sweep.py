"""bench/tuning_sweep.py without a GPU: which axis it sweeps, and its table and verdict from recorded rows."""
from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import tuning_sweep  # noqa: E402


def test_the_sweep_axis_is_the_block_else_a_tunable_size():
    assert tuning_sweep.sweep_axis({"block": [64, 128], "regs": [0, 32]}) == "block"
    assert tuning_sweep.sweep_axis({"size:TILE": [8, 16], "bounds": [0, 1]}) == "size:TILE"
    assert tuning_sweep.sweep_axis({"regs": [0, 32]}) is None


def test_the_table_counts_the_mep_within_5_percent():
    rows = [
        {"mep": "/w/apps/app1/.mepgen/meps/k1", "kernel": "k1", "axis": "block", "sweep": [{}] * 5, "search": [{}] * 12,
         "sweep_best": 0.80, "search_best": 0.83, "sweep_best_point": {"block": 128},
         "search_best_point": {"block": 128, "regs": 64}, "within_5pct": 0.83 <= 0.80 * tuning_sweep.NEAR},
        {"mep": "/w/apps/app1/.mepgen/meps/k2", "kernel": "k2", "axis": "block", "sweep": [{}] * 5, "search": [{}] * 12,
         "sweep_best": 0.70, "search_best": 0.90, "sweep_best_point": {"block": 64},
         "search_best_point": {"block": 512}, "within_5pct": False},
        {"mep": "/w/apps/app2/.mepgen/meps/k3", "kernel": "k3", "skipped": "2 open todo item(s)"},
    ]
    text = tuning_sweep.summary(rows, "a GPU", "python3 bench/tuning_sweep.py out m")
    assert "**search within 5 % of the sweep's best: 1 of 2 MEPs**" in text
    assert "| app1/k1 | block | 0.800 (128) | 0.830 ({'block': 128, 'regs': 64}) | 5 / 12 | yes |" in text
    assert "| app1/k2 | block | 0.700 (64) | 0.900 ({'block': 512}) | 5 / 12 | NO |" in text
    assert "| app2/k3 | - | 2 open todo item(s) | | | |" in text


def _mep(root, app, name, count="N", todo="[]", fixed=False):
    """A hand-written MEP: `twice` (the launch alone sets the block), or with `fixed` `halve`, whose shared array
    is sized by the literal block (no block axis: launch bounds and a register cap left)."""
    from test_library_tunables import PLAIN, STAGED, YAML
    mep = root / app / ".mepgen" / "meps" / name
    mep.mkdir(parents=True)
    if fixed:
        (mep / "mep.yaml").write_text(YAML.format(name="halve", sizes="N: 65536, CHUNK: 128", grid="N / 256",
                                                  block="256", count=count).replace("todo: []", f"todo: {todo}"))
        (mep / "kernel.cu").write_text(STAGED.replace("CHUNK", "256").split("#endif\n", 1)[1])
    else:
        (mep / "mep.yaml").write_text(YAML.format(name="twice", sizes="N: 65536, BS: 256", grid="(N + BS - 1) / BS",
                                                  block="BS", count=count).replace("todo: []", f"todo: {todo}"))
        (mep / "kernel.cu").write_text(PLAIN)
    (mep / "harness.cu").write_text("// harness\n")
    (mep / "data").mkdir()
    (mep / "data" / "in.bin").write_bytes(b"0" * 64)
    return mep


def _fake(monkeypatch, calls: list, sleep: float = 0.0):
    """The evaluator replaced by costs that depend on the block and the register cap (`calls` counts the builds)."""
    import mepgen.evaluate as evaluate
    from mepgen.evaluate.results import EvalResult, Timed
    from mepgen.optimize import candidates

    class FakeEvaluator:
        def __init__(self, *a, **k):
            pass

        def prepare(self):
            pass

        def close(self):
            pass

    def fake_evaluate(ev, mep_dir, spec, proposals, workdir, journal=None, on_result=None):
        out = []
        time.sleep(sleep)
        for p in proposals:
            calls.append(p)
            block = int(p.launch["block"][0]) if p.launch else 256
            cost = {32: 1.5, 64: 1.3, 128: 0.9, 256: 1.0, 512: 0.8, 1024: 1.1}[block]
            cost *= 0.97 if "-maxrregcount=64" in p.nvcc_flags or "__maxnreg__(64)" in p.text else 1.0
            out.append(EvalResult(name="c", key="k", backend="fake", timed=Timed(
                median_ms=cost, spread=0.01, min_ms=cost, max_ms=cost, launches=10, rounds=2, speedup=1.0 / cost)))
        return out

    monkeypatch.setattr(evaluate, "Evaluator", FakeEvaluator)
    monkeypatch.setattr(candidates, "evaluate", fake_evaluate)


def test_one_mep_sweep_and_search_with_a_fake_evaluator(tmp_path, monkeypatch):
    """The whole per-MEP path (space, sweep, ask/tell search, verdict) on a hand-written MEP, the evaluator replaced
    by costs that depend on the block and the register cap: the search must find the sweep's best block, and the
    points the sweep measured are not built again."""
    import argparse
    calls = []
    _fake(monkeypatch, calls)
    mep = _mep(tmp_path, "app", "twice")
    args = argparse.Namespace(budget=12, batch=4, rounds=2, backend="native")
    row = tuning_sweep.one(mep, args, tmp_path / "work")
    assert row["axis"] == "block" and len(row["sweep"]) == len(row["space"]["block"])
    assert abs(row["sweep_best"] - 0.8) < 1e-9 and row["sweep_best_point"]["block"] == 512
    assert len(row["search"]) == 12 and row["within_5pct"]
    assert row["search_best"] <= row["sweep_best"]          # the register cap on top of the best block
    cached = [r for r in row["search"] if r.get("cached")]
    assert cached and len(calls) == len(row["sweep"]) - 1 + len(row["search"]) - len(cached)  # 256 is the original


def test_a_time_share_cuts_the_mep_and_leaves_it_without_a_verdict(tmp_path, monkeypatch):
    import argparse
    _fake(monkeypatch, [], sleep=0.3)
    mep = _mep(tmp_path, "app", "twice")
    args = argparse.Namespace(budget=12, batch=2, rounds=2, backend="native", share=0.2)
    row = tuning_sweep.one(mep, args, tmp_path / "work")
    assert "sweep points" in row["cut"] and "within_5pct" not in row
    assert 0 < len(row["sweep"]) < len(row["space"]["block"]) and row["search"] == []
    assert "| app/twice | block | time share of 0 s spent" in tuning_sweep.summary([row], "g", "c")


def test_a_run_over_a_folder_of_apps_writes_json_and_md_after_each_mep(tmp_path, monkeypatch):
    _fake(monkeypatch, [])
    _mep(tmp_path / "apps", "a1", "k1")
    _mep(tmp_path / "apps", "a2", "k2")
    monkeypatch.setattr("library_speedup.gpu_name", lambda: "a fake GPU")
    out = tmp_path / "out"
    assert tuning_sweep.main([str(out), str(tmp_path / "apps"), "--budget", "4", "--total", "60"]) == 0
    assert sorted(p.name for p in out.glob("*.json")) == ["a1.k1.json", "a2.k2.json"]
    md = (out / "tuning_sweep.md").read_text()
    assert "search within 5 % of the sweep's best: 2 of 2 MEPs" in md and "a fake GPU" in md


def test_pack_chooses_by_the_rule_and_copies_no_data(tmp_path):
    apps = tmp_path / "apps"
    for k in ("k1", "k2", "k3"):
        _mep(apps, "a1", k)
    _mep(apps, "a2", "big", count="N * 4096")                    # 2 x 1 GiB of buffers at N = 65536
    _mep(apps, "a2", "open", todo="[{field: sizes.N, reason: unknown}]")
    _mep(apps, "a3", "k4")
    dest = tmp_path / "pack"
    taken = tuning_sweep.pack(dest, [apps], tmp_path / "work", per_app=2, most=20, max_mib=256)
    assert [f"{m.parents[2].name}/{m.name}" for m in taken] == ["a1/k1", "a1/k2", "a3/k4"]
    assert sorted(p.name for p in taken[0].iterdir()) == ["harness.cu", "kernel.cu", "mep.yaml"]
    sel = (dest / "selection.md").read_text()
    assert "| a1/k3 | no | 2 of a1 chosen already |" in sel
    assert "| a2/big | no | buffers of 2048 MiB |" in sel and "| a2/open | no | 1 open todo item(s) |" in sel
    assert tuning_sweep.meps_of([dest], tmp_path / "work") == taken


def test_without_a_block_axis_the_whole_space_is_swept(tmp_path, monkeypatch):
    """A kernel whose block its shared array fixes: the sweep is every point of launch bounds x register cap, and
    the search (8 evaluations) is judged against that; the table says which kind of sweep each row is."""
    import argparse
    calls = []
    _fake(monkeypatch, calls)
    mep = _mep(tmp_path, "app", "halve", fixed=True)
    row = tuning_sweep.one(mep, argparse.Namespace(budget=8, batch=4, rounds=2, backend="native"), tmp_path / "w")
    assert row["axis"] == tuning_sweep.FULL and set(row["space"]) == {"bounds", "regs"}
    assert len(row["sweep"]) == tuning_sweep.product(row["space"]) == len(row["space"]["bounds"]) * len(row["space"]["regs"])
    assert abs(row["sweep_best"] - 0.97) < 1e-9 and row["sweep_best_point"]["regs"] == 64
    assert row["within_5pct"] and len(row["search"]) == 8
    text = tuning_sweep.summary([row], "g", "c")
    assert "without one (`bounds x regs`: the whole space swept): 1 of 1" in text
    assert "| app/halve | bounds x regs | 0.970 ({" in text
