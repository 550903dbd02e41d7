"""coarsen_blocks: each block does the work of C consecutive blocks, on hand-written kernels and specs."""
from __future__ import annotations


import pytest

from mepgen.optimize.library.coarsen_blocks import CoarsenBlocks
from mepgen.optimize.library.source import Refused
from library_fixtures import compiles, written

YAML = """version: 1
kernel: {{name: k, id: k, source: k.cu, source_sha256: "0", start_byte: 0, end_byte: 1}}
sizes: {{W: 1000, H: 600}}
params:
  - {{name: img, role: in, ctype: const float *, dtype: float32, count: W * H, init: {{kind: uniform, low: 0.0, high: 1.0}}}}
  - {{name: out, role: out, ctype: float *, dtype: float32, count: W * H}}
  - {{name: w, role: scalar, ctype: int, dtype: int32, value: {w}}}
  - {{name: h, role: scalar, ctype: int, dtype: int32, value: H}}
constants: []
launch: {{grid: [{grid}], block: [{block}], shared_mem: '0'}}
build: {{arch: sm_90, std: c++17, nvcc_flags: [-O3]}}
verify: {{input_sets: 2, seed: 1, tolerance: {{out: {{rtol: 0.00001, atol: 0.000001}}}}}}
timing: {{warmup: 5, reps: 50, flush_l2: true}}
todo: []
"""

# a guarded 2D element-wise kernel: the guard bounds both indices
GUARDED = """__global__ void k(const float *img, float *out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = 1 + blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y <= h - 1) {
        out[(y - 1) * w + x] = 0.5f * img[(y - 1) * w + x];
    }
}
"""

# a block-wide shared tile with a barrier and no guard at all: the grid is exact (h rows of blocks)
TILED = """__global__ void k(const float *img, float *out, int w, int h) {
    __shared__ float row[128];
    row[threadIdx.x] = img[blockIdx.x * w + threadIdx.x];
    __syncthreads();
    out[blockIdx.x * w + threadIdx.x] = row[127 - threadIdx.x];
}
"""


def make(tmp_path, text, grid, block, w="W"):
    return written(tmp_path, YAML.format(grid=grid, block=block, w=w), text)


def test_a_guarded_2d_kernel_takes_4_rows_of_blocks_per_block(tmp_path):
    src, spec, launch = make(tmp_path, GUARDED, "(W + 31) / 32, (H + 7) / 8", "32, 8")
    t = CoarsenBlocks()
    # the grid's rows are `(H + 7) / 8`: the kernel computes them from its parameter h (mep.yaml sets it to H), and
    # the loop over the virtual blocks stops there
    # 1000 x 600 threads: 8 blocks' work per block would leave 75000, fewer than half an H100 holds
    assert t.space(src, spec, launch) == {"factor": [2, 4], "dim": ["y", "x"]}
    rw = t.apply(src, spec, launch, {"factor": 4, "dim": "y"})
    assert rw.launch["grid"] == ["(W + 31) / 32", "(((H + 7) / 8) + 4 - 1) / 4"]
    assert "const unsigned int mepgen_b = blockIdx.y * 4 + mepgen_c;" in rw.text
    assert "if (mepgen_b >= (unsigned int)(((h) + 7) / 8)) break;" in rw.text
    assert "int y = 1 + mepgen_b * blockDim.y + threadIdx.y;" in rw.text and "blockIdx.y * blockDim.y" not in rw.text
    compiles(tmp_path, spec, rw.text)


def test_without_the_grid_in_the_kernel_the_guard_is_proven(tmp_path):
    """w is a literal in mep.yaml here, so `(W + 31) / 32` has no value in the kernel: the guard `x < w` must
    exclude the blocks past the grid, and it does (1000 <= 32 blocks x 32 threads)."""
    src, spec, launch = make(tmp_path, GUARDED, "(W + 31) / 32", "32", w="1000")
    rw = CoarsenBlocks().apply(src, spec, launch, {"factor": 2, "dim": "x"})
    assert "break;" not in rw.text and rw.launch["grid"] == ["(((W + 31) / 32) + 2 - 1) / 2"]
    compiles(tmp_path, spec, rw.text)
    # a guard that the blocks past the grid still pass (the grid covers less than w) is refused with the numbers
    src, spec, launch = make(tmp_path, GUARDED, "(W + 31) / 32", "32", w="2000")
    with pytest.raises(Refused, match=r"`x < w` still holds past the grid \(1024 vs 2000\)"):
        CoarsenBlocks().space(src, spec, launch)
    # a memory read before the bound would run for the blocks past the grid
    read_first = GUARDED.replace("if (x < w && y <= h - 1)", "if (img[0] > 0.0f && x < w)")
    src, spec, launch = make(tmp_path, read_first, "(W + 31) / 32", "32", w="1000")
    with pytest.raises(Refused, match="reads memory before any bound is checked"):
        CoarsenBlocks().space(src, spec, launch)


def test_shared_memory_and_barriers_with_the_exact_grid(tmp_path):
    src, spec, launch = make(tmp_path, TILED, "H", "128")
    rw = CoarsenBlocks().apply(src, spec, launch, {"factor": 8, "dim": "x"})
    assert "if (mepgen_b >= (unsigned int)((h))) break;" in rw.text
    # the next virtual block reuses the shared row: a barrier ends each one
    assert rw.text.count("__syncthreads();") == 2
    compiles(tmp_path, spec, rw.text)


