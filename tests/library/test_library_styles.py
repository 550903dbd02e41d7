"""The library acts on what a kernel computes, not on how it is spelled (issue 22).

tests/library_styles/ holds the same seven kernels (a product with a reduction loop, a row-wise matrix-vector
product, one that skips the matrix's zeros (`if (M[..] != 0) t += ...`), a column sum, a 5-point stencil, an in-place
quarter turn of a square grid by rings, the nearest row by squared distance) in four spellings: the examples' style; C89 counters with bounds
through macros and a `DATA_TYPE` macro; early returns, nested guards and 1D work on a 256x1-block 2D launch;
a typedef'd element type with `T *a` pointers; bounds through a macro of a shared header that picks the run-time
argument (found through a Makefile that includes shared rules by a variable), launch grids in float arithmetic
without <math.h>, and 1D work on 32x8 blocks whose threads along y repeat it. Each is extracted and cut into MEPs
as a user would, and every spelling must get the same structural rewrites, each compiling with the MEP's flags.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from library_fixtures import compiles, load, nvcc_cubin, planned
from mepgen.optimize.dry_run import STRUCTURAL, plan
from mepgen.optimize.library.base import one_dimensional
from mepgen.optimize.library.macros import definitions, expand, simplified
from mepgen.optimize.library.restrict import Restrict
from mepgen.optimize.library.source import KernelSource
from mepgen.spec import load_spec

# one worker cuts this module's MEPs (its module fixture): spread over two, each cut them again (about 27 s)
pytestmark = pytest.mark.xdist_group("library_styles")

STYLES = Path(__file__).parent.parent / "library_styles"
KERNELS = {"prod": {"tile_matmul"}, "rowdot": {"warp_per_row", "stage_table"},
           "maskdot": {"warp_per_row", "stage_table"}, "colsum": {"split_columns"},
           "relax": {"tile_stencil", "stencil_rows"}, "turn": {"spread_loop"}, "nearest": {"tile_argmax"},
           "hprod": {"tile_matmul"}}      # hprod: only in the examples' style (a template launched on __half)
for _k in ("prod", "hprod", "relax"):     # enough threads to give C blocks' work to a block (the others' launches
    KERNELS[_k].add("coarsen_blocks")     # hold a few thousand threads: coarsen_blocks refuses them)


@pytest.fixture(scope="module")
def apps(tmp_path_factory):
    root = tmp_path_factory.mktemp("styles")
    out = {}
    for style in sorted(p.name for p in STYLES.iterdir()):
        app = root / style
        shutil.copytree(STYLES / style, app)
        for args in (["extract", "."], ["mep", "--all"]):
            done = subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=app, capture_output=True, text=True)
            assert done.returncode == 0, done.stdout + done.stderr
        out[style] = app
    return out


@pytest.fixture(scope="module")
def plans(apps):
    out = {}
    for style, app in apps.items():
        for mep in sorted((app / ".mepgen" / "meps").iterdir()):
            kernel = mep.name
            spec = load_spec(mep / "mep.yaml")
            assert not spec.todo, (style, kernel, spec.todo)
            out[style, kernel] = (mep, spec, plan(spec, (mep / "kernel.cu").read_text(), app / "dryrun" / kernel))
    return out


def test_every_spelling_gets_the_same_structural_rewrites(plans):
    assert {k for _, k in plans} == set(KERNELS) | {"scaled"}
    for (style, kernel), (_, _, p) in plans.items():
        if kernel not in KERNELS:
            continue
        # scalar_replace is offered where the spelling accumulates in global memory (C89 style), on top
        structural = set(p.structural) - {"scalar_replace"}
        assert structural == KERNELS[kernel], (style, kernel, p.refusals)


def test_rewrites_keep_the_applications_spelling(plans):
    _, _, p = plans["c89_macros", "prod"]
    tiled = Path(next(c["folder"] for c in p.candidates if c["name"] == "tile_matmul")) / "kernel.cu"
    text = tiled.read_text()
    # the macro bounds and the element-type macro stay as the application wrote them; the global sum was
    # moved into a register first (said in the explanation), and the launch is over the MEP's sizes
    assert "__global__ void prod(int nr, int nc, int nk, DATA_TYPE *X, DATA_TYPE *Y, DATA_TYPE *Z)" in text
    assert "mepgen_gr < ROWS_B && mepgen_gk < INNER_B" in text
    cand = next(c for c in p.candidates if c["name"] == "tile_matmul")
    assert cand["change"].startswith("scalar replacement of the global sum, then tile_matmul")
    assert cand["launch"]["grid"] == ["(NC + 64 - 1) / 64", "(NR + 64 - 1) / 64"]
    _, _, rows = plans["c89_macros", "rowdot"]
    assert "w[r] += ..." in next(c["change"] for c in rows.candidates if c["name"] == "warp_per_row")


def test_scaled_product_with_an_output_dependent_start(plans):
    """`Z *= beta; for (p...) Z += alpha * X * Y` (C89): the register starts at Z * beta for each output, and the
    addend keeps its scalar factor."""
    _, _, p = plans["c89_macros", "scaled"]
    cand = next(c for c in p.candidates if c["name"] == "tile_matmul")
    text = (Path(cand["folder"]) / "kernel.cu").read_text()
    assert "mepgen_acc[mepgen_q][mepgen_w] = ((r < ROWS_B) && (c < COLS_B)) ? ((Z[r * NC + c] * (beta))) : float(0);" \
        in text
    assert "+= (alpha * mepgen_a[mepgen_q] * mepgen_b[mepgen_w]);" in text
    assert "if (mepgen_k0 + mepgen_kk >= INNER_B) break;" in text


def test_generalized_inner_product(plans):
    """acc += g(X[row, p], Y[p, col]) with g pure (a distance instead of a product) is tiled the same way."""
    from mepgen.optimize.library.tile_matmul import TileMatmul
    mep, _, _ = plans["examples", "prod"]
    src, spec, launch = load(mep)
    edited = src.text.replace("t += X[r * q + p] * Y[p * n + c];", "t += fabsf(X[r * q + p] - Y[p * n + c]);")
    assert edited != src.text
    src = KernelSource(edited, spec)
    rw = TileMatmul().apply(src, spec, launch, {"tile": 64, "rm": 4, "rn": 1, "bk": 16})
    assert "mepgen_acc[mepgen_q] += (fabsf(mepgen_As[mepgen_kk][(int)threadIdx.y + mepgen_q * 16] - mepgen_b));" \
        in rw.text
    assert "if (mepgen_k0 + mepgen_kk >= q) break;" in rw.text
    reads_other = src.text.replace("fabsf(X[r * q + p] - Y[p * n + c])", "fabsf(X[r * q + p] - Y[p * n + c] + Z[0])")
    with pytest.raises(Exception, match="does not read exactly two array elements"):
        TileMatmul().space(KernelSource(reads_other, spec), spec, launch)


def test_split_columns_over_a_sum_into_the_output(plans):
    """`for (r...) s[c] += M[r * NC + c]` with no start of its own: the slices sum from zero, the output's own
    value is added once after them."""
    mep, spec, _ = plans["c89_macros", "colsum"]
    src, spec, launch = load(mep)
    edited = src.text.replace("s[c] = 0;", "")
    assert edited != src.text
    from mepgen.optimize.library.catalog import all_transformations
    split = next(t for t in all_transformations() if t.name == "split_columns")
    rw = split.apply(KernelSource(edited, spec), spec, launch, {"shape": "16x16", "unroll": 1})
    assert "mepgen_acc0 = 0;" in rw.text and "s[c] = s[c] + mepgen_acc0;" in rw.text


def test_scalar_replace_several_sums_in_one_loop(plans):
    """`w[r] += ...; v[r] += ...;` in one loop (C89 counter): a register each, `w[r] = 0;` before the loop as
    w's start, v started from its own element."""
    from mepgen.optimize.library.scalar_replace import ScalarReplace
    mep, _, _ = plans["c89_macros", "rowdot"]
    src, spec = _kernel(mep, "{\n    int r = blockIdx.x * blockDim.x + threadIdx.x;\n    int c;\n    if (r < ROWS_B) {\n"
                             "        w[r] = 0;\n        for (c = 0; c < NC; c++) {\n            w[r] += M[r * NC + c];\n"
                             "            v[r] += M[c * NC + r];\n        }\n    }\n}\n")
    launch = one_dimensional({"grid": list(spec.launch.grid), "block": list(spec.launch.block)}, spec)
    rw = ScalarReplace().apply(src, spec, launch, {})
    body = " ".join(rw.text[rw.text.index("int r = blockIdx"):].split())
    assert "DATA_TYPE mepgen_acc0 = (0); DATA_TYPE mepgen_acc1 = v[r]; for (int c = 0; c < NC; c++) { mepgen_acc0 += " \
           "M[r * NC + c]; mepgen_acc1 += M[c * NC + r]; } w[r] = mepgen_acc0; v[r] = mepgen_acc1;" in body
    reads_own = src.text.replace("v[r] += M[c * NC + r];", "v[r] += w[c];")
    with pytest.raises(Exception, match="no loop accumulates"):
        ScalarReplace().space(KernelSource(reads_own, spec), spec, launch)


