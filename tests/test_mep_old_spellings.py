"""Spellings of older CUDA code that nvcc accepts: launches written `k << < grid, block >> > (args)`, which
clang lexes as `<<` `<` (the launch vanished: "no launch site"), and byte counts written
`sizeof (double) *n`, whose type in parentheses was taken for a cast of `*n`."""
from __future__ import annotations

from mepgen.spec import load_spec
from test_mep_cli import make_app, run


def test_a_spaced_launch_and_a_spaced_sizeof(tmp_path):
    app = make_app(tmp_path, """
        #include <cstdlib>
        __global__ void accumulate(double* w, int count)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < count) w[i] += 1.0;
        }
        int main(int argc, char** argv)
        {
            int count = 5000;
            double* w_gpu;
            cudaMalloc((void **) &w_gpu, sizeof (double) *count);
            int blocks = (count + 127) / 128;
            accumulate << < blocks, 128 >> > (w_gpu, count);
            return 0;
        }
    """)
    r = run("accumulate", "-C", app)
    assert r.exit_code == 0, r.output
    s = load_spec(app / ".mepgen" / "meps" / "accumulate" / "mep.yaml")
    assert s.todo == []
    assert s.param("w").count in ("COUNT", "5000") and s.sizes.get("COUNT", 5000) == 5000
    assert s.launch.block == ["128"]
    # the MEP keeps the application's bytes: the launch site was read, not rewritten
    assert "<< <" in (app / "src" / "k.cu").read_text()


def test_sizeof_with_a_space_keeps_its_operand():
    """`sizeof (double) *NP` is sizeof(double) times NP, not sizeof of a dereference: the count is NP."""
    from mepgen.mep.counts import count_from_bytes, unparen
    assert count_from_bytes("sizeof (double) *NP", 8) == "NP"
    assert count_from_bytes("NP * sizeof (float)", 4) == "NP"
    assert unparen("((n)) * (m)") == "n * m"
