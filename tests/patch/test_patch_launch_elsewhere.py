"""A kernel launched from another file than its own (a main file that includes the kernels' file, or launches
them through a header): a winner's new launch lands at the launch site, in the file that holds it, as a patch of
its own (`ID@file`) applied, shown and reverted with the kernel's."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

KERNELS = """// kernels.cu: included by main.cu, not compiled alone
__global__ void smooth(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > 0 && i < n - 1) out[i] = 0.25f * in[i - 1] + 0.5f * in[i] + 0.25f * in[i + 1];
}
"""
MAIN = """#include <cstdio>
#include <cstdlib>
#include "kernels.cu"

int main(int argc, char** argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    float *in, *out;
    cudaMalloc(&in, n * sizeof(float));
    cudaMalloc(&out, n * sizeof(float));
    cudaMemset(in, 0, n * sizeof(float));
    smooth<<<(n + 255) / 256, 256>>>(in, out, n);
    cudaDeviceSynchronize();
    printf("done\\n");
    return 0;
}
"""


def mepgen(*args, cwd):
    return subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=cwd, capture_output=True, text=True)


def make_app(folder: Path, kernels: str, main: str, kernel: str, sizes=("N=4096",)) -> Path:
    """An application whose main.cu includes kernels.cu and launches `kernel`, extracted, its MEP made (`sizes`)."""
    app = folder / "app"
    app.mkdir()
    (app / "kernels.cu").write_text(kernels)
    (app / "main.cu").write_text(main)
    (app / "Makefile").write_text("app: main.cu kernels.cu\n\tnvcc -O2 -o app main.cu\n")
    assert mepgen("extract", ".", cwd=app).returncode == 0
    assert mepgen("mep", kernel, *(a for v in sizes for a in ("--size", v)), cwd=app).returncode == 0
    return app


@pytest.fixture
def app(tmp_path):
    return make_app(tmp_path, KERNELS, MAIN, "smooth")


def winner(app: Path, tmp_path: Path, block: int) -> Path:
    mep = app / ".mepgen/meps/smooth"
    out = tmp_path / "winner"
    out.mkdir()
    (out / "kernel.cu").write_text((mep / "kernel.cu").read_text())
    text = (mep / "mep.yaml").read_text()
    old = "launch: {grid: [(N + 255) / 256], block: ['256']"
    assert old in text
    (out / "mep.yaml").write_text(text.replace(old, f"launch: {{grid: ['(N + {block - 1}) / {block}'], "
                                                    f"block: ['{block}']"))
    return out


def test_the_new_launch_lands_in_the_file_that_launches_the_kernel(app, tmp_path):
    w = winner(app, tmp_path, 128)
    r = mepgen("patch", "smooth", "--from", str(w / "kernel.cu"), "--json", cwd=app)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["state"] == "pristine" and "main.cu:12: grid (n + 255) / 256 -> (n + 127) / 128" in out["launch"]
    diff = (app / ".mepgen/patches/smooth.diff").read_text()
    assert diff.startswith("--- a/main.cu\n+++ b/main.cu\n")
    assert "+#ifndef SMOOTH_BLOCK  // launch block chosen by mepgen for smooth\n+#define SMOOTH_BLOCK 128\n" in diff
    assert "+    smooth<<<(n + 127) / 128, SMOOTH_BLOCK>>>(in, out, n);" in diff
    assert (app / "main.cu").read_text() == MAIN                         # a preview changes nothing
    done = subprocess.run(["git", "apply", "--check", str(app / ".mepgen/patches/smooth.diff")], cwd=app,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.nvcc
def test_it_builds_and_reverts_byte_identical(app, tmp_path):
    w = winner(app, tmp_path, 64)
    r = mepgen("patch", "smooth", "--from", str(w / "kernel.cu"), "--apply", "--json", cwd=app)
    assert r.returncode == 0, r.stderr + r.stdout
    out = json.loads(r.stdout)
    assert out["valid"] is True and out["files"] == ["kernels.cu", "main.cu"]
    assert "smooth<<<(n + 63) / 64, SMOOTH_BLOCK>>>" in (app / "main.cu").read_text()
    assert (app / "kernels.cu").read_text() == KERNELS
    assert mepgen("patch", "smooth", "--from", str(w / "kernel.cu"), "--json", cwd=app).returncode == 0
    assert json.loads(mepgen("patch", "smooth", "--from", str(w / "kernel.cu"), "--json", cwd=app).stdout)["state"] \
        == "applied"
    r = mepgen("patch", "smooth", "--revert", cwd=app)
    assert r.returncode == 0, r.stderr
    assert (app / "main.cu").read_text() == MAIN and (app / "kernels.cu").read_text() == KERNELS


ROWS = """__global__ void rows(const float* in, float* out, int n)
{
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    int c = threadIdx.x;
    if (r < n) out[r * 16 + c] = 2.0f * in[r * 16 + c];
}
"""
ROWS_MAIN = """#include <cstdlib>
#include "kernels.cu"

