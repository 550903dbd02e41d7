"""vector_elements on hand-written one-element-per-thread kernels: where the access model proves the rewrite (with
a guard, without one, offsets per array, 8-byte elements), the refusal's reason where it does not, that the rewrite
compiles (nvcc), and that it computes the same as the original, bit for bit, run thread by thread on the CPU."""
from __future__ import annotations


import pytest

from library_fixtures import nvcc_cubin
from mepgen import mepbuild
from mepgen.optimize.dry_run import STRUCTURAL
from mepgen.optimize.library.base import current_launch
from mepgen.optimize.library.replicas import OnOneDimension
from mepgen.optimize.library.source import KernelSource, Refused
from mepgen.optimize.library.vector_elements import VectorElements
from mepgen.spec import load_spec

YAML = """version: 1
kernel: {{name: {name}, id: {name}, source: k.cu, source_sha256: "0", start_byte: 0, end_byte: 1}}
sizes: {{N: 65536, THREADS: 128}}
params:
  - {{name: x, role: in, ctype: const {t} *, dtype: {dt}, count: 3 * N, init: {{kind: uniform, low: -1.0, high: 1.0}}}}
  - {{name: y, role: {y_role}, ctype: {t} *, dtype: {dt}, count: 3 * N, init: {{kind: uniform, low: -1.0, high: 1.0}}}}
  - {{name: s, role: scalar, ctype: {t}, dtype: {dt}, value: '2'}}
  - {{name: n, role: scalar, ctype: int, dtype: int32, value: N}}
constants: []
launch: {{grid: [{grid}], block: [{block}], shared_mem: '0'}}
build: {{arch: sm_90, std: c++17, nvcc_flags: [-O3]}}
verify: {{input_sets: 2, seed: 1, tolerance: {{y: {{rtol: 0.00001, atol: 0.000001}}}}}}
timing: {{warmup: 5, reps: 50, flush_l2: true}}
todo: []
"""


def make(tmp_path, text, name, grid="(N + 127) / 128", block="128", t="float", y_role="inout"):
    dt = {"float": "float32", "double": "float64"}[t]
    (tmp_path / "mep.yaml").write_text(YAML.format(name=name, grid=grid, block=block, t=t, dt=dt, y_role=y_role))
    spec = load_spec(tmp_path / "mep.yaml")
    return KernelSource(text, spec), spec, current_launch(spec, None)


# a scaled update in place, the work behind an early return (normalized into a guard)
SCALE = """__global__ void scale_add(const float *x, float *y, float s, int n) {
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i >= n) return;
    float v = s * x[i];
    y[i] = y[i] + v;
    y[i] *= 0.5f;
}
"""

# three planes of one array at offsets of n each, no guard: the grid is exactly the work
PLANES = """__global__ void planes(const float *x, float *y, float s, int n) {
    const int i = blockDim.x * blockIdx.x + threadIdx.x;
    float w = x[i + 2 * n] * s;
    y[i] = x[i] - w;
    y[i + n] = x[i + n] + w;
    y[i + 2 * n] = w;
}
"""

# 8-byte elements through locals for the block and thread, the block size written as a macro
DOUBLES = """#define THREADS 128
__global__ void halve(const double *x, double *y, double s, int n) {
    int bx = blockIdx.x;
    int tx = threadIdx.x;
    int e = bx * THREADS + tx;
    if (e < n) {
        y[e] = x[e] * s - (double)e;
    }
}
"""

# a read-only array read at the lane's element, through a gather and under a condition: only the first is a vector
MIXED = """__global__ void mixed(const float *x, float *y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float a = x[i];
        float b = x[(i * 7) % n];
        float c = a > 0.f ? x[i + n] : s;
        y[i] = a * b + c;
    }
}
"""

# rows of a 2D launch: lanes split x (columns); the row is the same for every lane of a thread, declared after the
# column index and kept before the lanes; row 0 read by every row
ROWS = """__global__ void rows(const float *x, float *y, float s, int n) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    float t = x[c] * s;
    if (c < n && r < 3) {
        y[r * n + c] = x[r * n + c] - t;
    }
}
"""

# per-element state declared before the index, the block size written as the number its macro is
STATE = """#define WIDTH 128
__global__ void carry(const float *x, float *y, float s, int n) {
    float acc = 1.0f;
    int i = blockIdx.x * WIDTH + threadIdx.x;
    if (i < n) {
        acc += x[i];
        acc *= s;
        y[i] = acc;
    }
}
"""


