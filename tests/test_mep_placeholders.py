"""Placeholder sizes are no values: a count written as a difference of two sizes mepgen could not trace
(`total - fixed - 1`, both placeholders of the same default) came out negative, and the whole kernel was
reported as one that cannot have an MEP. It is an MEP with todos; the check applies once the sizes are set."""
from __future__ import annotations

from mepgen.spec import load_spec
from test_mep_cli import make_app, run


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