int main(int argc, char** argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4096;
    int num_blocks = n / 16;
    float *in, *out;
    cudaMalloc(&in, n * 16 * sizeof(float));
    cudaMalloc(&out, n * 16 * sizeof(float));
    dim3  grid( 1 , num_blocks);
    dim3  threads(16 , 16);
    rows<<<grid, threads>>>(in, out, n);
    cudaDeviceSynchronize();
    return 0;
}
"""


def test_a_grid_declared_as_a_dim3_gets_the_new_grid_in_the_launch(tmp_path):
    """`dim3 grid(1, num_blocks);` (a constructor, not `grid = ...`): seen in a public application, where the
    patch stopped with "cannot find the declaration of the grid". The launch itself gets the winner's grid."""
    app = make_app(tmp_path, ROWS, ROWS_MAIN, "rows")
    mep = app / ".mepgen/meps/rows"
    w = tmp_path / "winner"
    w.mkdir()
    (w / "kernel.cu").write_text((mep / "kernel.cu").read_text())
    text = (mep / "mep.yaml").read_text()
    old = "launch: {grid: ['1', N / 16], block: ['16', '16']"
    assert old in text
    (w / "mep.yaml").write_text(text.replace(old, "launch: {grid: ['1', N / 32], block: ['16', '32']"))
    r = mepgen("patch", "rows", "--from", str(w / "kernel.cu"), "--json", cwd=app)
    assert r.returncode == 0, r.stderr
    diff = (app / ".mepgen/patches/rows.diff").read_text()
    assert "+#define ROWS_BLOCK dim3(16, 32)" in diff
    launch = [l for l in diff.splitlines() if l.startswith("+    rows<<<")]
    assert len(launch) == 1 and launch[0].startswith("+    rows<<<dim3(1, ") and "/ 32), ROWS_BLOCK>>>" in launch[0]
    assert "-    dim3  grid( 1 , num_blocks);" not in diff              # the local stays


def numbers_winner(app: Path, tmp_path: Path, grid: int, block: int) -> Path:
    """The MEP's launch made numbers, as `mepgen capture` records a run (N=4096: 16 blocks of 256), and a winner
    with `grid` blocks of `block` threads."""
    mep = app / ".mepgen/meps/smooth"
    old = "launch: {grid: [(N + 255) / 256], block: ['256']"
    text = (mep / "mep.yaml").read_text()
    assert old in text
    (mep / "mep.yaml").write_text(text.replace(old, "launch: {grid: ['16'], block: ['256']"))
    out = tmp_path / f"winner-{grid}x{block}"
    out.mkdir()
    (out / "kernel.cu").write_text((mep / "kernel.cu").read_text())
    (out / "mep.yaml").write_text(text.replace(old, f"launch: {{grid: ['{grid}'], block: ['{block}']"))
    return out