def test_a_guarded_update_in_place_goes_through_vectors(tmp_path):
    src, spec, launch = make(tmp_path, SCALE, "scale_add")
    t = VectorElements()
    assert t.space(src, spec, launch) == {"lanes": [4, 2]}
    rw = t.apply(src, spec, launch, {"lanes": 4})
    assert rw.launch["grid"] == ["(((N + 127) / 128) + 4 - 1) / 4"]
    # y is read and written: one vector loaded, updated lane by lane in a register, stored once
    assert "mepgen_vec0 mepgen_y0 = *reinterpret_cast<const mepgen_vec0*>(y + mepgen_g0);" in rw.text
    assert "*reinterpret_cast<mepgen_vec0*>(y + mepgen_g0) = mepgen_y0;" in rw.text
    assert "mepgen_y0.c[mepgen_l] *= 0.5f;" in rw.text
    # the vector path only for a whole chunk below the guard's bound, with every pointer aligned
    assert "constexpr int mepgen_lanes = 4;" in rw.text
    assert "if (mepgen_g0 + mepgen_lanes <= (long long)(n) && " \
           "(reinterpret_cast<unsigned long long>(x) % sizeof(mepgen_vec0)) == 0" in rw.text
    assert "vector_elements" in STRUCTURAL


@pytest.mark.parametrize("index, kept", [
    # computed in 64 bits through static_cast: the type stays
    ("const long long i = static_cast<long long>(blockDim.x) * blockIdx.x + threadIdx.x;", "const long long i"),
    # declared auto: the type it deduces is written
    ("const auto i = threadIdx.x + blockIdx.x * blockDim.x;", "const unsigned int i")])
def test_an_index_keeps_its_type(tmp_path, index, kept):
    text = SCALE.replace("int i = threadIdx.x + blockIdx.x * blockDim.x;", index)
    src, spec, launch = make(tmp_path, text, "scale_add")
    rw = VectorElements().apply(src, spec, launch, {"lanes": 4})
    assert f"{kept} = mepgen_g0 + mepgen_l;" in rw.text


def test_offsets_per_array_are_vectors_of_their_own(tmp_path):
    src, spec, launch = make(tmp_path, PLANES, "planes", grid="N / 128", y_role="out")
    rw = VectorElements().apply(src, spec, launch, {"lanes": 4})
    for reg, at in (("mepgen_x0", "x"), ("mepgen_x1", "(x + ((long long)(n)))"),
                    ("mepgen_x2", "(x + (2LL * (long long)(n)))")):
        assert f"const mepgen_vec0 {reg} = *reinterpret_cast<const mepgen_vec0*>({at} + mepgen_g0);" in rw.text
    assert "*reinterpret_cast<mepgen_vec0*>((y + (2LL * (long long)(n))) + mepgen_g0) = mepgen_y2;" in rw.text
    # no guard: the chunks stop where the original grid (computed in the kernel) ended
    assert "(long long)((n) / 128) * blockDim.x" in rw.text


def test_eight_byte_elements_go_in_pairs(tmp_path):
    src, spec, launch = make(tmp_path, DOUBLES, "halve", block="THREADS", t="double")
    t = VectorElements()
    assert t.space(src, spec, launch) == {"lanes": [2]}
    rw = t.apply(src, spec, launch, {"lanes": 2})
    assert "struct __align__(sizeof(double) * mepgen_lanes) mepgen_vec0 { double c[mepgen_lanes]; };" in rw.text
    assert "constexpr int mepgen_lanes = 2;" in rw.text
    with pytest.raises(Refused, match="exceed 16 bytes"):
        t.apply(src, spec, launch, {"lanes": 4})