def test_warp_per_row_over_several_sums(plans, tmp_path):
    """Two row sums in one loop (gesummv-like, accumulated in the outputs): a partial sum per lane for each, both
    combined with shuffles (and through shared memory with two warps per row); the result compiles."""
    from mepgen.optimize.library.warp_row import WarpPerRow
    mep, _, _ = plans["c89_macros", "rowdot"]
    src, spec = _kernel(mep, "{\n    int r = blockIdx.x * blockDim.x + threadIdx.x;\n    int c;\n    if (r < ROWS_B) {\n"
                             "        w[r] = 0;\n        for (c = 0; c < NC; c++) {\n            w[r] += M[r * NC + c];\n"
                             "            v[r] += M[r * NC + c] * M[r * NC + c];\n        }\n    }\n}\n")
    launch = one_dimensional({"grid": list(spec.launch.grid), "block": list(spec.launch.block)}, spec)
    assert WarpPerRow().space(src, spec, launch)["vec"] == [1]
    for tpr in (32, 64):
        rw = WarpPerRow().apply(src, spec, launch, {"tpr": tpr, "block": 256, "vec": 1})
        body = " ".join(rw.text[rw.text.index("mepgen warp_per_row"):].split())
        assert "mepgen_part0 += M[r * NC + c]; mepgen_part1 += M[r * NC + c] * M[r * NC + c];" in body
        assert "w[r] = mepgen_part0; v[r] = (v[r]) + mepgen_part1;" in body
        assert rw.launch["grid"] == [f"((long long)(NR) * {tpr} + 256 - 1) / 256"]
        if tpr == 64 and shutil.which("nvcc"):
            cu = tmp_path / "kernel.cu"
            cu.write_text(rw.text)
            done = nvcc_cubin(spec, cu, tmp_path / "k.cubin", mep)
            assert done.returncode == 0, done.stderr