def test_a_captured_launch_s_new_block_lands_in_the_site_s_own_terms_never_as_a_number(app, tmp_path):
    """A captured MEP's grid (16) holds for the recorded run's size only: the winner's 32 blocks of 128 land as the
    site's own grid computation with the new block, right for every n."""
    w = numbers_winner(app, tmp_path, 32, 128)
    r = mepgen("patch", "smooth", "--from", str(w / "kernel.cu"), "--json", cwd=app)
    assert r.returncode == 0, r.stderr
    assert "main.cu:12: block 256 -> 128, grid (n + 255) / 256 -> (n + 127) / 128" in json.loads(r.stdout)["launch"]
    diff = (app / ".mepgen/patches/smooth.diff").read_text()
    assert "+    smooth<<<(n + 127) / 128, 128>>>(in, out, n);" in diff and "32" not in diff.split("@@")[-1]


def test_a_captured_grid_that_is_not_the_same_elements_in_other_blocks_is_refused(app, tmp_path):
    """Half the blocks of the same size (a coarsened kernel's grid): no spelling in the application's terms follows
    from the numbers, so nothing is written."""
    w = numbers_winner(app, tmp_path, 8, 256)
    r = mepgen("patch", "smooth", "--from", str(w / "kernel.cu"), "--json", cwd=app)
    assert r.returncode != 0 and "captured run's numbers" in r.stderr and "set the launch by hand" in r.stderr
    assert not (app / ".mepgen/patches/smooth.diff").exists()
    assert (app / "main.cu").read_text() == MAIN


def test_a_captured_launch_s_coarsened_grid_lands_over_the_site_s_own_grid(app, tmp_path):
    """4 elements per thread divide a captured grid by 4, written by the library over the captured number
    (`((16) + 4 - 1) / 4`): at the site the same function of the site's own grid, right for every n, never 4."""
    w = numbers_winner(app, tmp_path, 4, 256)
    (w / "mep.yaml").write_text((w / "mep.yaml").read_text().replace("grid: ['4']", "grid: ['((16) + 4 - 1) / 4']"))
    r = mepgen("patch", "smooth", "--from", str(w / "kernel.cu"), "--json", cwd=app)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["launch"] == ["main.cu:12: grid (n + 255) / 256 -> (((n + 255) / 256) + 4 - 1) / 4 "
                                              "(the winner's ((16) + 4 - 1) / 4 over the captured grid 16)"]
    diff = (app / ".mepgen/patches/smooth.diff").read_text()
    assert "+    smooth<<<(((n + 255) / 256) + 4 - 1) / 4, 256>>>(in, out, n);" in diff