@pytest.mark.parametrize("old, new, reason", [
    ("y[i] *= 0.5f;", "if (v > 0.f) y[i] *= 0.5f;", "y: `y[i]` runs under a condition"),
    ("y[i] *= 0.5f;", "y[i] *= y[i + 1];", "y: `y[i + 1]` is 1 elements off a chunk of 4"),
    ("float v = s * x[i];", "float v = s * x[i] + threadIdx.x;", "uses threadIdx.x beyond its element index"),
    ("float v = s * x[i];", "float v = s * x[2 * i];", "x: `x[2 * i]` is not at i + an offset"),
    ("float v = s * x[i];", "float v = s * x[i + (int)y[0]];", "x: data-dependent index"),
    ("y[i] *= 0.5f;", "atomicAdd(&y[i], 0.5f);", "y: the kernel takes the address of `y[i]`"),
    ("y[i] *= 0.5f;", "__syncthreads();", "shared memory or barriers"),
    ("y[i] *= 0.5f;", "for (int k = 0; k < 3; ++k) y[i] *= 0.5f;", "the work loops per element"),
    ("int i = threadIdx.x + blockIdx.x * blockDim.x;", "int i = threadIdx.x + blockIdx.x * blockDim.x * 2;",
     "no element index"),
    ("    y[i] *= 0.5f;\n", "#ifdef HALVE\n    y[i] *= 0.5f;\n#endif\n", "a preprocessor directive"),
])
def test_refusals_name_what_the_model_cannot_prove(tmp_path, old, new, reason):
    """The reason is the refusal's where nothing goes through vectors, else the rewrite says which array stays
    scalar and why (x still goes through vectors where only y is refused, and the other way round)."""
    assert old in SCALE
    src, spec, launch = make(tmp_path, SCALE.replace(old, new), "scale_add")
    t = VectorElements()
    try:
        t.space(src, spec, launch)
    except Refused as e:
        said = str(e)
    else:
        rw = t.apply(src, spec, launch, {"lanes": 4})
        said = rw.explanation
        name = reason.split(":")[0]
        assert f"mepgen_{name}0" not in rw.text
    assert reason in said, said


def test_reads_of_a_read_only_array_elsewhere_stay_scalar(tmp_path):
    src, spec, launch = make(tmp_path, MIXED, "mixed", y_role="out")
    rw = VectorElements().apply(src, spec, launch, {"lanes": 4})
    assert "float a = mepgen_x0.c[mepgen_l];" in rw.text
    assert "float b = x[(i * 7) % n];" in rw.text and "x[i + n] : s;" in rw.text
    assert "mepgen_y0.c[mepgen_l] = a * b + c;" in rw.text


def test_rows_of_a_2d_launch_go_through_vectors_along_x(tmp_path):
    src, spec, launch = make(tmp_path, ROWS, "rows", grid="(N + 31) / 32, 2", block="32, 2", y_role="out")
    rw = VectorElements().apply(src, spec, launch, {"lanes": 4})
    assert rw.launch["grid"] == ["(((N + 31) / 32) + 4 - 1) / 4", "2"]
    # r is declared once before the lanes; its term of the guard joins the whole-chunk test
    assert rw.text.index("int r = blockIdx.y") < rw.text.index("mepgen_g0 =")
    assert "if (mepgen_g0 + mepgen_lanes <= (long long)(n) && (r < 3) &&" in rw.text
    row = "(long long)(blockDim.y) * (long long)(blockIdx.y) * (long long)(n) + " \
          "(long long)(n) * (long long)(threadIdx.y)"
    assert f"*reinterpret_cast<mepgen_vec0*>((y + ({row})) + mepgen_g0) = mepgen_y0;" in rw.text


def test_state_declared_before_the_index_is_each_lanes_own(tmp_path):
    src, spec, launch = make(tmp_path, STATE, "carry", block="128", y_role="out")
    rw = VectorElements().apply(src, spec, launch, {"lanes": 4})
    body = rw.text[rw.text.index("mepgen vector_elements"):]
    assert body.count("float acc = 1.0f;") == 2           # in each path's lanes, none before them
    assert rw.text.index("mepgen vector_elements") < rw.text.index("float acc = 1.0f;")


def test_launch_config_still_retunes_the_block_of_the_rewrite(tmp_path):
    """The rewrite writes no number a block size could be (sizes through sizeof, the lane count once): a 2D block
    of 32 x 8 of doubles stays retunable."""
    from mepgen.optimize.library.base import apply_chain
    from mepgen.optimize.library.catalog import all_transformations
    from mepgen.optimize.library.launch_config import LaunchConfig
    text = ROWS.replace("float", "double")
    src, spec, launch = make(tmp_path, text, "rows", grid="(N + 31) / 32, (3 + 8 - 1) / 8", block="32, 8", t="double",
                             y_role="out")
    catalog = {t.name: t for t in all_transformations()}
    new, rw_launch, _ = apply_chain(catalog, text, spec, [{"name": "vector_elements", "params": {"lanes": 2}}])
    assert rw_launch["block"] == ["32", "8"]
    after = KernelSource(new, spec)
    assert LaunchConfig().space(after, spec, current_launch(spec, rw_launch))["block"]


