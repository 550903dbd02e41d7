"""What role each captured buffer takes in the MEP (in, out, inout) from what the launch changed and what static
analysis says, and buffers the application passed into one allocation: from records written here, without a GPU."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from mepgen.capture.compare import compare
from mepgen.capture.mepwrite import write_captured_mep
from mepgen.spec import load_spec
from mepgen.workspace import Workspace


def test_roles_from_what_the_launch_changed():
    from mepgen.capture.mepwrite import _role
    buf = lambda changed, count=8: {"written": changed > 0, "changed_elements": changed, "count": count}
    assert _role(buf(0), "in")[0] == "in"             # not changed by this launch: an input here
    assert _role(buf(0), None)[0] == "in"
    # unchanged, but the kernel writes it without reading it (a launch after a warm-up wrote the values that were
    # there): an output, poisoned before every run, so a variant that leaves it alone fails
    role, why = _role(buf(0), "out")
    assert role == "out" and "static analysis says the kernel writes it" in why
    assert _role(buf(0), "out", poison_like=2)[0] == "in"       # some of its values read as unwritten: not proven
    assert _role(buf(0), "out", poison_like=None)[0] == "in"
    assert _role(buf(0), "inout")[0] == "in"          # read first: its captured values are its input
    assert _role(buf(8), "out")[0] == "out"           # static says out and every element changed
    assert _role(buf(8), None)[0] == "inout"          # no static analysis: start every run from the capture
    assert _role(buf(3), "out")[0] == "inout"         # part of it left alone: its captured values matter
    assert _role(buf(8), "in")[0] == "inout"
    # every element changed, but some now hold the bits an `out` buffer is poisoned with (a record kept as bytes:
    # about one byte in 256 is 0xA5): as `out`, mepgen run would count them unwritten
    assert _role(buf(8), "out", poison_like=3)[0] == "inout"
    assert _role(buf(8), "out", poison_like=None)[0] == "inout"     # its result unread: not proven


def test_poison_bits_in_a_captured_result_are_found_in_its_file(tmp_path):
    from mepgen.capture.mepwrite import _poison_like
    (tmp_path / "after").mkdir()
    np.save(tmp_path / "after" / "rec.npy", np.array([1, 0xA5, 2, 0xA5, 0xA5], np.uint8))
    np.save(tmp_path / "after" / "f.npy", np.array([1.0, np.nan, 2.0], np.float32))
    m = {"_dir": str(tmp_path)}
    assert _poison_like(m, {"after": "after/rec.npy"}) == 3
    assert _poison_like(m, {"after": "after/f.npy"}) == 0          # a NaN, but not the poison's all-ones bits
    assert _poison_like(m, {"after": None}) is None and _poison_like({}, {"after": "after/rec.npy"}) is None
    # a buffer the launch left as it was: its before-state is its after-state
    assert _poison_like(m, {"after": None, "before": "after/rec.npy", "written": False}) == 3
    assert _poison_like(m, {"after": None, "before": "after/rec.npy", "written": True}) is None


PAIRS = r"""
__global__ void order_pairs(unsigned* __restrict__ dst, const unsigned* __restrict__ src, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (2 * i + 1 >= n) return;
    unsigned a = src[2 * i], b = src[2 * i + 1];
    dst[2 * i] = a < b ? a : b;
    dst[2 * i + 1] = a < b ? b : a;
}

void order_in_place(unsigned* d, int n) { order_pairs<<<(n / 2 + 127) / 128, 128>>>(d, d, n); }
"""


def _aliased_capture(tmp_path):
    """An in-place launch of order_pairs as a record: dst and src point into one allocation (src 8 bytes in)."""
    from mepgen.extract import ExtractOptions, extract
    app = tmp_path / "app"
    app.mkdir()
    (app / "pairs.cu").write_text(PAIRS)
    inv = extract(app, ExtractOptions(jobs=1))
    k = inv["kernels"][0]
    before = np.array([5, 1, 2, 9, 7, 3, 4, 4], np.uint32)
    after = np.array([5, 1, 2, 9, 3, 7, 4, 4], np.uint32)
    ws = Workspace(app)
    cap = ws.mep_dir(k["id"]) / "data" / "captured"
    for d in ("before", "after"):
        (cap / d).mkdir(parents=True)
    np.save(cap / "before" / "dst.npy", before)
    np.save(cap / "after" / "dst.npy", after)
    np.save(cap / "before" / "src.npy", before[2:])
    np.save(cap / "after" / "src.npy", after[2:])
    buf = lambda name, off: {"name": name, "kind": "buffer", "dtype": "uint32", "itemsize": 4, "count": 8 - off // 4,
                             "offset_bytes": off, "allocation": 0, "address": 4096 + off, "before": f"before/{name}.npy",
                             "after": f"after/{name}.npy", "written": True, "changed_elements": 2, "notes": []}
    m = {"kernel": "order_pairs", "params": [buf("dst", 0), buf("src", 8), {"name": "n", "kind": "value", "value": 6,
         "dtype": "int32", "bytes_hex": "06000000"}], "allocations": [{"id": 0, "bytes": 32, "params": ["dst", "src"]}],
         "relocations": [], "constants": [], "grid": [1, 1, 1], "block": [4, 1, 1], "shared_mem": 0, "launch_index": 0}
    return ws, inv, k, m


def test_two_parameters_pointing_into_one_allocation_stay_one_buffer(tmp_path):
    """An in-place step (the application passes the same allocation as destination and source): as two buffers the
    MEP's source would never see what the kernel writes, and the source's captured after-state (changed, through the
    destination) could not be reproduced. The MEP passes the source as a pointer into the destination's buffer."""
    from mepgen.harness import render_harness
    ws, inv, k, m = _aliased_capture(tmp_path)
    cap = ws.mep_dir(k["id"]) / "data" / "captured"
    w = write_captured_mep(ws, inv, k, m, detect_gpu=False)
    assert w.todo == []
    p = {x.name: x for x in w.spec.params}
    assert p["dst"].role == "inout" and p["dst"].count == "8"
    assert p["src"].role == "scalar" and p["src"].relocate == [{"at": 0, "buffer": "dst", "offset": 8}]
    assert p["src"].value == "static_cast<const unsigned int *>(nullptr)"
    assert [o.name for o in w.spec.outputs] == ["dst"]          # what src saw change is checked in dst
    harness = render_harness(w.spec)
    assert "auto arg_src = static_cast<const unsigned int *>(nullptr);" in harness
    assert "reinterpret_cast<char*>(d_dst) + 8" in harness
    assert "order_pairs<<<grid, block, shared_mem, stream>>>(d_dst, arg_src, 6)" in harness
    # static analysis' out (never read before written) does not survive: the kernel reads it through src
    m["params"][0]["changed_elements"] = 8
    np.save(cap / "after" / "dst.npy", np.load(cap / "before" / "dst.npy") + 1)
    assert {x.name: x for x in write_captured_mep(ws, inv, k, m, detect_gpu=False).spec.params}["dst"].role == "inout"


