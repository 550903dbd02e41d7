"""Values computed by host helpers of several statements that use only their arguments (compiled, never
re-implemented), and the launch site among `if`/`else if` branches that the run reaches."""
from __future__ import annotations

from mepgen.spec import load_spec
from mep_apps import make_app, run

APP = """
    #define ROWS 4096
    #define NZ 65536
    static int scale_knob = 3;
    unsigned roundUpPow2(unsigned v)
    {
        v--;
        v |= v >> 1; v |= v >> 2; v |= v >> 4; v |= v >> 8;
        unsigned w = v + 1;
        return w;
    }
    unsigned knobbed(unsigned v) { unsigned r = v; r *= scale_knob; return r; }
    template <int LANES>
    __global__ void rowsum(const float* vals, float* out)
    {
        int r = blockIdx.x * blockDim.y + threadIdx.y;
        if (r < ROWS) {
            float s = 0.0f;
            for (int k = threadIdx.x; k < NZ / ROWS; k += LANES) s += vals[r * (NZ / ROWS) + k];
            out[r] = s;
        }
    }
    void go()
    {
        float *vals, *out;
        cudaMalloc(&vals, sizeof(float) * NZ);
        cudaMalloc(&out, sizeof(float) * ROWS);
        int lanes = roundUpPow2(NZ / ROWS - 3);
        if (lanes > 32) lanes = 32;
        int per_block = 128 / lanes;
        if (per_block == 0) per_block = 1;
        dim3 block(lanes, per_block);
        dim3 grid((ROWS + per_block - 1) / per_block);
        if (lanes <= 4)
            rowsum<4><<<grid, block>>>(vals, out);
        else if (lanes <= 16)
            rowsum<16><<<grid, block>>>(vals, out);
        else
            rowsum<32><<<grid, block>>>(vals, out);
    }
"""


def test_a_helper_of_its_own_arguments_is_computed_and_the_reached_branch_is_launched(tmp_path):
    """roundUpPow2(16 - 3) is 16 by the compiler, the `if (per_block == 0)` is then decided, and of the three
    launches the one under `lanes <= 16` is the run's: the MEP launches rowsum<16> with blocks of 16 x 8."""
    app = make_app(tmp_path, APP)
    r = run("rowsum", "-C", app)
    assert r.exit_code == 0, r.output
    path = app / ".mepgen" / "meps" / "rowsum" / "mep.yaml"
    s = load_spec(path)
    assert s.launch.callee == "rowsum<16>" and s.kernel.template_args == ["16"]
    text = path.read_text()
    assert "roundUpPow2() computed by the compiler" in text and "this MEP uses <16>" in text
    from mepgen import cppeval
    assert [cppeval.evaluate(str(e), {"ROWS": 4096}) for e in s.launch.block[:2]] == [16, 8]
    assert cppeval.evaluate(str(s.launch.grid[0]), {"ROWS": 4096}) == 512


def test_a_helper_that_reads_a_global_is_not_computed(tmp_path):
    """knobbed() reads a file-scope variable the run may change: its value is not the helper's alone, so the
    launch stays a todo, never the value of the global's initializer guessed through the helper."""
    app = make_app(tmp_path, APP.replace("int lanes = roundUpPow2(NZ / ROWS - 3);", "int lanes = knobbed(4);"))
    r = run("rowsum", "-C", app)
    assert r.exit_code == 3
    assert "knobbed() computed" not in (app / ".mepgen" / "meps" / "rowsum" / "mep.yaml").read_text()
