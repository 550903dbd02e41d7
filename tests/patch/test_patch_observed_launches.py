"""One launch site in a loop over block sizes: the site spells one block (`threads`), the application launches three.
A capture records them (`launch.observed`); patch refuses what cannot hold at all of them (a new block, a
`__launch_bounds__` below the largest) and patches a change of the text alone (patch/site_launches.py)."""
from __future__ import annotations

import pytest

from observed_launches_app import APP, mepgen, variant, with_observed


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    app = tmp_path_factory.mktemp("observed")
    (app / "main.cu").write_text(APP)
    assert mepgen("extract", ".", cwd=app).returncode == 0
    r = mepgen("mep", "mirror", cwd=app)
    assert r.returncode == 0, r.stderr
    mep = app / ".mepgen" / "meps" / "mirror" / "mep.yaml"
    mep.write_text(with_observed(mep.read_text()))
    return app


def test_without_a_capture_the_loop_that_changes_the_block_still_refuses(tmp_path):
    """A static MEP of the loop's site: extract marks the site's block and grid as changing in its loop (`varies`),
    so a `__launch_bounds__(64)` or a new launch is refused there too, where the numbers are unknown."""
    (tmp_path / "main.cu").write_text(APP)
    assert mepgen("extract", ".", cwd=tmp_path).returncode == 0
    assert mepgen("mep", "mirror", cwd=tmp_path).returncode == 0
    v = variant(tmp_path, "bounded", lambda t: t.replace("__global__ void mirror(",
                                                         "__global__ void __launch_bounds__(64, 4) mirror("))
    r = mepgen("patch", "mirror", "--from", str(v), cwd=tmp_path)
    assert r.returncode != 0
    assert "main.cu:15 launches it with a block that changes in its loop (threads)" in r.stderr
    v = variant(tmp_path, "bigger", lambda t: t, lambda y: y.replace("block: ['64']", "block: ['512']")
                .replace("grid: [(1 << 20) / 64]", "grid: [(1 << 20) / 512]"))
    r = mepgen("patch", "mirror", "--from", str(v), cwd=tmp_path)
    assert r.returncode != 0
    assert "main.cu:15 launches mirror in a loop that changes threads from one round to the next" in r.stderr
    v = variant(tmp_path, "restricted", lambda t: t.replace("const float* in)", "const float* __restrict__ in)"))
    assert mepgen("patch", "mirror", "--from", str(v), cwd=tmp_path).returncode == 0


def test_launch_bounds_below_the_largest_observed_block_are_refused(app):
    v = variant(app, "bounded", lambda t: t.replace("__global__ void mirror(", "__global__ void __launch_bounds__(64, 4) "
                                                                               "mirror("))
    r = mepgen("patch", "mirror", "--from", str(v), cwd=app)
    assert r.returncode != 0
    assert "__launch_bounds__(64), but the application launched it with blocks of up to 256 threads" in r.stderr
    assert "block (128, 1, 1) (1 launches)" in r.stderr


def test_a_new_block_is_refused(app):
    v = variant(app, "bigger", lambda t: t, lambda y: y.replace("block: ['64']", "block: ['512']")
                .replace("grid: [(1 << 20) / 64]", "grid: [(1 << 20) / 512]"))
    r = mepgen("patch", "mirror", "--from", str(v), cwd=app)
    assert r.returncode != 0
    assert "launched mirror with 3 different blocks" in r.stderr


def test_launch_bounds_that_hold_for_every_launch_and_text_changes_are_patched(app):
    v = variant(app, "fits", lambda t: t.replace("__global__ void mirror(float* out, const float* in)",
                                                 "__global__ void __launch_bounds__(256, 2) "
                                                 "mirror(float* out, const float* __restrict__ in)"))
    r = mepgen("patch", "mirror", "--from", str(v), cwd=app)
    assert r.returncode == 0, r.stderr
    diff = (app / ".mepgen" / "patches" / "mirror.diff").read_text()
    assert "__launch_bounds__(256, 2)" in diff and "const float* __restrict__ in" in diff