def test_warp_per_row_keeps_the_sums_guard(plans):
    """A row sum under `if (M[..] != 0)`: each lane tests its own elements (the guard stays around its own
    accumulation), the counter keeps its declared type (`size_t`), and no 128-bit loads are offered (each element is
    tested on its own)."""
    for style, guard, counter in (("examples", "if (M[r * n + c] != 0.0f) mepgen_part += M[r * n + c] * v[c];",
                                   "for (int c = (0) + mepgen_lane;"),
                                  ("typedef_ptr", "if (M[r * n + c] != (real)0) mepgen_part += M[r * n + c] * v[c];",
                                   "for (size_t c = (0) + mepgen_lane;"),
                                  ("c89_macros", "if (M[r * NC + c] != 0) mepgen_part += M[r * NC + c] * v[c];",
                                   "mepgen_lane;")):
        _, _, p = plans[style, "maskdot"]
        cand, text = planned(p, "warp_per_row")
        body = " ".join(text[text.index("mepgen warp_per_row"):].split())
        assert guard in body and counter in body, (style, body)
        assert cand["params"]["vec"] == 1
        assert all(c["params"].get("vec", 1) == 1 for c in p.candidates if c["name"] == "warp_per_row")
        assert "tile_matmul" not in p.structural


def test_restrict_after_the_star_of_t_star_a(plans):
    """`DATA_TYPE *a` and `real *a` take `__restrict__` between the star and the name (it used to run into it)."""
    for style, sig in (("c89_macros", "DATA_TYPE * __restrict__ u, DATA_TYPE * __restrict__ v"),
                       ("typedef_ptr", "real * __restrict__ u, real * __restrict__ v")):
        mep, spec, _ = plans[style, "relax"]
        src, spec, launch = load(mep)
        rw = Restrict().apply(src, spec, launch, {"ldg": False})
        assert sig in rw.text