@pytest.mark.nvcc
def test_the_aliased_mep_builds(tmp_path):
    from mepgen import mepbuild
    ws, inv, k, m = _aliased_capture(tmp_path)
    w = write_captured_mep(ws, inv, k, m, detect_gpu=False)
    cmd = mepbuild.nvcc_command(w.spec, w.path, w.path / "kernel.cu", tmp_path / "mep")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


def test_compare_names_aliasing_and_null_pointers(tmp_path):
    from mepgen.cli import main
    ws, inv, k, m = _aliased_capture(tmp_path)
    CliRunner().invoke(main, ["mep", "order_pairs", "-C", str(ws.app_root)])
    static = load_spec(ws.mep_dir(k["id"]) / "mep.yaml")
    found = {d.field: d for d in compare(static, m)}
    assert found["params.src.role"].why.startswith("dst point(s) into the same allocation in the application")
    m["params"][0] = {"name": "dst", "kind": "null", "bytes_hex": "00" * 8}
    found = {d.field: d for d in compare(static, m)}
    assert "the application passed a null pointer" in found["params.dst"].why


# the kernel a warm-up launched before: its launch writes what `out` held already
BROADCAST = """
__global__ void lane_copy(const int *in, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i & ~31];
}

void spread(const int *in, int *out, int n) { lane_copy<<<(n + 127) / 128, 128>>>(in, out, n); }
"""


def test_a_buffer_the_launch_left_as_it_was_is_an_output_where_the_kernel_writes_it(tmp_path):
    """`mepgen tune` and `capture --all` run straight after extract: no static MEP is written. A launch that wrote
    the values its output held already (a warm-up launched it before) left `out` as it was; static completion, asked
    now, says the kernel writes it without reading it, so it is an `out`, poisoned before every run, not an input
    (which left the MEP with nothing to verify)."""
    from mepgen.extract import ExtractOptions, extract
    app = tmp_path / "app"
    app.mkdir()
    (app / "bcast.cu").write_text(BROADCAST)
    inv = extract(app, ExtractOptions(jobs=1))
    k = inv["kernels"][0]
    ws = Workspace(app)
    cap = ws.mep_dir(k["id"]) / "data" / "captured"
    (cap / "before").mkdir(parents=True)
    data = np.arange(64, dtype=np.int32)
    np.save(cap / "before" / "in.npy", data)
    np.save(cap / "before" / "out.npy", np.repeat(data[::32], 32))
    buf = lambda name: {"name": name, "kind": "buffer", "dtype": "int32", "itemsize": 4, "count": 64,
                        "offset_bytes": 0, "allocation": 0 if name == "in" else 1, "address": 4096 * (1 + (name == "out")),
                        "before": f"before/{name}.npy", "after": None, "written": False, "changed_elements": 0,
                        "notes": []}
    m = {"kernel": "lane_copy", "params": [buf("in"), buf("out"), {"name": "n", "kind": "value", "value": 64,
         "dtype": "int32", "bytes_hex": "40000000"}],
         "allocations": [{"id": 0, "bytes": 256, "params": ["in"]}, {"id": 1, "bytes": 256, "params": ["out"]}],
         "relocations": [], "constants": [], "grid": [1, 1, 1], "block": [128, 1, 1], "shared_mem": 0,
         "launch_index": 3}
    assert not (ws.mep_dir(k["id"]) / "mep.yaml").exists()
    w = write_captured_mep(ws, inv, k, m, detect_gpu=False)
    p = {x.name: x for x in w.spec.params}
    assert p["in"].role == "in" and p["out"].role == "out"
    assert [o.name for o in w.spec.outputs] == ["out"]
    # where the kernel reads it first (static completion says inout), the launch's unchanged buffer stays an input
    (app / "bcast.cu").write_text(BROADCAST.replace("out[i] = in[i & ~31]", "out[i] += in[i & ~31]"))
    inv = extract(app, ExtractOptions(jobs=1, use_cache=False))
    (ws.mep_dir(k["id"]) / "mep.yaml").unlink()
    (ws.mep_dir(k["id"]) / ("mep.yaml" + ".before-capture")).unlink(missing_ok=True)
    w = write_captured_mep(ws, inv, inv["kernels"][0], m, detect_gpu=False)
    assert {x.name: x.role for x in w.spec.params}["out"] == "in"