def test_a_launch_that_does_not_cover_the_guard_is_refused(tmp_path):
    src, spec, launch = make(tmp_path, SCALE, "scale_add", grid="N / 256")
    with pytest.raises(Refused, match="do not cover the guard's bound"):
        VectorElements().space(src, spec, launch)


def test_an_array_written_at_two_offsets_and_read_keeps_scalars(tmp_path):
    """A second view of y (normalized into y[n + i]) is written where y[i] is read: a lane could read another
    lane's write, so y stays scalar; x still goes through vectors."""
    text = SCALE.replace("    y[i] *= 0.5f;\n", "    float *z = y + n;\n    z[i] = v;\n")
    src, spec, launch = make(tmp_path, text, "scale_add")
    rw = VectorElements().apply(src, spec, launch, {"lanes": 4})
    assert "y is written and read at 2 offsets" in rw.explanation
    assert "mepgen_x0" in rw.text and "mepgen_y0" not in rw.text


def test_a_written_array_that_may_share_memory_is_refused(tmp_path):
    """mep.yaml gives y no buffer of its own: x and y may be the same memory."""
    src, spec, launch = make(tmp_path, SCALE, "scale_add")
    spec.params[1].role = "scalar"
    with pytest.raises(Refused) as e:
        VectorElements().space(src, spec, launch)
    assert "no buffer" in str(e.value) and "may share memory with y" in str(e.value), str(e.value)


def test_a_2d_launch_splits_x_only(tmp_path):
    src, spec, launch = make(tmp_path, SCALE, "scale_add", grid="(N + 127) / 128, 2", block="128, 2")
    t = OnOneDimension(VectorElements())
    rw = t.apply(src, spec, launch, {"lanes": 4})
    assert rw.launch["block"] == ["128", "2"] and rw.launch["grid"] == ["(((N + 127) / 128) + 4 - 1) / 4", "2"]


@pytest.mark.parametrize("name, text, kw", [("scale_add", SCALE, {}), ("planes", PLANES, {"grid": "N / 128"}),
                                            ("halve", DOUBLES, {"block": "THREADS", "t": "double"})])
def test_the_rewrite_compiles(tmp_path, name, text, kw):
    import shutil
    if shutil.which(mepbuild.nvcc_executable()) is None:
        pytest.skip("no nvcc")
    src, spec, launch = make(tmp_path, text, name, **kw)
    t = VectorElements()
    rw = t.apply(src, spec, launch, t.first_point(src, spec, launch))
    f = tmp_path / "kernel.cu"
    f.write_text(rw.text)
    done = nvcc_cubin(spec, f, tmp_path / "k.cubin")
    assert done.returncode == 0, done.stderr


# --- the same results as the original, bit for bit, every thread run on the CPU -------------------------------

SIM = """#define __align__(n) __attribute__((aligned(n)))
#define atomicAdd(p, v) (*(p) += (v))
#define THREADS 128
"""


def cpu_main(kernel: str, t: str, n: int, grid_before: int, grid_after: int, shift: int) -> str:
    """Inputs of n + slack elements; both kernels run over every thread of their own grid of 128-thread blocks on
    pointers `shift` elements into the buffers (1: not 16-byte aligned, the lane-by-lane path)."""
    return f"""
    const int n = {n}, total = 3 * n + 8;
    std::vector<{t}> x(total), y1(total), y2(total);
    for (int k = 0; k < total; k++) {{
        x[k] = (k * 37 % 11) * 0.25 - 1.0;
        y1[k] = y2[k] = (k % 5) * 0.1 + 0.3;
    }}
    blockDim = {{128, 1, 1}};
    for (unsigned g = 0; g < {grid_before}; g++)
        for (unsigned tx = 0; tx < 128; tx++) {{
            blockIdx = {{g, 0, 0}}; threadIdx = {{tx, 0, 0}};
            before::{kernel}(x.data() + {shift}, y1.data() + {shift}, ({t})2, n);
        }}
    for (unsigned g = 0; g < {grid_after}; g++)
        for (unsigned tx = 0; tx < 128; tx++) {{
            blockIdx = {{g, 0, 0}}; threadIdx = {{tx, 0, 0}};
            after::{kernel}(x.data() + {shift}, y2.data() + {shift}, ({t})2, n);
        }}
    for (int k = 0; k < total; k++)
        if (y1[k] != y2[k]) {{ printf("differs at %d: %g %g\\n", k, (double)y1[k], (double)y2[k]); return 1; }}
    return 0;
"""


