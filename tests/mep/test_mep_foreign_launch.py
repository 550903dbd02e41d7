"""Launch configurations in CUDA code nobody here wrote (issue 20): launch arithmetic in floats (also without
<math.h>, as nvcc allows), members of another dim3, grids set member by member, under a condition, by a function
taking them by reference, or again every round of a loop. Every launch in an MEP is derived or a todo with its
reason."""
from __future__ import annotations

import pytest

from mepgen import cexpr, cppeval
from mep_apps import make_app, run
from test_mep_foreign import spec_of


def test_the_compiler_evaluates_what_plain_integer_arithmetic_cannot():
    values = {"W": 1000, "TILE": "(W / 125)", "DT": "0.25f"}
    assert cexpr.evaluate("(size_t)ceil(((float)W) / ((float)dim3(32, 8).y))", values) == 125
    assert cexpr.evaluate("W % TILE == 0 ? W / TILE : W / TILE + 1", values) == 125
    assert cexpr.evaluate("W / 2.5", values) == 400          # C++'s double division, not Python's floor of ints
    assert cexpr.evaluate("W + missing", values) is None
    assert cexpr.integer("DT", values) is None and cexpr.integer("TILE", values) == 8
    assert cppeval.evaluate_many(["W * 2", "not_a_name + 1"], values) == [2000, None]
    # a type in sizeof's parentheses is no cast to strip (it gave `(W + 1) * sizeof`: no value)
    assert cexpr.evaluate("(W + 1) * sizeof(unsigned int)", values) == 4004
    assert cexpr.evaluate("sizeof (long) * (unsigned)W", values) == 8000


def test_float_launch_arithmetic_and_members_of_another_dim3_are_derived(tmp_path):
    app = make_app(tmp_path, """
        #include <cmath>
        #define ROWS 900
        #define COLS 650
        __global__ void twice(float* m, int rows, int cols)
        {
            int c = blockIdx.x * blockDim.x + threadIdx.x;
            int r = blockIdx.y * blockDim.y + threadIdx.y;
            if (r < rows && c < cols) m[r * cols + c] = 2.0f * m[r * cols + c];
        }
        int main()
        {
            float* m;
            cudaMalloc(&m, sizeof(float) * ROWS * COLS);
            dim3 threads(16, 4);
            dim3 blocks((unsigned)ceil(((float)COLS) / ((float)threads.x)), (unsigned)ceil((float)ROWS / threads.y));
            twice<<<blocks, threads>>>(m, ROWS, COLS);
            return 0;
        }
    """)
    r = run("--all", "-C", app)
    assert r.exit_code == 0, r.output
    s = spec_of(app, "twice")
    assert [s.size(e) for e in s.launch.grid] == [41, 225] and [s.size(e) for e in s.launch.block] == [16, 4]


@pytest.mark.parametrize("include", ["", "#include <math.h>", "#include <cmath>\n#include <math.h>"])
def test_float_launch_arithmetic_without_including_math_h_as_nvcc_allows(tmp_path, include):
    """nvcc's implicit cuda_runtime.h declares ceil/floor for host code: a file that calls them in its launch
    arithmetic without any #include compiles, and its grid must be derived as well as with the #include."""
    app = make_app(tmp_path, include + """
        #define SIDE 700
        #define TX 32
        #define TY 8
        __global__ void halve(float* m, int side)
        {
            int c = blockIdx.x * blockDim.x + threadIdx.x;
            int r = blockIdx.y * blockDim.y + threadIdx.y;
            if (r < side && c < side) m[r * side + c] *= 0.5f;
        }
        void on_gpu(float* m)
        {
            dim3 threads(TX, TY);
            dim3 blocks((size_t)(ceil( ((float)SIDE) / ((float)threads.x) )), 1);
            blocks.y = (size_t)floorf((SIDE + threads.y - 1.0f) / threads.y);
            halve<<< blocks, threads >>>(m, SIDE);
        }
        int main()
        {
            float* m;
            cudaMalloc((void**)&m, sizeof(float) * SIDE * SIDE);
            on_gpu(m);
            return 0;
        }
    """)
    r = run("--all", "-C", app)
    assert r.exit_code == 0, r.output
    s = spec_of(app, "halve")
    assert [s.size(e) for e in s.launch.grid] == [22, 88, 1] and [s.size(e) for e in s.launch.block] == [32, 8]


