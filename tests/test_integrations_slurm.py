"""integrations/slurm on CPU: submit.sh with a fake `sbatch`, each array task run with the environment SLURM
gives it, then the merge job; mepgen itself runs for real, its per-kernel workers are the fake worker."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from batch_apps import FAKE_WORKER, make_app, seen

ROOT = Path(__file__).resolve().parent.parent
SLURM = ROOT / "integrations" / "slurm"

FAKE_MEPGEN = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from mepgen.optimize import many
from mepgen.cli import main
many.worker_command = lambda ws, kernel, name, resume, options: [
    sys.executable, {str(FAKE_WORKER)!r}, "optimize", kernel, "-C", str(ws.app_root), "--json", *options,
    *(["--resume", name] if resume else ["--run-name", name])]
main(prog_name="mepgen")
"""

FAKE_SBATCH = """#!/usr/bin/env python3
import json, os, sys
log = os.environ["SBATCH_LOG"]
n = sum(1 for _ in open(log)) if os.path.exists(log) else 0
with open(log, "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
print(f"{100 + n};cluster" if "--parsable" in sys.argv else f"Submitted batch job {100 + n}")
"""


def env_for(tmp: Path) -> dict:
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: Fake GPU (UUID: GPU-fake-0)'\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    (tmp / "fake_mepgen.py").write_text(FAKE_MEPGEN)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", MEPGEN=f"{sys.executable} {tmp / 'fake_mepgen.py'}",
               MEPGEN_BATCH="nightly", SBATCH_LOG=str(tmp / "sbatch.log"), FAKE_WORKER_LOG=str(tmp / "worker.log"),
               CUDA_VISIBLE_DEVICES="0", FAKE_WORKER_SECONDS="0.05", SBATCH_ARGS="--partition=gpu")
    return env


def test_submit_array_tasks_and_merge(tmp_path):
    app = make_app(tmp_path, ["k1", "k2", "k3", "k4", "k5"])
    env = env_for(tmp_path)
    done = subprocess.run(["bash", str(SLURM / "submit.sh"), str(app), "2", "--top", "4", "--", "--budget", "3"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "batch nightly: 4 kernel(s) over 2 task(s): array job 100, merge job 101" in done.stdout
    calls = [json.loads(line) for line in (tmp_path / "sbatch.log").read_text().splitlines()]
    array, merge = calls
    assert "--array=0-1" in array and "--partition=gpu" in array
    script = array[array.index(str(SLURM / "mepgen-array.sbatch")):]
    assert script[1:] == [str(app), "nightly", "--budget", "3"]
    assert "--dependency=afterany:100" in merge
    # the two array tasks, as SLURM starts them (task 1 knows only MIN/MAX, as older Slurm versions say)
    for task, extra in ((0, {"SLURM_ARRAY_TASK_COUNT": "2"}), (1, {"SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "1"})):
        r = subprocess.run(["bash", *script], env=dict(env, SLURM_ARRAY_TASK_ID=str(task), **extra),
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    ran = seen(tmp_path / "worker.log")
    assert sorted(e["kernel"] for e in ran) == ["k2", "k3", "k4", "k5"]      # the top 4, each once
    assert all(e["args"][e["args"].index("--budget") + 1] == "3" for e in ran)
    wrap = merge[merge.index("--wrap") + 1]
    r = subprocess.run(["bash", "-c", wrap], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    table = (app / ".mepgen" / "batches" / "nightly" / "table.md").read_text()
    assert r.stdout.startswith("# mepgen optimize batch nightly")
    assert "4/4 kernel(s) done" in table and "unroll x4 of k2" in table


def test_array_task_outside_slurm_is_one_line(tmp_path):
    r = subprocess.run(["bash", str(SLURM / "mepgen-array.sbatch"), str(tmp_path), "x"],
                       env={k: v for k, v in os.environ.items() if not k.startswith("SLURM_")},
                       capture_output=True, text=True)
    assert r.returncode != 0 and "not inside a SLURM job array" in r.stderr
