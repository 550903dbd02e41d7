"""Idioms of naive dense kernels in public code that the library acts on (issue 22), in kernels written here:
tests/library_idioms/axes_templates holds a 2D update whose x threads walk the strided dimension (swap_axes),
a product whose indices spell the block size as the launch's macros (`blockIdx.y * TY + threadIdx.y`), and a
product bounded by non-type template parameters launched with literals (both tile_matmul);
tests/library_idioms/stencil_forms holds 2D/3D stencils with temporaries, two fields and macro indices. The apps are
extracted and cut into MEPs as a user would; every structural rewrite must compile with the MEP's flags.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mepgen.optimize.dry_run import plan
from mepgen.optimize.library.base import apply_chain, current_launch
from mepgen.optimize.library.catalog import all_transformations
from mepgen.cexpr import with_block
from mepgen.optimize.library.source import KernelSource, Refused
from mepgen.optimize.library.swap_axes import SwapAxes
from mepgen.spec import load_spec
from library_fixtures import assert_structural_rewrites_compile

# one worker cuts this module's MEPs (its module fixture): spread over two, each cut them again (about 12 s)
pytestmark = pytest.mark.xdist_group("library_idioms")

APPS = Path(__file__).parent.parent / "library_idioms"


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    out = {}
    for name in ("axes_templates", "stencil_forms"):
        app = tmp_path_factory.mktemp("idioms") / name
        shutil.copytree(APPS / name, app)
        for args in (["extract", "."], ["mep", "--all"]):
            done = subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=app, capture_output=True, text=True)
            assert done.returncode == 0, done.stdout + done.stderr
        for mep in sorted((app / ".mepgen" / "meps").iterdir()):
            spec = load_spec(mep / "mep.yaml")
            assert not spec.todo, (mep.name, spec.todo)
            out[mep.name] = (mep, spec, plan(spec, (mep / "kernel.cu").read_text(), app / "dryrun" / mep.name))
    return out


def _candidate(p, name):
    return next(c for c in p.candidates if c["name"] == name)


def test_rows_along_x_get_their_axes_swapped(plans):
    mep, spec, p = plans["weigh_rows"]
    assert "swap_axes" in p.structural
    cand = _candidate(p, "swap_axes")
    text = (Path(cand["folder"]) / "kernel.cu").read_text()
    assert "int r = blockIdx.y * blockDim.y + threadIdx.y;" in text
    assert "int c = blockIdx.x * blockDim.x + threadIdx.x;" in text
    assert cand["launch"]["grid"] == ["(4096 + 15) / 16", "(4096 + 15) / 16"]    # nc's extent now along x
    assert "2 global access(es) become unit-stride" in cand["change"]
    # the products (x already along the contiguous dimension) are left alone, with the count as the reason
    assert "already walk the contiguous dimension" in plans["tiled_names"][2].refusals["swap_axes"]


def test_swap_axes_refuses_what_the_renaming_would_not_cover(plans):
    mep, spec, _ = plans["weigh_rows"]
    text = (mep / "kernel.cu").read_text()
    launch = current_launch(spec, None)
    shuffled = text.replace("+ 1.0f;", "+ __shfl_down_sync(0xffffffff, 1.0f, 1);")
    with pytest.raises(Refused, match="warp-level operations"):
        SwapAxes().space(KernelSource(shuffled, spec), spec, launch)
    spelled = text.replace("int c = blockIdx.y * blockDim.y + threadIdx.y;", "int c = MY_Y;")
    spelled = spelled.replace("__global__ void weigh_rows", "#define MY_Y (blockIdx.y * blockDim.y + threadIdx.y)\n"
                                                            "__global__ void weigh_rows")
    with pytest.raises(Refused, match="a macro spells the thread geometry"):
        SwapAxes().space(KernelSource(spelled, spec), spec, launch)
    wide = {**launch, "grid": ["70000", "16"]}
    with pytest.raises(Refused, match="more than the 65535"):
        SwapAxes().space(KernelSource(text, spec), spec, wide)


def test_swapped_then_reshaped_keeps_every_element_covered(plans):
    """swap_axes then a 32x8 block on `dim3 block(16, 16)`: each grid dimension follows its own block dimension,
    and the literal round-up (`+ 15`) follows the block too."""
    mep, spec, _ = plans["weigh_rows"]
    catalog = {t.name: t for t in all_transformations()}
    _, launch, _ = apply_chain(catalog, (mep / "kernel.cu").read_text(), spec,
                               [{"name": "swap_axes", "params": {"axes": "yx"}},
                                {"name": "launch_config", "params": {"block": "32x8"}}])
    assert launch["block"] == ["32", "8"]
    assert launch["grid"] == ["(4096 + 31) / 32", "(4096 + 7) / 8"]
    assert with_block("(n + 255) / 256", "256", 128) == "(n + 127) / 128"
    assert with_block("1 + (n - 1) / 16", "16", 32) == "1 + (n - 1) / 32"


def test_block_size_macros_and_template_bounds_are_tiled(plans):
    _, _, p = plans["tiled_names"]
    assert "tile_matmul" in p.structural, p.refusals.get("tile_matmul")
    assert _candidate(p, "tile_matmul")["launch"]["grid"][0].startswith("(1024 +")
    mep, spec, p = plans["fixed_product"]
    assert "tile_matmul" in p.structural, p.refusals.get("tile_matmul")
    text = (Path(_candidate(p, "tile_matmul")["folder"]) / "kernel.cu").read_text()
    assert "template <int ROWS, int COLS, int DEPTH>" in text and "< ROWS" in text
    assert "1024" in " ".join(_candidate(p, "tile_matmul")["launch"]["grid"])
    # the normalized index reads blockDim where the launch's block is the macro, nowhere else
    src = KernelSource((plans["tiled_names"][0] / "kernel.cu").read_text(), plans["tiled_names"][1])
    assert "int i = blockIdx.y * blockDim.y + threadIdx.y;" in src.text and "#define TY 16" in src.text


def test_stencils_with_a_source_term_two_fields_and_a_3d_macro_index(plans):
    """Several statements (temporaries), a second field read at the centre or at every neighbour, a 3D index
    through a function-like macro with macro bounds, two fields stepped together with unsigned indices and a block of
    depth 1: each is tiled and strip-mined."""
    for kernel in ("heat_source", "two_fields", "box7", "wave_pair"):
        _, _, p = plans[kernel]
        assert {"tile_stencil", "stencil_rows"} <= set(p.structural), (kernel, p.refusals)
    assert "halo 1/1/1" in _candidate(plans["box7"][2], "tile_stencil")["change"]


def test_a_flattened_2d_grid_is_launched_as_2d(plans):
    mep, spec, p = plans["flat_blur"]
    assert "unflatten" in p.structural, p.refusals.get("unflatten")
    cand = _candidate(p, "unflatten")
    text = (Path(cand["folder"]) / "kernel.cu").read_text()
    body = " ".join(text[text.index("void flat_blur"):].split())
    assert "int px = blockIdx.x * blockDim.x + threadIdx.x; int py = blockIdx.y * blockDim.y + threadIdx.y; " \
           "int t = py * (w) + px; if (px < (w) && py < (h)) { float s = src[t];" in body
    assert "%" not in body.split("dst[t]")[0] and "t / w" not in body
    assert cand["launch"]["block"] == ["32", "8"] and cand["launch"]["grid"][1].endswith("+ 8 - 1) / 8")
    src_text = (mep / "kernel.cu").read_text()
    launch = current_launch(spec, None)
    from mepgen.optimize.library.unflatten import Unflatten
    for old, new, why in (("if (t < w * h)", "if (t < w * h + 1)", "not a multiple of the width"),
                          ("int py = t / w;", "int py = t / h;", "divide by `w` and `h`")):
        with pytest.raises(Refused, match=why):
            Unflatten().space(KernelSource(src_text.replace(old, new), spec), spec, launch)


def test_a_64_bit_flat_index_guarded_on_its_coordinates_is_launched_as_2d(plans):
    """`id = static_cast<long long>(blockDim.x) * blockIdx.x + threadIdx.x; r = id / cols; c = id % cols;
    if (r >= rows || c >= cols) return;`: no 64-bit division per thread; the guard bounds the coordinates."""
    mep, spec, p = plans["flip_sites"]
    assert "unflatten" in p.structural, p.refusals.get("unflatten")
    cand = _candidate(p, "unflatten")
    body = " ".join((Path(cand["folder"]) / "kernel.cu").read_text().split())
    assert "const int c = blockIdx.x * blockDim.x + threadIdx.x; const int r = blockIdx.y * blockDim.y + threadIdx.y;" \
        in body and "if (c < (cols) && r < (rows)) {" in body
    assert "id / cols" not in body and "id % cols" not in body and "long long id" not in body   # id no longer read
    assert cand["launch"]["grid"] == ["((GY / 2) + 32 - 1) / 32", "((GX) + 8 - 1) / 8"]
    src_text = (mep / "kernel.cu").read_text()
    from mepgen.optimize.library.unflatten import Unflatten
    launch = current_launch(spec, None)
    for old, new, why in (("c >= cols) return;", "c >= rows) return;", "not the width `cols`"),
                          ("r >= rows ||", "r >= rows + 1 ||", "guard bounds the y coordinate twice"),
                          ("signed char s = spin", "__syncwarp(); signed char s = spin", "warp-level operations")):
        if old == "r >= rows ||":
            new = "r >= rows || r >= rows + 1 ||"
        with pytest.raises(Refused, match=why):
            Unflatten().space(KernelSource(src_text.replace(old, new), spec), spec, launch)


@pytest.mark.nvcc
def test_idiom_rewrites_compile(plans, tmp_path):
    assert_structural_rewrites_compile(plans, tmp_path)
