"""1D work on a 2D launch (`dim3 block(32, 8)` for a kernel that reads only x indices): the threads along y repeat
the same work. drop_replicas launches without them; the transformations that need a 1D launch apply to the
launch without them. Where a replica could tell itself apart (a y index, also in a helper; an atomic; a warp
intrinsic), nothing is dropped."""
from __future__ import annotations

import pytest

from library_fixtures import load
from mepgen.optimize.library.catalog import all_transformations
from mepgen.optimize.library.replicas import DropReplicas, replicated_dims, without
from mepgen.optimize.library.source import Refused
from mep_apps import make_app, run

APP = """
    #define LEN 8192
    #define BX 32
    #define BY 8
    __global__ void colsum(const float *m, float *s, int rows, int cols)
    {
        int c = blockIdx.x * blockDim.x + threadIdx.x;
        if (c < cols) {
            float t = 0.0f;
            for (int r = 0; r < rows; r++) t += m[r * cols + c];
            s[c] = t;
        }
    }
    __global__ void halves(float *v, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) v[i] = v[i] * 0.5f + (float)threadIdx.y;
    }
    __device__ int lane_row() { return threadIdx.y; }
    __global__ void via_helper(float *v, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) v[i] += (float)lane_row();
    }
    __global__ void tally(const float *v, float *total, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) atomicAdd(total, v[i]);
    }
    int main()
    {
        float *m, *s;
        cudaMalloc((void **)&m, sizeof(float) * LEN * 256);
        cudaMalloc((void **)&s, sizeof(float) * LEN);
        dim3 block(BX, BY);
        dim3 grid((LEN + BX - 1) / BX, 1);
        colsum<<<grid, block>>>(m, s, 256, LEN);
        halves<<<grid, block>>>(s, LEN);
        via_helper<<<grid, block>>>(s, LEN);
        tally<<<grid, block>>>(s, m, LEN);
        return 0;
    }
"""


@pytest.fixture(scope="module")
def meps(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("replicas"), APP)
    assert run("--all", "-C", app).exit_code == 0
    return {d.name: d for d in (app / ".mepgen" / "meps").iterdir()}


def test_threads_along_y_that_repeat_the_work_are_not_launched(meps):
    src, spec, launch = load(meps["colsum"])
    assert launch["block"] == ["BX", "BY"] and replicated_dims(src, launch) == [1]
    rw = DropReplicas().apply(src, spec, launch, {})
    assert rw.text == src.text and rw.launch["block"] == ["BX"] and rw.launch["grid"] == [launch["grid"][0]]
    assert "block.y = BY" in rw.explanation
    # a y extent written as a size that is 1 here has no replicas to drop, but the 1D rewrites still see a 1D launch
    flat = {**launch, "block": ["BX", "LEN / LEN"]}
    assert replicated_dims(src, flat) == [1]
    with pytest.raises(Refused, match="1 at the MEP's sizes"):
        DropReplicas().space(src, spec, flat)


def test_a_transformation_that_needs_a_1d_launch_applies_without_the_replicas(meps):
    src, spec, launch = load(meps["colsum"])
    split = next(t for t in all_transformations() if t.name == "split_columns")
    rw = split.apply(src, spec, launch, dict(split.defaults))
    assert rw.explanation.startswith("launch without replicas")
    assert len(rw.launch["block"]) == 2 and "threadIdx.y" in rw.text     # its own 2D block of row slices


@pytest.mark.parametrize("kernel, why", [("halves", "every launch dimension is read"),
                                         ("via_helper", "every launch dimension is read"),
                                         ("tally", "atomicAdd")])
def test_a_replica_that_can_tell_itself_apart_keeps_the_launch(meps, kernel, why):
    src, spec, launch = load(meps[kernel])
    with pytest.raises(Refused, match=why):
        DropReplicas().space(src, spec, launch)


def test_without_keeps_the_dimensions_that_are_not_dropped():
    assert without({"grid": ["g", "1"], "block": ["32", "8"]}, [1]) == {"grid": ["g"], "block": ["32"]}
    assert without({"grid": ["g", "h", "d"], "block": ["32", "8", "2"]}, [1]) == \
        {"grid": ["g", "1", "d"], "block": ["32", "1", "2"]}
    assert without({"grid": ["g", "h", "d"], "block": ["32", "1", "4"]}, [2]) == {"grid": ["g", "h"], "block": ["32"]}
