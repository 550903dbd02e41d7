"""spread_iterations on hand-written kernels and specs: a small launch whose threads each walk a loop nest of
independent writes gets P copies of each block, which split each thread's iterations; the refusal's reason where the
iterations are not proven independent; that the rewrite compiles (nvcc) and writes what the original writes, thread
by thread on the CPU with the copies' blocks run last to first."""
from __future__ import annotations

import pytest

from mepgen.optimize.dry_run import STRUCTURAL, plan
from mepgen.optimize.library.source import Refused
from mepgen.optimize.library.spread_iterations import SpreadIterations
from library_fixtures import FACES, assert_same_on_cpu, compiles, written

YAML = """version: 1
kernel: {{name: faces, id: faces, source: k.cu, source_sha256: "0", start_byte: 0, end_byte: 1}}
sizes: {{NE: {ne}, NA: {na}, NX: 5, NY: 3}}
params:
  - {{name: src, role: in, ctype: const float *, dtype: float32, count: NA, init: {{kind: uniform, low: 0.0, high: 1.0}}}}
  - {{name: out, role: inout, ctype: float *, dtype: float32, count: NA * 3 * NE * NX * NY * 8, init: {{kind: zeros}}}}
  - {{name: ne, role: scalar, ctype: int, dtype: int32, value: NE}}
  - {{name: na, role: scalar, ctype: int, dtype: int32, value: NA}}
  - {{name: nx, role: scalar, ctype: int, dtype: int32, value: NX}}
  - {{name: ny, role: scalar, ctype: int, dtype: int32, value: NY}}
constants: []
launch: {{grid: [{grid}], block: [{block}], shared_mem: '0'}}
build: {{arch: sm_90, std: c++17, nvcc_flags: [-O3]}}
verify: {{input_sets: 2, seed: 1}}
timing: {{warmup: 5, reps: 50, flush_l2: true}}
todo: []
"""

def make(tmp_path, text, grid="1, 1, 2", block="8, 4, 4", ne=6, na=7):
    return written(tmp_path, YAML.format(grid=grid, block=block, ne=ne, na=na), text)


def sim_main(grid: tuple, parts: int) -> str:
    """Both kernels over their grids (the rewrite's copies last to first), then every element compared."""
    gx, gy, gz = grid
    n = 7 * 3 * 6 * 5 * 3 * 8
    return f"""
    std::vector<float> src(7), a({n}, -1.0f), b({n}, -1.0f);
    for (int i = 0; i < 7; i++) src[i] = 0.25f * (float)(i + 1);
    blockDim = {{8, 4, 4}};
    gridDim = {{{gx}, {gy}, {gz}}};
    for (unsigned g = 0; g < {gx * gy * gz}; g++)
        for (unsigned t = 0; t < 128; t++) {{
            blockIdx = {{g % {gx}, (g / {gx}) % {gy}, g / ({gx * gy})}};
            threadIdx = {{t % 8, (t / 8) % 4, t / 32}};
            before::faces(src.data(), a.data(), 6, 7, 5, 3);
        }}
    gridDim = {{{gx * parts}, {gy}, {gz}}};
    for (int g = {gx * parts * gy * gz} - 1; g >= 0; g--)
        for (unsigned t = 0; t < 128; t++) {{
            blockIdx = {{g % {gx * parts}u, (g / {gx * parts}u) % {gy}u, g / {gx * parts * gy}u}};
            threadIdx = {{t % 8, (t / 8) % 4, t / 32}};
            after::faces(src.data(), b.data(), 6, 7, 5, 3);
        }}
    for (int i = 0; i < {n}; i++)
        if (a[i] != b[i]) {{ std::printf("element %d: %g vs %g\\n", i, a[i], b[i]); return 1; }}
    return 0;
"""


def test_a_face_fill_is_spread_over_copies_of_its_blocks(tmp_path):
    src, spec, launch = make(tmp_path, FACES)
    t = SpreadIterations()
    assert t.space(src, spec, launch) == {"parts": [8, 32, 128], "levels": [1, 2, 3]}
    assert t.first_point(src, spec, launch) == {"parts": 32, "levels": 2}
    rw = t.apply(src, spec, launch, {"parts": 32, "levels": 2})
    assert rw.launch["grid"] == ["(1) * 32", "1", "2"] and rw.launch["block"] == ["8", "4", "4"]
    assert "int x = (blockIdx.x % mepgen_gx) * blockDim.x + threadIdx.x;" in rw.text
    assert "mepgen_f += 32" in rw.text and "for (int a = 0; a < na; ++a)" in rw.text   # the angles stay a loop
    assert "1 written array(s) indexed one-to-one" in rw.explanation
    compiles(tmp_path, spec, rw.text)


