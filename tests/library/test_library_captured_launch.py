"""Launches of numbers. A captured launch (grid 7813, block 128): launch_config, and tune_params' block axis with
it, derive the grid of another block from the kernel's guard where the kernel is exactly a thread index and `i < N`
(N from mep.yaml: the scalar's recorded value), and refuse, saying why, where the grid cannot follow the block. A
literal block the kernel names with its own macro (`__shared__ float s[LANES]`, LANES = 256) is baked in. Hand-written
kernels and specs in the form `mepgen capture` writes (sizes empty, scalars as literals)."""
from __future__ import annotations

import re

import pytest

from library_fixtures import written
from mepgen.optimize.library.launch_config import LaunchConfig
from mepgen.optimize.library.source import Refused
from mepgen.optimize.library.tunables import TuneParams

def captured_yaml(kernel: str, params: list[str], grid: list[str], block: list[str]) -> str:
    """mep.yaml as `mepgen capture` writes it: no sizes, the scalars' recorded values, a launch of numbers."""
    return "\n".join([
        "version: 1",
        f'kernel: {{name: {kernel}, id: {kernel}, source: s.cu, source_sha256: "0", start_byte: 0, end_byte: 1}}',
        "sizes: {}", "params:", *(f"  - {{{p}}}" for p in params), "constants: []",
        f"launch: {{grid: {grid}, block: {block}, shared_mem: '0'}}",
        "build: {arch: sm_90, std: c++17, nvcc_flags: [-O3]}", "verify: {input_sets: 1, seed: 1}",
        "timing: {warmup: 5, reps: 50, flush_l2: true}", "todo: []", ""])


ONE_D = ["name: src, role: in, ctype: const float *, dtype: float32, count: 1000000, init: {kind: file, path: data/in/src.npy}",
         "name: dst, role: out, ctype: float *, dtype: float32, count: 1000000"]

GUARDED = """__global__ void shift(const float *src, float *dst, int count) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < count) { dst[t] = src[t] + 2.0f; }
}
"""

# the block size in shared memory: another block would change what the kernel computes per block
SHARED = """__global__ void shift(const float *src, float *dst, int count) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < count) {
        __shared__ float tile[128];
        tile[threadIdx.x] = src[t];
        __syncthreads();
        dst[t] = tile[(threadIdx.x + 1) % 128] + 2.0f;
    }
}
"""

# no guard: the captured grid covers exactly the elements, another block would run threads past them
UNGUARDED = """__global__ void shift(const float *src, float *dst, int count) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    dst[t] = src[t] + 2.0f;
}
"""


def make(tmp_path, text, grid="7813", block="128", count="1000000"):
    scalar = f"name: count, role: scalar, ctype: int, dtype: int32, value: '{count}'"
    return written(tmp_path, captured_yaml("shift", [*ONE_D, scalar], [grid], [block]), text)


def test_the_grid_of_a_captured_launch_follows_the_guard(tmp_path):
    src, spec, launch = make(tmp_path, GUARDED)
    t = LaunchConfig()
    assert 256 in t.space(src, spec, launch)["block"]
    rw = t.apply(src, spec, launch, {"block": 256})
    assert rw.launch["block"] == ["256"] and rw.launch["grid"] == ["3907"]      # ceil(1000000 / 256)
    assert t.apply(src, spec, launch, {"block": 1024}).launch["grid"] == ["977"]
    assert rw.text == src.text                                                  # only the launch changes


def test_tune_params_gets_a_block_axis_on_a_captured_launch(tmp_path):
    src, spec, launch = make(tmp_path, GUARDED)
    space = TuneParams().space(src, spec, launch)
    assert "block" in space and 128 in space["block"] and 512 in space["block"]


@pytest.mark.parametrize("text, grid, count, why", [
    (SHARED, "7813", "1000000", "shared memory"),
    (UNGUARDED, "7813", "1000000", "not `t = global index; if (t < bound)"),
    (GUARDED, "7000", "1000000", "do not cover"),                # the application ran fewer threads than N
    (GUARDED, "7813", "n_of(3)", "no value"),                    # a bound mep.yaml cannot evaluate
])
def test_a_captured_launch_whose_grid_cannot_follow_the_block_is_refused_with_why(tmp_path, text, grid, count, why):
    src, spec, launch = make(tmp_path, text, grid=grid, count=count)
    with pytest.raises(Refused, match=re.escape(why)):
        LaunchConfig().space(src, spec, launch)


def test_an_early_return_guard_is_the_same_guard(tmp_path):
    text = GUARDED.replace("if (t < count) { dst[t] = src[t] + 2.0f; }", "if (t >= count) return;\n    dst[t] = src[t] + 2.0f;")
    assert "return;" in text
    src, spec, launch = make(tmp_path, text)
    assert LaunchConfig().apply(src, spec, launch, {"block": 512}).launch["grid"] == ["1954"]


@pytest.mark.parametrize("index", ["(size_t)blockIdx.x * blockDim.x + threadIdx.x",
                                   "threadIdx.x + (long long)blockDim.x * blockIdx.x",
                                   "static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x"])
def test_an_index_with_integer_casts_of_its_parts_is_the_same_index(tmp_path, index):
    """64-bit indexing, as applications past 2^31 elements write it: the value is the thread's own for every launch
    of fewer threads, and only the launch changes (the kernel's text, its casts included, stays)."""
    text = GUARDED.replace("int t = blockIdx.x * blockDim.x + threadIdx.x;", f"size_t t = {index};")
    src, spec, launch = make(tmp_path, text)
    rw = LaunchConfig().apply(src, spec, launch, {"block": 256})
    assert rw.launch["grid"] == ["3907"] and rw.text == src.text and index in rw.text