@pytest.mark.parametrize("shift", [0, 1])
@pytest.mark.parametrize("n", [1000, 998])
def test_rows_compute_the_same_on_the_cpu(tmp_path, n, shift):
    """A 2D grid of 32 x 2 blocks over 4 rows (the last one outside the guard), both kernels, every thread."""
    from library_fixtures import assert_same_on_cpu
    src, spec, launch = make(tmp_path, ROWS, "rows", grid="(N + 31) / 32, 2", block="32, 2", y_role="out")
    rw = VectorElements().apply(src, spec, launch, {"lanes": 4})
    gx = (n + 31) // 32
    run = "\n".join(f"""
    for (unsigned gy = 0; gy < 2; gy++)
        for (unsigned g = 0; g < {grid}; g++)
            for (unsigned ty = 0; ty < 2; ty++)
                for (unsigned tx = 0; tx < 32; tx++) {{
                    blockIdx = {{g, gy, 0}}; threadIdx = {{tx, ty, 0}};
                    {ns}::rows(x.data() + {shift}, {out}.data() + {shift}, 2.0f, n);
                }}""" for grid, ns, out in ((gx, "before", "y1"), ((gx + 3) // 4, "after", "y2")))
    main = cpu_main("rows", "float", n, 0, 0, shift).replace("    blockDim = {128, 1, 1};",
                                                             "    blockDim = {32, 2, 1};" + run)
    assert_same_on_cpu(tmp_path, ROWS, rw.text, main, defines=SIM)


@pytest.mark.parametrize("shift", [0, 1])
@pytest.mark.parametrize("name, text, kw, n, lanes", [
    ("scale_add", SCALE, {}, 1000, 4),             # 1000 = 250 whole chunks of 4, the last block's threads idle
    ("scale_add", SCALE, {}, 1001, 4),             # a partial chunk, lane by lane
    ("scale_add", SCALE, {}, 1003, 2),
    ("planes", PLANES, {"grid": "N / 128"}, 1024, 4),
    ("planes", PLANES, {"grid": "N / 128"}, 1152, 4),    # 9 blocks: the shrunk grid's last chunks lie past the work
    ("mixed", MIXED, {"y_role": "out"}, 1002, 4),
    ("carry", STATE, {"y_role": "out"}, 1001, 4),
    ("halve", DOUBLES, {"block": "THREADS", "t": "double"}, 999, 2),
])
def test_the_rewrite_computes_the_same_on_the_cpu(tmp_path, name, text, kw, n, lanes, shift):
    from library_fixtures import assert_same_on_cpu
    src, spec, launch = make(tmp_path, text, name, **kw)
    rw = VectorElements().apply(src, spec, launch, {"lanes": lanes})
    t = kw.get("t", "float")
    grid = (n + 127) // 128 if name != "planes" else n // 128
    main = cpu_main(name, t, n, grid, (grid + lanes - 1) // lanes, shift)
    assert_same_on_cpu(tmp_path, text, rw.text, main, defines=SIM)


# the same state declared after the index, before the guard: still one element's, each lane's own
STATE_AFTER = """__global__ void carry(const float *x, float *y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 1.0f;
    if (i < n) {
        acc += s * x[i];
        y[i] = acc;
    }
}
"""


def test_state_declared_after_the_index_is_each_lanes_own_too(tmp_path):
    src, spec, launch = make(tmp_path, STATE_AFTER, "carry", block="128", y_role="out")
    rw = VectorElements().apply(src, spec, launch, {"lanes": 4})
    body = rw.text[rw.text.index("mepgen vector_elements"):]
    assert body.count("float acc = 1.0f;") == 2           # inside each path's lane loop, not once before the lanes
    assert rw.text.index("mepgen vector_elements") < rw.text.index("float acc = 1.0f;")
    lanes = body.index("for (int mepgen_l = 0;")
    assert lanes < body.index("float acc = 1.0f;")