def test_one_d_work_on_a_2d_launch_is_1d(plans):
    _, spec, p = plans["launch2d_returns", "colsum"]
    assert list(spec.launch.block) == ["256", "1"]
    launch = one_dimensional({"grid": list(spec.launch.grid), "block": list(spec.launch.block)}, spec)
    assert launch["block"] == ["256"] and len(launch["grid"]) == 1
    split = next(c for c in p.candidates if c["name"] == "split_columns")
    assert len(split["launch"]["grid"]) == 1
    # a dimension that is 1 only for these sizes (N = 1024) stays: other sizes would need it
    assert len(one_dimensional({"grid": ["4", "(N + 2047) / 2048"], "block": ["256", "1"]}, spec)["grid"]) == 2
    # a real second dimension stays
    _, spec2, _ = plans["launch2d_returns", "prod"]
    assert one_dimensional({"grid": list(spec2.launch.grid), "block": list(spec2.launch.block)}, spec2)["block"] == \
        ["32", "8"]


def test_macro_bounds_expand_to_the_meps_sizes():
    defs = definitions("#define SIZE_OF(sz, var) sz\n#define ROWS SIZE_OF(NR, nr)\n#define PAD (ROWS + 2)\n"
                       "#define STR(x) #x\n")
    assert simplified(expand("ROWS - 1", defs, {"NR"})) == "NR - 1"
    assert simplified(expand("PAD * NC", defs, {"NR"})).replace(" ", "") == "((NR+2))*NC"
    assert simplified(expand("STR(ROWS)", defs, {"NR"})) == "STR ( NR )"     # stringizing is not followed


def _kernel(spec_dir: Path, body: str):
    spec = load_spec(spec_dir / "mep.yaml")
    text = (spec_dir / "kernel.cu").read_text()
    start = text.index("{", text.index("__global__"))
    return KernelSource(text[:start] + body, spec), spec


