"""`mepgen ready` reports and never overwrites: a MEP written from a recorded launch, the sizes a person gave with
`mepgen mep K --size`, and a built binary all survive it; each kernel's report says where its MEP came from."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from mepgen.cli import main
from mepgen.mep import writer
from mepgen.workspace import Workspace

# a kernel whose length comes from the command line (static completion cannot know it) and one fully static
SOURCE = r"""
#include <cstdlib>
__global__ void shift_up(int *v, int len, int by) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < len) v[t] += by;
}
__global__ void halve(float *w) { w[threadIdx.x] *= 0.5f; }
int main(int argc, char **argv) {
  int len = atoi(argv[1]);
  int *v; float *w;
  cudaMalloc(&v, len * sizeof(int));
  cudaMalloc(&w, 64 * sizeof(float));
  shift_up<<<(len + 63) / 64, 64>>>(v, len, 7);
  halve<<<1, 64>>>(w);
}
"""


def _app(tmp_path: Path) -> Path:
    app = tmp_path / "app"
    app.mkdir()
    (app / "main.cu").write_text(SOURCE)
    return app


def _ready(app: Path) -> dict:
    r = CliRunner().invoke(main, ["ready", "-C", str(app), "--json"])
    assert r.exit_code in (0, 3), r.output
    return {k["kernel"]: k for k in json.loads(r.output)["kernels"]}


def _capture_shift_up(app: Path) -> Path:
    """What `mepgen capture shift_up --use` leaves: the record's files and the MEP written from it."""
    from mepgen.capture.mepwrite import write_captured_mep
    from mepgen.inventory import load
    ws = Workspace(app)
    inv = load(ws.inventory_path)
    k = next(x for x in inv["kernels"] if x["qualified_name"] == "shift_up")
    cap = ws.mep_dir(k["id"]) / "data" / "captured"
    (cap / "before").mkdir(parents=True)
    (cap / "after").mkdir(parents=True)
    before = np.arange(100, dtype=np.int32)
    np.save(cap / "before" / "v.npy", before)
    np.save(cap / "after" / "v.npy", before + 7)
    manifest = {"kernel": "shift_up", "launch_index": 0, "grid": [2, 1, 1], "block": [64, 1, 1], "shared_mem": 0,
                "params": [{"name": "v", "kind": "buffer", "dtype": "int32", "itemsize": 4, "count": 100,
                            "offset_bytes": 0, "allocation": 0, "address": 1 << 21, "before": "before/v.npy",
                            "after": "after/v.npy", "written": True, "changed_elements": 100, "notes": []},
                           {"name": "len", "kind": "value", "value": 100, "dtype": "int32", "bytes_hex": "64000000"},
                           {"name": "by", "kind": "value", "value": 7, "dtype": "int32", "bytes_hex": "07000000"}],
                "allocations": [{"id": 0, "bytes": 400, "params": ["v"]}], "relocations": [], "constants": []}
    (cap / "manifest.json").write_text(json.dumps(manifest))
    w = write_captured_mep(ws, inv, k, manifest, detect_gpu=False)
    assert w.todo == []
    return w.path


def test_ready_keeps_a_captured_mep_and_says_it_came_from_the_capture(tmp_path):
    app = _app(tmp_path)
    first = _ready(app)
    assert first["shift_up"]["outcome"] == "needs a person" and first["shift_up"]["origin"] == "static"
    mep_dir = _capture_shift_up(app)
    captured_yaml = (mep_dir / "mep.yaml").read_bytes()
    (mep_dir / "mep").write_text("a built MEP binary stands here")
    again = _ready(app)
    assert again["shift_up"]["outcome"] == "ready" and again["shift_up"]["origin"] == "capture"
    assert again["halve"]["origin"] == "static"
    assert (mep_dir / "mep.yaml").read_bytes() == captured_yaml
    assert (mep_dir / "mep").read_text() == "a built MEP binary stands here"
    text = CliRunner().invoke(main, ["ready", "-C", str(app)]).output
    assert "1 capture" in text and "1 static" in text
    # `mepgen mep` alone would replace a captured MEP with static completion: refused, --force keeps a backup
    r = CliRunner().invoke(main, ["mep", "shift_up", "-C", str(app)])
    assert r.exit_code != 0 and "mepgen capture" in r.output
    assert (mep_dir / "mep.yaml").read_bytes() == captured_yaml
    r = CliRunner().invoke(main, ["mep", "shift_up", "-C", str(app), "--force"])
    assert r.exit_code == 3 and "saved as" in r.output, r.output          # 3: static completion needs a person
    assert list(mep_dir.glob("mep.yaml.bak-*")) and writer.origin(mep_dir)["by"] == "mep"


def test_a_capture_written_before_the_origin_file_is_still_known(tmp_path):
    app = _app(tmp_path)
    _ready(app)
    mep_dir = _capture_shift_up(app)
    (mep_dir / writer.ORIGIN_FILE).unlink()
    assert writer.origin(mep_dir)["by"] == "capture"     # the header capture writes and its record
    (mep_dir / "data" / "captured" / "manifest.json").unlink()
    assert writer.origin(mep_dir)["by"] == "unknown"


def test_sizes_given_with_mep_size_stay_through_ready_and_the_binary_with_them(tmp_path):
    app = _app(tmp_path)
    _ready(app)
    r = CliRunner().invoke(main, ["mep", "shift_up", "-C", str(app), "--size", "LEN=4000"])
    assert r.exit_code == 0, r.output
    mep_dir = Workspace(app).mep_dir("shift_up")
    (mep_dir / "mep").write_text("built")
    report = _ready(app)["shift_up"]
    assert report["outcome"] == "ready" and report["origin"] == "sizes given"
    assert "LEN: 4000" in (mep_dir / "mep.yaml").read_text()
    assert (mep_dir / "mep").read_text() == "built"           # nothing it renders changed: not written again
    # --force starts over from static completion: the size is a placeholder again
    r = CliRunner().invoke(main, ["mep", "shift_up", "-C", str(app), "--force"])
    assert r.exit_code == 3, r.output
    assert _ready(app)["shift_up"]["outcome"] == "needs a person"
    assert not (mep_dir / "mep").exists()