def test_a_barrier_after_the_guard_with_no_shared_memory_orders_nothing(tmp_path):
    """A trailing `__syncthreads();` (as ports leave them) with no shared memory: the same one element per thread.
    With shared memory, or a barrier anywhere else, the block still matters and the launch is refused."""
    text = GUARDED.replace("if (t < count) { dst[t] = src[t] + 2.0f; }",
                           "if (t < count) { dst[t] = src[t] + 2.0f; }\n    __syncthreads();")
    src, spec, launch = make(tmp_path, text)
    assert LaunchConfig().apply(src, spec, launch, {"block": 512}).launch["grid"] == ["1954"]
    inside = GUARDED.replace("dst[t] = src[t] + 2.0f;", "__syncthreads(); dst[t] = src[t] + 2.0f;")
    staged = text.replace("{\n    int t", "{\n    __shared__ float s[1];\n    int t")
    for refused, why in ((inside, "shared memory or barriers"), (staged, "not `t = global index")):
        (tmp_path / "b").mkdir(exist_ok=True)
        src, spec, launch = make(tmp_path / "b", refused)
        with pytest.raises(Refused, match=re.escape(why)):
            LaunchConfig().space(src, spec, launch)


# the literal block's number under the kernel's own name for it: another block would not match the shared array
NAMED = """#define LANES 256
__global__ void shift(const float *src, float *dst, int count) {
    __shared__ float stage[LANES];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    stage[threadIdx.x] = t < count ? src[t] : 0.0f;
    __syncthreads();
    if (t < count) dst[t] = stage[LANES - 1 - threadIdx.x];
}
"""


def test_a_literal_block_the_kernel_spells_through_a_macro_is_baked_in(tmp_path):
    src, spec, launch = make(tmp_path, NAMED, grid="(1000000 + 255) / 256", block="256")
    with pytest.raises(Refused, match=re.escape("bakes the block size 256 in: `__shared__ float stage[LANES];` "
                                                "(LANES = 256)")):
        LaunchConfig().space(src, spec, launch)


TWO_D = ["name: img, role: in, ctype: const float *, dtype: float32, count: 1920000, init: {kind: file, path: data/in/img.npy}",
         "name: out, role: out, ctype: float *, dtype: float32, count: 1920000",
         "name: width, role: scalar, ctype: int, dtype: int32, value: '1600'",
         "name: height, role: scalar, ctype: int, dtype: int32, value: '1200'"]

# one pixel per thread of a 2D launch, both indices guarded
PIXELS = """__global__ void blend(const float *img, float *out, int width, int height) {
    int col = threadIdx.x + blockIdx.x * blockDim.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < height && col < width) {
        out[row * width + col] = 0.5f * img[row * width + col] + 0.25f;
    }
}
"""


def make_2d(tmp_path, text, gx="100", gy="75"):
    return written(tmp_path, captured_yaml("blend", TWO_D, [gx, gy], ["16", "16"]), text)


def test_the_grid_of_a_captured_2d_launch_follows_both_guards(tmp_path):
    src, spec, launch = make_2d(tmp_path, PIXELS)
    t = LaunchConfig()
    assert "32x8" in t.space(src, spec, launch)["block"]
    rw = t.apply(src, spec, launch, {"block": "32x8"})
    assert rw.launch["block"] == ["32", "8"] and rw.launch["grid"] == ["50", "150"]     # 1600 / 32, 1200 / 8
    assert t.apply(src, spec, launch, {"block": "64x4"}).launch["grid"] == ["25", "300"]
    assert rw.text == src.text


@pytest.mark.parametrize("edit, gy, why", [
    (("row < height && col < width", "col < width"), "75", "does not bound both indices"),
    (("0.5f * img", "(float)blockDim.y * img"), "75", "beyond its x and y indices"),
    ((None, None), "70", "do not cover"),                       # 70 x 16 rows < 1200
])
def test_a_captured_2d_launch_whose_grid_cannot_follow_is_refused_with_why(tmp_path, edit, gy, why):
    text = PIXELS.replace(*edit) if edit[0] else PIXELS
    src, spec, launch = make_2d(tmp_path, text, gy=gy)
    with pytest.raises(Refused, match=re.escape(why)):
        LaunchConfig().space(src, spec, launch)


def test_a_2d_early_return_is_the_same_guard_and_an_assigned_index_is_refused(tmp_path):
    guard = """    if (row < height && col < width) {
        out[row * width + col] = 0.5f * img[row * width + col] + 0.25f;
    }"""
    early = PIXELS.replace(guard, "    if (col >= width || row >= height) return;\n"
                                  "    out[row * width + col] = 0.5f * img[row * width + col] + 0.25f;")
    assert "return;" in early
    src, spec, launch = make_2d(tmp_path, early)
    assert LaunchConfig().apply(src, spec, launch, {"block": "32x8"}).launch["grid"] == ["50", "150"]
    (tmp_path / "b").mkdir()
    moved = PIXELS.replace("out[row * width + col] = ", "col += 0; out[row * width + col] = ")
    src, spec, launch = make_2d(tmp_path / "b", moved)
    with pytest.raises(Refused, match="assigns one of its indices"):
        LaunchConfig().space(src, spec, launch)


def test_a_captured_grid_that_equals_its_block_is_still_derived_from_the_guard(tmp_path):
    """Grid 128 of block 128 (N = 16384): the number 128 in the grid is no block size to substitute."""
    src, spec, launch = make(tmp_path, GUARDED, grid="128", block="128", count="16384")
    assert LaunchConfig().apply(src, spec, launch, {"block": 256}).launch["grid"] == ["64"]