@pytest.mark.parametrize("parts, levels", [(8, 1), (8, 3), (32, 2), (128, 3)])
def test_the_copies_write_what_the_original_writes(tmp_path, parts, levels):
    src, spec, launch = make(tmp_path, FACES)
    rw = SpreadIterations().apply(src, spec, launch, {"parts": parts, "levels": levels})
    assert_same_on_cpu(tmp_path, FACES, rw.text, sim_main((1, 1, 2), parts), defines="#define __device__")


def test_a_one_dimensional_row_walk_is_spread_too(tmp_path):
    rows = """__global__ void faces(const float *src, float *out, int ne, int na, int nx, int ny) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < nx) {
        for (int j = 0; j < na; j++)
            out[r * na + j] = src[j] + (float)r;
    }
}
"""
    src, spec, launch = make(tmp_path, rows, grid="1", block="64")
    rw = SpreadIterations().apply(src, spec, launch, {"parts": 8, "levels": 1})
    assert rw.launch["grid"] == ["(1) * 8"]
    compiles(tmp_path, spec, rw.text)


@pytest.mark.parametrize("edit, reason", [
    # a running value handed from one iteration to the next
    (("const float w = weight(a, e, v, o);", "acc += src[a]; const float w = acc;"),
     "carries a value from one iteration to another"),
    # every iteration writes the thread's one element
    (("out[a + na * (v + NV * (e + ne * (x + nx * (y + ny * o))))]", "out[x + nx * (y + ny * o)]"),
     "does not use the counter"),
    # the counters in an order whose strides overlap (a and v both step by one)
    (("out[a + na * (v + NV * (e + ne * (x + nx * (y + ny * o))))]",
      "out[a + v + na * NV * (e + ne * (x + nx * (y + ny * o)))]"), "not a mixed radix"),
    # another loop's counter inside an iteration: a = 0, j = 1 and a = 1, j = 0 meet on one element
    (("out[a + na * (v + NV * (e + ne * (x + nx * (y + ny * o))))] /* the face's element */ = src[a] * w;",
      "for (int j = 0; j < 2; ++j) out[a + j + na * (v + NV * (e + ne * (x + nx * (y + ny * o))))] = src[a] * w;"),
     "reads j, which changes within an iteration"),
    # a neighbour read in place: another iteration's element
    (("= src[a] * w;", "= out[a + 1 + na * (v + NV * (e + ne * (x + nx * (y + ny * o))))] * w;"),
     "written and read at different indices"),
    (("int o = blockIdx.z", "__shared__ float tile[4]; tile[0] = 1.0f; int o = blockIdx.z"), "shared memory"),
    (("const float w = weight(a, e, v, o);", "const float w = weight(a, e, v, o); atomicAdd(out, 1.0f);"),
     "atomicAdd"),
    (("if (x >= nx", "out[0] = 0.0f; if (x >= nx"), "writes memory"),
    (("for (int a = 0; a < na; ++a)", "for (int a = 0; a < x; ++a)"), "reads `x`"),
    (("for (int e = 0; e < ne; ++e)", "for (int e = 0; e < ne; e += 2)"), "does not step by 1"),
])
def test_what_it_refuses_and_why(tmp_path, edit, reason):
    text = FACES.replace(*edit)
    if "acc +=" in text:
        text = text.replace("if (x >= nx", "float acc = 0.0f; if (x >= nx")
    assert text != FACES
    src, spec, launch = make(tmp_path, text)
    with pytest.raises(Refused, match=reason):
        SpreadIterations().space(src, spec, launch)


def test_a_launch_that_fills_the_gpu_is_left_alone(tmp_path):
    src, spec, launch = make(tmp_path, FACES, grid="2048, 1, 2")
    with pytest.raises(Refused, match="fills the GPU already"):
        SpreadIterations().space(src, spec, launch)


def test_the_dry_run_counts_it_structural(tmp_path):
    (tmp_path / "mep").mkdir()
    src, spec, launch = make(tmp_path / "mep", FACES)
    p = plan(spec, FACES, tmp_path / "plan")
    assert "spread_iterations" in STRUCTURAL and "spread_iterations" in p.structural