@pytest.mark.parametrize("edit, grid, w, why", [
    (("row[127 - threadIdx.x];", "row[127 - threadIdx.x] + gridDim.x;"), "H", "W", "uses gridDim.x"),
    # (a return the normalization cannot turn into a guard: it is inside a loop)
    (("__syncthreads();", "__syncthreads(); for (int i = 0; i < 2; ++i) { if (row[i] > 0.5f) return; }"), "H", "W",
     "returns early and uses barriers"),
    (None, "H + 0 * W", "1000", "the kernel uses shared memory or barriers, and the grid's `H + 0 * W` uses W"),
    (("__shared__ float row[128];", "#define B blockIdx.x\n    __shared__ float row[128];"), "H", "W", None),
])
def test_refusals_say_why(tmp_path, edit, grid, w, why):
    text = TILED if edit is None else TILED.replace(*edit)
    if edit is not None and why is None:       # blockIdx.x through a macro: every use must be seen
        text = text.replace("img[blockIdx.x * w", "img[B * w")
        why = "blockIdx.x is used through a macro"
    src, spec, launch = make(tmp_path, text, grid, "128", w=w)
    with pytest.raises(Refused) as e:
        CoarsenBlocks().space(src, spec, launch)
    assert why in str(e.value)


def test_a_captured_grid_gives_no_bound_to_write_into_the_kernel(tmp_path):
    """A captured launch's grid is the recorded run's number of blocks: a bound written as it into the kernel would
    hold for that run alone (a kernel launched with blocks of 8, 16 and 32 from three sites, patched after a win
    measured at one of them, failed the application's check on the GPU). Without a guard of its own, the kernel is
    not coarsened; with one, the guard stops the extra blocks. A static MEP's literal grid is its launch site's own
    spelling, kept (patch refuses it where other sites spell other grids: tests/patch/test_patch_site_launches.py)."""
    captured = lambda y: y.replace("init: {kind: uniform, low: 0.0, high: 1.0}",
                                   "init: {kind: file, path: data/captured/before/img.npy}")
    src, spec, launch = written(tmp_path, captured(YAML.format(grid="600", block="128", w="W")), TILED)
    with pytest.raises(Refused, match="the grid's `600` is the captured run's number of blocks"):
        CoarsenBlocks().space(src, spec, launch)
    src, spec, launch = written(tmp_path, captured(YAML.format(grid="32, 75", block="32, 8", w="W")), GUARDED)
    rw = CoarsenBlocks().apply(src, spec, launch, {"factor": 4, "dim": "y"})
    assert "break;" not in rw.text and "(unsigned int)(75)" not in rw.text
    compiles(tmp_path, spec, rw.text)
    src, spec, launch = make(tmp_path, TILED, "600", "128")              # static: the site's own literal
    rw = CoarsenBlocks().apply(src, spec, launch, {"factor": 4, "dim": "x"})
    assert "if (mepgen_b >= (unsigned int)(600)) break;" in rw.text
    src, spec, launch = make(tmp_path, GUARDED, "32, 75", "32, 8")       # ... unless the kernel's guard can stop
    rw = CoarsenBlocks().apply(src, spec, launch, {"factor": 4, "dim": "y"})
    assert "break;" not in rw.text


def test_a_small_launch_is_not_coarsened(tmp_path):
    src, spec, launch = make(tmp_path, GUARDED, "(W + 31) / 32, (H + 7) / 8", "32, 8")
    spec.sizes["H"] = 200          # 1000 x 200 threads: halved, fewer than 135168
    with pytest.raises(Refused, match="the launch has 204800 threads: 2 blocks' work per block would leave fewer"):
        CoarsenBlocks().space(src, spec, launch)


def test_the_same_results_on_the_cpu(tmp_path):
    """Both rewrites run on the CPU simulation of a block (library_fixtures.CPU_SIM_BLOCKS: a block's threads at once,
    real barriers, static shared arrays): the coarsened grid, rounded up past the original, writes the same."""
    from library_fixtures import assert_same_on_cpu
    src, spec, launch = make(tmp_path, TILED, "H", "128")
    rw = CoarsenBlocks().apply(src, spec, launch, {"factor": 4, "dim": "x"})
    main = """
    const int w = 128, h = 10;
    std::vector<float> img(w * h), a(w * h, -1.0f), b(w * h, -1.0f);
    for (int i = 0; i < w * h; i++) img[i] = (float)(i * 37 % 101) / 7.0f;
    launch(h, 128, 1, [&] { before::k(img.data(), a.data(), w, h); });
    launch((h + 3) / 4, 128, 1, [&] { after::k(img.data(), b.data(), w, h); });
    for (int i = 0; i < w * h; i++) if (a[i] != b[i]) { printf("tiled: %d differs\\n", i); return 1; }
    return 0;"""
    assert_same_on_cpu(tmp_path, TILED, rw.text, main, blocks=True)
    src, spec, launch = make(tmp_path, GUARDED, "(W + 31) / 32, (H + 7) / 8", "32, 8")
    rw = CoarsenBlocks().apply(src, spec, launch, {"factor": 4, "dim": "y"})
    main = """
    const int w = 40, h = 37, gx = (w + 31) / 32, gy = (h + 7) / 8;
    std::vector<float> img(w * h), a(w * h, -1.0f), b(w * h, -1.0f);
    for (int i = 0; i < w * h; i++) img[i] = (float)(i % 13);
    launch2(gx, gy, 32, 8, [&] { before::k(img.data(), a.data(), w, h); });
    launch2(gx, (gy + 3) / 4, 32, 8, [&] { after::k(img.data(), b.data(), w, h); });
    for (int i = 0; i < w * h; i++) if (a[i] != b[i]) { printf("guarded: %d differs\\n", i); return 1; }
    return 0;"""
    assert_same_on_cpu(tmp_path, GUARDED, rw.text, main, blocks=True)
