"""Placeholder sizes are no values: a count written as a difference of two sizes mepgen could not trace
(`total - fixed - 1`, both placeholders of the same default) came out negative, and the whole kernel was
reported as one that cannot have an MEP. It is an MEP with todos; the check applies once the sizes are set."""
from __future__ import annotations

from mepgen.spec import load_spec
from mep_apps import make_app, run


def test_a_count_negative_only_through_placeholders_is_an_mep_with_todos(tmp_path):
    app = make_app(tmp_path, """
        #include <cstdlib>
        __global__ void tail(int* ids, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) ids[i] = i;
        }
        void step(int total, int fixed)
        {
            int* d;
            cudaMalloc(&d, (total - fixed - 1) * sizeof(int));
            tail<<<(total - fixed - 1 + 255) / 256, 256>>>(d, total - fixed - 1);
        }
        int main(int argc, char** argv) { step(rand(), rand()); return 0; }
    """)
    r = run("tail", "-C", app)
    assert r.exit_code == 3, r.output
    s = load_spec(app / ".mepgen" / "meps" / "tail" / "mep.yaml")
    assert {t.field for t in s.todo} >= {"sizes.TOTAL", "sizes.FIXED"}
    assert s.param("ids").count == "TOTAL - FIXED - 1"


def test_a_launch_beyond_cudas_limits_at_the_derived_size_is_a_todo(tmp_path):
    """`grid(1, n / 16)` with the run's n = 2^21: grid.y = 131072 passes CUDA's 65535, so the launch fails with
    'invalid argument', in the application as in the MEP. That is a launch todo naming the limit, not a
    complete MEP that cannot run."""
    app = make_app(tmp_path, """
        #define N (1 << 21)
        __global__ void tiles(float* v)
        {
            int i = (blockIdx.y * 16 + threadIdx.y) * 16 + threadIdx.x;
            v[i] = 0.0f;
        }
        int main()
        {
            float* d;
            cudaMalloc(&d, N * 16 * sizeof(float));
            dim3 grid(1, N / 16), block(16, 16);
            tiles<<<grid, block>>>(d);
            return 0;
        }
    """)
    r = run("tiles", "-C", app)
    assert r.exit_code == 3, r.output
    s = load_spec(app / ".mepgen" / "meps" / "tiles" / "mep.yaml")
    launch = [t for t in s.todo if t.field == "launch"]
    assert launch and "grid.y is 131072" in launch[0].reason and "65535" in launch[0].reason


def test_limits_are_checked_only_where_extents_evaluate():
    from mepgen.mep.limits import launch_beyond_limits
    assert launch_beyond_limits(["N / 256"], ["256"], {"N": 1 << 20}, {}) is None
    assert "block of 2048 threads" in launch_beyond_limits(["1"], ["64", "32"], {}, {})
    assert launch_beyond_limits(["M / 256"], ["256"], {}, {}) is None        # unknown M: no claim
