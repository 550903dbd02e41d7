"""Several kernels of one file patched one after another (issue 39.4): each reverts on its own, all together,
in any order; `mepgen patch --all` takes the verified wins of an `optimize --all` batch."""
from __future__ import annotations

import json

import pytest

from mepgen.errors import MepgenError
from mepgen.patch.state import compose
from fault_tools import app, heatcg_template  # noqa: F401  (fixtures)
from fault_tools import cli, variants



def patch(app, *args):
    return cli(["patch", *args, "-C", str(app)])


def test_two_kernels_of_one_file_patch_one_after_the_other_and_revert_each(app, tmp_path):
    v = variants(tmp_path / "v")
    original = (app / "src/cg.cu").read_bytes()
    rc, out = patch(app, "cg::axpy", "--from", str(v["axpy"]), "--apply", "--no-validate")
    assert rc == 0, out
    rc, out = patch(app, "cg::xpay", "--from", str(v["xpay"]), "--apply", "--no-validate")
    assert rc == 0, out             # was refused: "src/cg.cu changed since `mepgen extract`"
    both = (app / "src/cg.cu").read_text()
    assert "y[i] = y[i] + a * x[i];   // the variant" in both and "p[i] = beta * p[i] + x[i];   // the variant" in both
    # the diff of the second patch applies to the file holding the first
    diff = (app / ".mepgen/patches/cg.xpay.diff").read_text()
    assert "+        p[i] = beta * p[i] + x[i];   // the variant" in diff and "y[i] = y[i] + a" not in diff
    # applying again is a no-op
    rc, out = patch(app, "cg::axpy", "--from", str(v["axpy"]), "--apply", "--no-validate")
    assert rc == 0 and "already applied" in out
    # the first one reverts alone: the second stays
    rc, out = patch(app, "cg::axpy", "--revert")
    assert rc == 0, out
    only_xpay = (app / "src/cg.cu").read_text()
    assert "y[i] = a * x[i] + y[i];" in only_xpay and "p[i] = beta * p[i] + x[i];   // the variant" in only_xpay
    assert only_xpay.encode() == original.replace(b"p[i] = x[i] + beta * p[i];",
                                                  b"p[i] = beta * p[i] + x[i];   // the variant")
    # and patches again on top of the other
    rc, out = patch(app, "cg::axpy", "--from", str(v["axpy"]), "--apply", "--no-validate")
    assert rc == 0, out
    assert (app / "src/cg.cu").read_text() == both
    # all together: byte for byte the original
    rc, out = patch(app, "--all", "--revert")
    assert rc == 0, out
    assert (app / "src/cg.cu").read_bytes() == original
    assert not list((app / ".mepgen/patches").glob("*/manifest.json"))


def test_revert_in_the_order_they_were_applied(app, tmp_path):
    v = variants(tmp_path / "v")
    original = (app / "src/cg.cu").read_bytes()
    for k in ("axpy", "xpay"):
        assert patch(app, f"cg::{k}", "--from", str(v[k]), "--apply", "--no-validate")[0] == 0
    rc, out = patch(app, "cg::xpay", "--revert")
    assert rc == 0 and "keeping the patches of cg.axpy" in out, out
    rc, out = patch(app, "cg::axpy", "--revert")
    assert rc == 0 and "to the original" in out, out
    assert (app / "src/cg.cu").read_bytes() == original


def test_patches_that_change_the_same_bytes_are_refused_naming_both():
    original = b"0123456789"
    assert compose(original, [("a", [(2, 4, b"AB")]), ("b", [(6, 6, b"+")])]) == b"01AB2345+6789"[:0] + b"01AB45+6789"
    with pytest.raises(MepgenError, match="the patch of b and the applied patch of a change the same bytes"):
        compose(original, [("a", [(2, 5, b"X")]), ("b", [(4, 6, b"Y")])])
    # an insertion at the edge of another patch's edit is no overlap
    assert compose(original, [("a", [(2, 4, b"X")]), ("b", [(4, 4, b"+")])]) == b"01X+456789"


def write_batch(app, name, rows, v):
    folder = app / ".mepgen/batches" / name
    (folder / "rows").mkdir(parents=True)
    for kid, status, speedup in rows:
        (folder / "rows" / f"{kid}.json").write_text(json.dumps(
            {"kernel": kid, "name": name, "status": status, "speedup": speedup}))
        if speedup:
            best = app / ".mepgen/runs" / kid / name / "best"
            best.mkdir(parents=True)
            (best / "kernel.cu").write_text(v[kid.split(".")[1]].read_text())


def test_patch_all_takes_the_batch_winners(app, tmp_path):
    v = variants(tmp_path / "v")
    original = (app / "src/cg.cu").read_bytes()
    write_batch(app, "b1", [("cg.axpy", "done", 1.3), ("cg.xpay", "done", 1.1), ("cg.dot", "failed", None)], v)
    rc, out = patch(app, "--all", "--json")          # preview: the diffs, nothing changed
    assert rc == 0, out
    doc = json.loads(out[out.index("["):])
    assert [d["kernel"] for d in doc] == ["cg::axpy", "cg::xpay"]
    assert (app / "src/cg.cu").read_bytes() == original
    rc, out = patch(app, "--all", "--apply", "--no-validate")
    assert rc == 0, out
    text = (app / "src/cg.cu").read_text()
    assert text.count("// the variant") == 2
    rc, out = patch(app, "--all", "--revert")
    assert rc == 0, out
    assert (app / "src/cg.cu").read_bytes() == original


def test_patch_all_without_a_winner_or_batch_says_so(app, tmp_path):
    rc, out = patch(app, "--all")
    assert rc == 2 and "no batch" in out and "optimize --all" in out
    write_batch(app, "b2", [("cg.dot", "failed", None)], variants(tmp_path / "v"))
    rc, out = patch(app, "--all")
    assert rc == 2 and "no verified win" in out


def test_a_batch_with_a_refused_winner_changes_nothing_and_names_it(app, tmp_path):
    v = variants(tmp_path / "v")
    original = (app / "src/cg.cu").read_bytes()
    write_batch(app, "b3", [("cg.axpy", "done", 1.3), ("cg.xpay", "done", 1.1)], v)
    bad = app / ".mepgen/runs/cg.xpay/b3/best/kernel.cu"
    bad.write_text(bad.read_text() + "namespace cg {\n__global__ void extra(float* p) { p[0] = 1.0f; }\n}\n")
    rc, out = patch(app, "--all", "--apply", "--no-validate")
    assert rc == 2 and "cg.xpay" in out and "adds the kernel cg::extra" in out and "nothing was patched" in out, out
    assert (app / "src/cg.cu").read_bytes() == original