def test_a_grid_set_member_by_member_after_its_declaration_is_followed(tmp_path):
    """`dim3 grid(1, 1, 1); grid.x = ...;` must not launch one block."""
    app = make_app(tmp_path, """
        #define LEN 5000
        __global__ void ones(float* v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] = 1.0f; }
        int main()
        {
            float* v;
            cudaMalloc(&v, LEN * sizeof(float));
            dim3 grid(1, 1, 1), block(1, 1, 1);
            block.x = 128;
            grid.x = (LEN + block.x - 1) / block.x;
            grid.y *= 1;
            ones<<<grid, block>>>(v, LEN);
            return 0;
        }
    """)
    r = run("--all", "-C", app)
    assert r.exit_code == 0, r.output
    s = spec_of(app, "ones")
    assert [s.size(e) for e in s.launch.grid] == [40, 1, 1] and s.size(s.launch.block[0]) == 128


def test_a_grid_assigned_under_a_condition_is_a_todo_never_a_guess(tmp_path):
    app = make_app(tmp_path, """
        #define LEN 5000
        __global__ void ones(float* v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] = 1.0f; }
        void go(float* v, bool big)
        {
            dim3 grid(1);
            if (big) grid.x = LEN / 64;
            ones<<<grid, 64>>>(v, LEN);
        }
    """)
    r = run("--all", "-C", app)
    assert r.exit_code == 3
    s = spec_of(app, "ones")
    launch = [t for t in s.todo if t.field == "launch"]
    assert launch and "`grid`" in launch[0].reason and "condition" in launch[0].reason


def test_a_grid_filled_in_by_a_function_taking_it_by_reference_is_not_its_initializer(tmp_path):
    app = make_app(tmp_path, """
        #define LEN 5000
        __global__ void ones(float* v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] = 1.0f; }
        void plan(dim3& g, int n) { g.x = (n + 127) / 128; }
        void go(float* v)
        {
            dim3 grid(1);
            plan(grid, LEN);
            ones<<<grid, 128>>>(v, LEN);
        }
    """)
    run("--all", "-C", app)
    s = spec_of(app, "ones")
    launch = [t for t in s.todo if t.field == "launch"]
    assert launch and "`grid` is passed by reference" in launch[0].reason


def test_grids_set_again_every_round_of_a_loop_and_a_kernel_without_parameters(tmp_path):
    """In a loop that launches two kernels, `blocks` is set before each launch: the later assignment does not
    reach the first launch of the next round. A kernel with no parameters gets an MEP too."""
    app = make_app(tmp_path, """
        #include <cmath>
        #define NX 3000
        #define NY 1000
        __global__ void tick() {}
        __global__ void rows(float* a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = 1.0f; }
        __global__ void cols(float* b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) b[i] = 2.0f; }
        int main()
        {
            float *a, *b;
            cudaMalloc(&a, NX * sizeof(float));
            cudaMalloc(&b, NY * sizeof(float));
            dim3 threads(256), blocks;
            for (int it = 0; it < 10; it++) {
                blocks.x = (NX + threads.x - 1) / threads.x;
                rows<<<blocks, threads>>>(a, NX);
                blocks.x = (unsigned)ceil(NY / (double)threads.x);
                cols<<<(dim3(blocks.x)), threads>>>(b, NY);
            }
            tick<<<1, 1>>>();
            return 0;
        }
    """)
    r = run("--all", "-C", app)
    assert r.exit_code == 0, r.output
    assert spec_of(app, "rows").size(spec_of(app, "rows").launch.grid[0]) == 12
    assert spec_of(app, "cols").size(spec_of(app, "cols").launch.grid[0]) == 4
    tick = spec_of(app, "tick")
    assert tick.params == [] and tick.todo == []
