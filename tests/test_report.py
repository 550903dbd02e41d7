"""`mepgen report` on a fake workspace: the page holds the table, the trajectory and roofline plots, the fidelity,
the patch state and the tune section, needs nothing from outside itself, and renders in headless Chromium."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from mepgen.cli import main
from report_fixtures import fake_workspace


def report(app: Path, *args):
    r = CliRunner().invoke(main, ["report", "-C", str(app), "--json", *args])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    return out, Path(out["report"]).read_text()


def test_batch_page(tmp_path):
    fake_workspace(tmp_path)
    out, html = report(tmp_path, "--batch", "batch-1")
    assert out["kind"] == "batch" and sorted(out["kernels"]) == ["analysis.dense_matvec", "cg.spmv_csr",
                                                                 "heat.diffuse_step"]
    assert '<table id="kernels">' in html and html.count("<tr><td><a href=\"#k-") == 3
    assert "3.10x" in html and "the worker died of signal 9" in html
    assert html.count('<figure class="trajectory"><svg') == 2            # the failed kernel has no run folder
    assert html.count('<figure class="roofline"><svg') == 1              # diffuse_step recorded no GFLOP/s
    assert "no verified candidate has both GB/s and GFLOP/s" in html
    assert "fidelity (MEP vs application time) 1.020: within the guard (±25% or 10 us)" in html   # the row's
    assert "fidelity not measured: no capture: static MEP" in html       # run.json's record without a ratio
    assert re.search(r"<td>applied</td>", html) and "not patched" in html
    assert "Application speedup: <strong>1.870x</strong>" in html and ">passed<" in html
    assert '<table id="tune-table">' in html and "./heatcg 512" in html and "app_gpu_speedup: 2.4" in html
    assert "<th>app_kernel_speedup</th>" in html and "the application got slower" in html and "<th>todo</th>" not in html
    # self-contained: no script, no stylesheet or image fetched from anywhere
    assert not re.search(r"<(script|link|img|iframe)\b", html)
    assert not re.search(r"""\b(src|href)=["'](?!#)""", html), "every reference stays inside the page"


def test_run_page_and_defaults(tmp_path):
    ws = fake_workspace(tmp_path, tune=False)
    out, html = report(tmp_path, "--run", "analysis::dense_matvec/solo")
    assert out["kind"] == "run" and out["tune"] is False
    assert "mepgen tune" not in html                                     # no tune report: no section
    assert "0.980" in html                                               # run.json's fidelity
    assert "compile_failed at compile" in html and "wrong_result at verify" in html
    os.utime(ws / "batches" / "batch-1", (2e9, 2e9))                   # the newest: the default
    out, _ = report(tmp_path)
    assert out["kind"] == "batch"
    r = CliRunner().invoke(main, ["report", "-C", str(tmp_path), "--batch", "nope"])
    assert r.exit_code == 2 and "no batch 'nope'" in r.output and "batch-1" in r.output
    empty = tmp_path / "empty"
    (empty / ".mepgen").mkdir(parents=True)
    (empty / ".mepgen" / "inventory.json").write_text("{}")
    r = CliRunner().invoke(main, ["report", "-C", str(empty)])
    assert r.exit_code == 2 and "nothing to report" in r.output
    r = CliRunner().invoke(main, ["report", "-C", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "no such directory" in r.output


def chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


@pytest.mark.skipif(chromium() is None, reason="no chromium binary (Debian: apt-get install chromium; .ci/run does)")
def test_renders_in_headless_chromium(tmp_path):
    fake_workspace(tmp_path / "app")
    out, _ = report(tmp_path / "app", "--batch", "batch-1")
    page = Path(out["report"]).resolve().as_uri()
    shot = tmp_path / "report.png"                  # kept in the test's tmp output
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}", "--no-first-run"]
    r = subprocess.run(base + [f"--screenshot={shot}", "--window-size=1200,2400", page], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20000   # a drawn page, not blank
    dom = subprocess.run(base + ["--dump-dom", page], capture_output=True, text=True, timeout=120).stdout
    assert '<table id="kernels">' in dom and "analysis::dense_matvec" in dom
    assert dom.count("<svg") >= 3                   # the plots are in the rendered document
