"""A kernel the application launches with different blocks from several sites, and a winner its MEP measured at one
of them: a new launch, or `__launch_bounds__` below another site's block, is refused with the sites; a change of
the kernel's text alone is patched (patch/site_launches.py)."""
from __future__ import annotations

import pytest

from observed_launches_app import mepgen, variant


def program(kernel: str, launches: list[str]) -> str:
    """An application around `kernel`: two 1 Mi-float buffers, the launches given, a sync."""
    body = "".join(f"    {launch}(out, in);\n" for launch in launches)
    return ("#include <cstdio>\n" + kernel + "\nint main()\n{\n    const int total = 1 << 20;\n    float *in, *out;\n"
            "    cudaMalloc(&in, total * sizeof(float));\n    cudaMalloc(&out, total * sizeof(float));\n" + body +
            '    cudaDeviceSynchronize();\n    printf("done\\n");\n    return 0;\n}\n')


# each block reverses its own threads' values: what it computes depends on the block each site launches with
APP = program("""__global__ void mirror(float* out, const float* in)
{
    unsigned at = blockDim.x * blockIdx.x + threadIdx.x;
    out[at] = in[blockDim.x * blockIdx.x + blockDim.x - threadIdx.x - 1];
}
""", ["mirror<<<dim3(total / 64), dim3(64)>>>", "mirror<<<dim3(total / 128), dim3(128)>>>"])


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    app = tmp_path_factory.mktemp("sites")
    (app / "main.cu").write_text(APP)
    assert mepgen("extract", ".", cwd=app).returncode == 0
    r = mepgen("mep", "mirror", cwd=app)
    assert r.returncode == 0, r.stderr
    return app


def test_a_new_launch_is_refused_where_sites_launch_differently(app):
    v = variant(app, "bigger", lambda t: t, lambda y: y.replace("block: ['64']", "block: ['256']")
                .replace("grid: [(1 << 20) / 64]", "grid: [(1 << 20) / 256]"))
    assert "block: ['256']" in (v.parent / "mep.yaml").read_text()
    r = mepgen("patch", "mirror", "--from", str(v), cwd=app)
    assert r.returncode != 0
    assert "launched with different blocks at 2 sites (main.cu:14 block dim3(64), main.cu:15 block dim3(128))" \
        in r.stderr and "the winner changes the launch" in r.stderr


def test_launch_bounds_below_another_sites_block_are_refused(app):
    v = variant(app, "bounded", lambda t: t.replace("__global__ void mirror(", "__global__ void __launch_bounds__(64, 4) "
                                                                               "mirror("))
    r = mepgen("patch", "mirror", "--from", str(v), cwd=app)
    assert r.returncode != 0
    assert "__launch_bounds__(64), but main.cu:15 launches it with block dim3(128)" in r.stderr
    assert "main.cu:14" not in r.stderr          # 64 threads fit


def test_a_change_of_the_text_alone_is_patched(app):
    v = variant(app, "restricted", lambda t: t.replace("const float* in)", "const float* __restrict__ in)"))
    r = mepgen("patch", "mirror", "--from", str(v), cwd=app)
    assert r.returncode == 0, r.stderr
    diff = (app / ".mepgen" / "patches" / "mirror.diff").read_text()
    assert "+__global__ void mirror(float* out, const float* __restrict__ in)" in diff
    assert "+    mirror<<<" not in diff                 # no launch site changed


HALVES = program("""__global__ void twice(float* out, const float* in)
{
    unsigned at = blockDim.x * blockIdx.x + threadIdx.x;
    out[at] = 2.0f * in[at];
}
""", ["twice<<<dim3(total / 256), dim3(256)>>>", "twice<<<dim3(total / 512), dim3(256)>>>"])


def test_a_coarsening_that_stops_at_one_sites_grid_is_refused_where_sites_spell_others(tmp_path):
    """The same block at both sites, but one launches half the grid: a block-coarsened winner whose loop stops at the
    MEP's own grid (the first site's literal) would do twice the work at the second, past its data."""
    from mepgen.optimize.library.base import current_launch
    from mepgen.optimize.library.coarsen_blocks import CoarsenBlocks
    from mepgen.optimize.library.source import KernelSource
    from mepgen.spec import load_spec
    app = tmp_path / "halves"
    app.mkdir()
    (app / "main.cu").write_text(HALVES)
    assert mepgen("extract", ".", cwd=app).returncode == 0
    assert mepgen("mep", "twice", cwd=app).returncode == 0
    mep = app / ".mepgen" / "meps" / "twice"
    spec = load_spec(mep / "mep.yaml")
    rw = CoarsenBlocks().apply(KernelSource((mep / "kernel.cu").read_text(), spec), spec, current_launch(spec, None),
                               {"factor": 4, "dim": "x"})
    assert "// past the original grid" in rw.text
    win = app / "win"
    win.mkdir()
    (win / "kernel.cu").write_text(rw.text)
    text = (mep / "mep.yaml").read_text()
    (win / "mep.yaml").write_text(text.replace(f"grid: [{spec.launch.grid[0]}]", f"grid: ['{rw.launch['grid'][0]}']"))
    assert (win / "mep.yaml").read_text() != text
    r = mepgen("patch", "twice", "--from", str(win / "kernel.cu"), cwd=app)
    assert r.returncode != 0
    assert "stops at the grid of the launch its MEP measured" in r.stderr
    assert "main.cu:14 grid dim3(total/256), main.cu:15 grid dim3(total/512)" in r.stderr


def test_one_block_spelled_two_ways_is_one_launch(tmp_path):
    """`dim3(256)` at one site and `256` at the other are the same block: a new block is written at both."""
    app = tmp_path / "same"
    app.mkdir()
    (app / "main.cu").write_text(HALVES.replace("twice<<<dim3(total / 512), dim3(256)>>>", "twice<<<total / 256, 256>>>"))
    assert mepgen("extract", ".", cwd=app).returncode == 0
    assert mepgen("mep", "twice", cwd=app).returncode == 0
    mep = app / ".mepgen" / "meps" / "twice"
    win = app / "win"
    win.mkdir()
    (win / "kernel.cu").write_text((mep / "kernel.cu").read_text())
    text = (mep / "mep.yaml").read_text()
    (win / "mep.yaml").write_text(text.replace("block: ['256']", "block: ['128']").replace(
        "grid: [(1 << 20) / 256]", "grid: [(1 << 20) / 128]"))
    assert "block: ['128']" in (win / "mep.yaml").read_text() and "/ 128]" in (win / "mep.yaml").read_text()
    r = mepgen("patch", "twice", "--from", str(win / "kernel.cu"), cwd=app)
    assert r.returncode == 0, r.stderr
    diff = (app / ".mepgen" / "patches" / "twice.diff").read_text()
    assert diff.count("+    twice<<<(1 << 20) / 128, TWICE_BLOCK>>>(out, in);") == 2