def test_normalization_steps(plans, tmp_path):
    mep, _, _ = plans["examples", "rowdot"]
    # C89 counter used only by its loop: declared by the loop; one read after the loop: left alone
    src, _ = _kernel(mep, "{\n    int r = blockIdx.x * blockDim.x + threadIdx.x;\n    int c, k;\n    if (r < n) {\n"
                          "        float t = 0.0f;\n        for (c = 0; c < n; c++) t += M[r * n + c];\n"
                          "        for (k = 0; k < n; k++) t += v[k];\n        w[r] = t + k;\n    }\n}\n")
    body = src.src(src.body)
    assert "for (int c = 0; c < n; c++)" in body and "int k;" in body and "for (k = 0;" in body
    # early return, negated through || ; nested guards merged; an index declared inside the guard hoisted
    src, _ = _kernel(mep, "{\n    int r = blockIdx.x * blockDim.x + threadIdx.x;\n    if (r >= n || r < 0) return;\n"
                          "    float t = 0.0f;\n    for (int c = 0; c < n; c++) t += M[r * n + c];\n    w[r] = t;\n}\n")
    assert "if (r < n && r >= 0) {" in src.src(src.body) and "return" not in src.src(src.body)
    src, _ = _kernel(mep, "{\n    int r = blockIdx.x * blockDim.x + threadIdx.x;\n    if (r < n) {\n"
                          "        int q = threadIdx.y;\n        if (q == 0) {\n            w[r] = v[r];\n"
                          "        }\n    }\n}\n")
    body = " ".join(src.src(src.body).split())
    assert "int q = threadIdx.y; if (r < n && q == 0) { w[r] = v[r]; }" in body
    # an early return, then a guard over one statement without braces: merged, the statement keeps its `;` (every
    # candidate of such a kernel failed to compile on the GPU: "expected a ;")
    for inner in ("if (v[r] == 0) w[r] = 0.5f * w[r];", "if (v[r] == 0)\n        w[r] = 0.5f * w[r] ;"):
        src, spec = _kernel(mep, "{\n    int r = blockIdx.x * blockDim.x + threadIdx.x;\n    if (r >= n) return;\n"
                                 f"    {inner}\n}}\n")
        body = " ".join(src.src(src.body).split())
        assert re.search(r"if \(r < n && v\[r\] == 0\) \{ w\[r\] = 0\.5f \* w\[r\] ?; \}", body), body
        compiles(tmp_path, spec, src.text)
    # a local pointer into a parameter's buffer, only indexed: read through the parameter
    src, _ = _kernel(mep, "{\n    int r = blockIdx.x * blockDim.x + threadIdx.x;\n    if (r < n) {\n"
                          "        const float* row = M + r * n;\n        float t = 0.0f;\n"
                          "        for (int c = 0; c < n; c++) t += row[c] * v[c];\n        w[r] = t;\n    }\n}\n")
    body = src.src(src.body)
    assert "t += M[(r * n) + (c)] * v[c];" in body and "const float* row" not in body
    # ... but not when the pointer is used otherwise (moved, or passed on)
    src, _ = _kernel(mep, "{\n    const float* row = M + 1;\n    row++;\n    w[0] = row[0];\n}\n")
    assert "w[0] = row[0];" in src.src(src.body)
    # C89 coefficients set right after their declaration: declared with their values (then a 2D stencil matches)
    relax, _, _ = plans["examples", "relax"]
    src, spec = _kernel(relax, "{\n    const int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
                               "    const int y = blockIdx.y * blockDim.y + threadIdx.y;\n    float c0, c1;\n"
                               "    c0 = 0.5f;  c1 = 0.125f;\n    if (x >= 1 && x < nx - 1 && y >= 1 && y < ny - 1) {\n"
                               "        v[y * nx + x] = c0 * u[y * nx + x] + c1 * (u[y * nx + x - 1] + u[y * nx + x + 1]"
                               " + u[(y - 1) * nx + x] + u[(y + 1) * nx + x]);\n    }\n}\n")
    assert "float c0 = 0.5f; float c1 = 0.125f;\n    if (x >= 1" in src.src(src.body)
    from mepgen.optimize.library.tile_stencil import TileStencil
    assert TileStencil().space(src, spec, one_dimensional({"grid": list(spec.launch.grid),
                                                            "block": list(spec.launch.block)}, spec))
    # a return that is not the end of the work (a loop body) is left as written
    src, _ = _kernel(mep, "{\n    for (int c = 0; c < n; c++) {\n        if (v[c] < 0) return;\n"
                          "        w[c] = v[c];\n    }\n}\n")
    assert "if (v[c] < 0) return;" in src.src(src.body)


def test_dry_run_command(apps):
    app = apps["c89_macros"]
    done = subprocess.run([sys.executable, "-m", "mepgen.cli", "optimize", "relax", "--dry-run"], cwd=app,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "try     tile_stencil" in done.stdout and "refuses tile_matmul" in done.stdout
    assert (app / ".mepgen" / "dryrun" / "relax" / "00-tile_stencil" / "kernel.cu").is_file()


@pytest.mark.nvcc
def test_every_structural_rewrite_compiles(plans, tmp_path):
    jobs = []
    for (style, kernel), (mep, spec, p) in plans.items():
        for c in p.candidates:
            if c["name"] in STRUCTURAL or c["name"] == "restrict_ldg" and style in ("c89_macros", "typedef_ptr"):
                jobs.append((style, kernel, c["name"], mep, spec, Path(c["folder"]) / "kernel.cu"))
    assert len(jobs) >= 16 + 8

    def build(job):
        style, kernel, name, mep, spec, cu = job
        done = nvcc_cubin(spec, cu, tmp_path / f"{style}-{kernel}-{name}.cubin", mep)
        return job[:3], done.returncode, done.stderr[-2000:]

    with ThreadPoolExecutor(2) as pool:
        failed = [(what, err) for what, rc, err in pool.map(build, jobs) if rc != 0]
    assert not failed, failed