def test_a_coarsened_grid_keeps_each_site_s_own_form_and_compiles(tmp_path):
    """Each way a site spells its grid: an integer expression, a literal, `dim3(x, y)` taken apart, a local or a
    call read through dim3's constructor (a dim3 or an integer alike); nvcc compiles every form."""
    import shutil
    from mepgen.patch.captured_launch import over_grid as _over_grid
    quarter = lambda x: f"(({x}) + 4 - 1) / 4"
    forms = {"(n + 255) / 256": "(((n + 255) / 256) + 4 - 1) / 4", "16": "((16) + 4 - 1) / 4",
             "dim3(n / 64, 2)": "dim3(((n / 64) + 4 - 1) / 4, 2)",
             "blocks": "dim3(((dim3(blocks).x) + 4 - 1) / 4, dim3(blocks).y, dim3(blocks).z)",
             "up(n, 256)": "dim3(((dim3(up(n, 256)).x) + 4 - 1) / 4, dim3(up(n, 256)).y, dim3(up(n, 256)).z)"}
    for grid, want in forms.items():
        assert _over_grid(grid, quarter) == want
    assert _over_grid("gws", quarter, dim3_local=True) == "dim3(((gws.x) + 4 - 1) / 4, gws.y, gws.z)"
    forms["gws"] = "dim3(((gws.x) + 4 - 1) / 4, gws.y, gws.z)"
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc: the forms' spelling is checked, their compile is not")
    body = "\n".join(f"    k<<<{want}, 64>>>(p, n);" for want in forms.values())
    src = tmp_path / "forms.cu"
    src.write_text("__global__ void k(float* p, int n) { if (p) p[0] = n; }\n"
                   "static int up(int a, int b) { return (a + b - 1) / b; }\n"
                   f"void launch(float* p, int n, dim3 blocks, dim3 gws) {{\n{body}\n}}\n"
                   "void launch_int(float* p, int n, int blocks) {\n"
                   f"    k<<<{forms['blocks']}, 64>>>(p, n);\n}}\n")
    done = subprocess.run([nvcc, "-c", str(src), "-o", str(tmp_path / "forms.o")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def captured(mep: Path, tmp_path: Path, launch: str, **winners: str) -> dict[str, Path]:
    """The MEP's launch made `launch` (numbers, as `mepgen capture` records a run) and, per name, a winner folder
    (the MEP's kernel.cu) with its own launch."""
    text = (mep / "mep.yaml").read_text()
    old = next(ln for ln in text.splitlines() if ln.startswith("launch:"))
    (mep / "mep.yaml").write_text(text.replace(old, f"launch: {launch}"))
    out = {}
    for name, theirs in winners.items():
        out[name] = tmp_path / name
        out[name].mkdir()
        (out[name] / "kernel.cu").write_text((mep / "kernel.cu").read_text())
        (out[name] / "mep.yaml").write_text(text.replace(old, f"launch: {theirs}"))
    return out


def test_a_captured_launch_s_grid_local_that_other_code_reads_stays(tmp_path):
    """`blocks` sizes two kernels' launches: a captured MEP's new block for one writes that kernel's grid in its own
    launch; the local, and the other kernel's launch, stay as they were."""
    kernels = KERNELS + ("__global__ void scale(float* out, int n)\n{\n    int i = blockIdx.x * blockDim.x + "
                         "threadIdx.x;\n    if (i < n) out[i] *= 2.0f;\n}\n")
    main = MAIN.replace("    smooth<<<(n + 255) / 256, 256>>>(in, out, n);\n",
                        "    int blocks = (n + 255) / 256;\n    smooth<<<blocks, 256>>>(in, out, n);\n"
                        "    scale<<<blocks, 256>>>(out, n);\n")
    app = make_app(tmp_path, kernels, main, "smooth")
    w = captured(app / ".mepgen/meps/smooth", tmp_path, "{grid: ['16'], block: ['256'], shared_mem: '0'}",
                 winner="{grid: ['32'], block: ['128'], shared_mem: '0'}")["winner"]
    r = mepgen("patch", "smooth", "--from", str(w / "kernel.cu"), "--json", cwd=app)
    assert r.returncode == 0, r.stderr
    diff = (app / ".mepgen/patches/smooth.diff").read_text()
    assert "+    smooth<<<(n + 127) / 128, 128>>>(in, out, n);" in diff
    changed = [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert changed == ["-    smooth<<<blocks, 256>>>(in, out, n);", "+    smooth<<<(n + 127) / 128, 128>>>(in, out, n);"]
    assert "the local `blocks` stays as it is for other code" in " ".join(json.loads(r.stdout)["launch"])


IMAGE = """// kernels.cu: a 2-D kernel, one thread per pixel
#define TILE 16
__global__ void shade(float* img, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) img[y * w + x] = 0.5f * x + y;
}
"""
IMAGE_MAIN = """#include <cstdio>
#include <cstdlib>
#include "kernels.cu"

int main(int argc, char** argv)
{
    int w = argc > 1 ? atoi(argv[1]) : 64, h = argc > 2 ? atoi(argv[2]) : 64;
    float* img;
    cudaMalloc(&img, (size_t)w * h * sizeof(float));
    shade<<<dim3((w + TILE - 1) / TILE, (h + TILE - 1) / TILE), dim3(TILE, TILE)>>>(img, w, h);
    cudaDeviceSynchronize();
    printf("done\\n");
    return 0;
}
"""


def test_a_captured_2d_block_change_lands_per_axis_in_the_site_s_terms(tmp_path):
    """A captured 16x16 launch (grid 4x4 for 64x64 pixels) whose winner is 32x4 (grid 2x16): the block becomes the
    winner's numbers, each grid axis its own computation with its new block; TILE keeps its value; nvcc builds it."""
    import shutil
    app = make_app(tmp_path, IMAGE, IMAGE_MAIN, "shade", sizes=("W=64", "H=64"))
    ws = captured(app / ".mepgen/meps/shade", tmp_path, "{grid: ['4', '4'], block: ['16', '16'], shared_mem: '0'}",
                  winner="{grid: ['2', '16'], block: ['32', '4'], shared_mem: '0'}",
                  bad="{grid: ['1', '16'], block: ['32', '4'], shared_mem: '0'}")        # bad: x covers 32 of 64
    w = ws["winner"]
    r = mepgen("patch", "shade", "--from", str(w / "kernel.cu"), "--apply", cwd=app)
    assert r.returncode == 0, r.stderr
    main = (app / "main.cu").read_text()
    assert "shade<<<dim3((w + 32 - 1) / 32, (h + 4 - 1) / 4), dim3(32, 4)>>>(img, w, h);" in main
    assert "#define TILE 16" in (app / "kernels.cu").read_text()
    if shutil.which("nvcc"):
        done = subprocess.run(["nvcc", "-o", str(tmp_path / "app.bin"), "main.cu"], cwd=app, capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr
    assert mepgen("patch", "shade", "--revert", cwd=app).returncode == 0
    r = mepgen("patch", "shade", "--from", str(ws["bad"] / "kernel.cu"), cwd=app)
    assert r.returncode != 0 and "not the same elements" in r.stderr


def test_a_file_of_crlf_lines_gets_crlf_lines_and_a_diff_of_what_changed(tmp_path):
    """A source written on Windows (CRLF, as a public application's is): the variant (mepgen writes the MEP's
    files with LF) is spliced in with CRLF, so the diff shows the changed line only, and a variant equal to the
    original is nothing to patch."""
    crlf = lambda t: t.replace("\n", "\r\n")
    app = make_app(tmp_path, crlf(KERNELS), crlf(MAIN), "smooth")
    mep = app / ".mepgen/meps/smooth"
    same = tmp_path / "same.cu"
    same.write_text((mep / "kernel.cu").read_text().replace("\r\n", "\n"))
    r = mepgen("patch", "smooth", "--from", str(same), cwd=app)
    assert r.returncode != 0 and "byte for byte: nothing to patch" in r.stderr
    changed = tmp_path / "changed.cu"
    changed.write_text(same.read_text().replace("0.5f * in[i]", "in[i] * 0.5f"))
    r = mepgen("patch", "smooth", "--from", str(changed), "--apply", cwd=app)
    assert r.returncode == 0, r.stderr
    diff = (app / ".mepgen/patches/smooth.diff").read_text()
    lines = [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert len(lines) == 2 and "in[i] * 0.5f" in lines[1]
    data = (app / "kernels.cu").read_bytes()
    assert data.count(b"\n") == data.count(b"\r\n") and b"in[i] * 0.5f" in data


GUARDED = """// kernels.cu: one element per thread behind a guard
__global__ void fill(unsigned int* out, unsigned int value, unsigned int count)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        out[i] = value + i;
    }
}
"""
PORTED = """#include <cstdio>
#include <cstdlib>
#include "kernels.cu"

static const unsigned int group = 64;
static size_t round_up(size_t n, size_t g) { return (n + g - 1) / g * g; }

int main(int argc, char** argv)
{
    unsigned int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    unsigned int* out;
    cudaMalloc(&out, n * sizeof(unsigned int));
    size_t global = round_up(n, group);
    dim3 grid(global / group), block(group);
    fill<<<grid, block>>>(out, 7u, n);
    cudaDeviceSynchronize();
    printf("grid %u\\n", grid.x);
    return 0;
}
"""


def test_a_captured_block_change_lands_from_the_kernel_s_guard_where_the_grid_is_not_spelled_with_the_block(tmp_path):
    """A port's launch: a block local and a grid over a size rounded to the old block (`global / group`, `global`
    from `round_up(n, group)`). The site's grid has no block token to change, but the kernel is one element per
    thread behind `i < count`, which optimize proves of the MEP's kernel and writes beside the winner
    (launch_facts.json): the launch gets ceil(n / 256) blocks of 256 from the argument passed for `count`; the locals
    stay for the code that reads them. Refused, as before, without that fact or where the kernel has no such guard."""
    from mepgen.optimize.best_files import write_launch
    from mepgen.spec import load_spec
    app = make_app(tmp_path, GUARDED, PORTED, "fill", sizes=("COUNT=4096",))
    mep = app / ".mepgen/meps/fill"
    w = captured(mep, tmp_path, "{grid: ['64'], block: ['64'], shared_mem: '0'}",
                 winner="{grid: ['16'], block: ['256'], shared_mem: '0'}")["winner"]
    r = mepgen("patch", "fill", "--from", str(w / "kernel.cu"), "--json", cwd=app)
    assert r.returncode != 0 and "is not spelled with its block `block`" in r.stderr     # no facts: refused
    # optimize writes the winner's launch and what the kernel proves about it beside it
    write_launch(load_spec(mep / "mep.yaml"), {"grid": ["16"], "block": ["256"]}, w / "mep.yaml",
                 original=(mep / "kernel.cu").read_text())
    assert json.loads((w / "launch_facts.json").read_text()) == {"guard": {"param": "count", "index": 2,
                                                                           "guard": "i < count"}}
    r = mepgen("patch", "fill", "--from", str(w / "kernel.cu"), "--json", cwd=app)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)["launch"]
    assert said == ["main.cu:15: grid grid -> (n + 256 - 1) / 256, block block -> 256: the kernel's threads each do "
                    "one element's work behind `i < count`, and `count` is `n` here"]
    diff = (app / ".mepgen/patches/fill.diff").read_text()
    assert "+    fill<<<(n + 256 - 1) / 256, 256>>>(out, 7u, n);" in diff
    r = mepgen("patch", "fill", "--from", str(w / "kernel.cu"), "--apply", "--json", cwd=app)
    assert r.returncode == 0, r.stderr + r.stdout
    assert json.loads(r.stdout)["valid"] is True                      # the application builds with it
    patched = (app / "main.cu").read_text()
    assert "fill<<<(n + 256 - 1) / 256, 256>>>(out, 7u, n);" in patched
    assert "dim3 grid(global / group), block(group);" in patched      # the locals stay: printf reads grid
    assert mepgen("patch", "fill", "--revert", cwd=app).returncode == 0
    assert (app / "main.cu").read_text() == PORTED
    # the same launch of a kernel that reads blockDim beyond its index: no guard to derive the grid from
    strided = GUARDED.replace("out[i] = value + i;", "out[i] = value + blockDim.x;")
    (tmp_path / "b").mkdir()
    app2 = make_app(tmp_path / "b", strided, PORTED, "fill", sizes=("COUNT=4096",))
    w2 = captured(app2 / ".mepgen/meps/fill", tmp_path / "b", "{grid: ['64'], block: ['64'], shared_mem: '0'}",
                  winner="{grid: ['16'], block: ['256'], shared_mem: '0'}")["winner"]
    write_launch(load_spec(app2 / ".mepgen/meps/fill/mep.yaml"), {"grid": ["16"], "block": ["256"]},
                 w2 / "mep.yaml", original=(app2 / ".mepgen/meps/fill/kernel.cu").read_text())
    assert not (w2 / "launch_facts.json").exists()
    r = mepgen("patch", "fill", "--from", str(w2 / "kernel.cu"), "--json", cwd=app2)
    assert r.returncode != 0 and "is not spelled with its block `block`" in r.stderr
    assert (app2 / "main.cu").read_text() == PORTED


def test_a_winner_doing_several_elements_per_thread_lands_from_the_guard_with_its_grid_divided(tmp_path):
    """The winner vectorized the guarded kernel (4 elements per thread) and took blocks of 256: its captured grid is
    ceil(4096 / (256 x 4)) = 4, not the same elements in blocks of another size. optimize derives the 4 from the
    winning chain (launch_config, then vector_elements with 4 lanes) and checks it against the winner's grid; patch
    then writes ceil(n / 1024) blocks of 256 from the argument passed for `count`, and the application builds.
    A chain with a step of unknown effect (an LLM's text), or a grid that is not that number, gets no such fact."""
    from mepgen.optimize.best_files import write_launch
    from mepgen.spec import load_spec
    app = make_app(tmp_path, GUARDED, PORTED, "fill", sizes=("COUNT=4096",))
    mep = app / ".mepgen/meps/fill"
    w = captured(mep, tmp_path, "{grid: ['64'], block: ['64'], shared_mem: '0'}",
                 winner="{grid: ['4'], block: ['256'], shared_mem: '0'}")["winner"]
    spec = load_spec(mep / "mep.yaml")
    block = {"name": "launch_config", "params": {"block": 256}}
    lanes = {"name": "vector_elements", "params": {"lanes": 4}}
    chain = [("inherited", [block]), ("library", [{"name": "inherited", "params": {}}, lanes]),
             ("library", [{"name": "inherited", "params": {}}, lanes, {"name": "tune_params", "params": {"regs": 32}}])]
    for other in ([("llm", []), ("library", [lanes])], chain[:1] + [("library", [lanes, {"name": "tile_stencil"}])]):
        write_launch(spec, {"grid": ["4"], "block": ["256"]}, w / "mep.yaml", original=(mep / "kernel.cu").read_text(),
                     chain=other)
        assert "per_thread" not in json.loads((w / "launch_facts.json").read_text())["guard"]
    write_launch(spec, {"grid": ["5"], "block": ["256"]}, w / "mep.yaml", original=(mep / "kernel.cu").read_text(),
                 chain=chain)                         # not ceil(4096 / 1024): the factor is not that grid's
    assert "per_thread" not in json.loads((w / "launch_facts.json").read_text())["guard"]
    write_launch(spec, {"grid": ["4"], "block": ["256"]}, w / "mep.yaml", original=(mep / "kernel.cu").read_text(),
                 chain=chain)
    assert json.loads((w / "launch_facts.json").read_text()) == {"guard": {"param": "count", "index": 2,
                                                                           "guard": "i < count", "per_thread": 4}}
    r = mepgen("patch", "fill", "--from", str(w / "kernel.cu"), "--json", cwd=app)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["launch"] == ["main.cu:15: grid grid -> (n + 1024 - 1) / 1024, block block -> 256: the "
                                              "kernel's threads each do 4 elements' work behind `i < count`, and "
                                              "`count` is `n` here"]
    r = mepgen("patch", "fill", "--from", str(w / "kernel.cu"), "--apply", "--json", cwd=app)
    assert r.returncode == 0, r.stderr + r.stdout
    assert json.loads(r.stdout)["valid"] is True                      # the application builds with it
    assert "fill<<<(n + 1024 - 1) / 1024, 256>>>(out, 7u, n);" in (app / "main.cu").read_text()
    assert mepgen("patch", "fill", "--revert", cwd=app).returncode == 0
    assert (app / "main.cu").read_text() == PORTED
    facts = w / "launch_facts.json"                   # a fact that does not fit the winner's grid: refused
    facts.write_text(json.dumps({"guard": {"param": "count", "index": 2, "guard": "i < count", "per_thread": 2}}))
    r = mepgen("patch", "fill", "--from", str(w / "kernel.cu"), "--json", cwd=app)
    assert r.returncode != 0 and "is not ceil(count / (256 x 2)) for the MEP's count = 4096" in r.stderr
    assert (app / "main.cu").read_text() == PORTED
