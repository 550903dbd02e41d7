"""Element counts and launch configurations derived the way real applications write them: a header the parse
cannot find before the code, function-like macros in a launch, buffers made by an allocating helper or kept as
members of a class, template parameters of the launching function, `sizeof` of the application's own types.
Each MEP is cut from a small application of our own (`make_app`); what cannot be derived stays a todo."""
from __future__ import annotations

from mepgen.spec import load_spec
from test_mep_cli import make_app, run


def _spec(app, kernel):
    r = run(kernel, "-C", app)
    assert r.exit_code in (0, 3), r.output
    return load_spec(app / ".mepgen" / "meps" / kernel / "mep.yaml")


def _fields(spec):
    return {t.field for t in spec.todo}


def test_a_missing_header_does_not_hide_the_allocations_after_it(tmp_path):
    """A header the parse does not have (a library's, say) is a fatal error for clang, which then stops
    instantiating templates: `cudaMalloc(&d, bytes)` on an `int*` (the template overload) became an invalid
    expression and the buffer's count a todo."""
    app = make_app(tmp_path, """
        #include <somelib/not_installed_here.h>
        #define LEN 5000
        __global__ void twice(int* out, const int* in, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            out[i] = 2 * in[i];                   // no bound check: only the allocations tell the counts
        }
        int main()
        {
            int *d_in, *d_out;
            cudaMalloc(&d_in, LEN * sizeof(int));
            cudaMalloc(&d_out, (LEN + 1) * sizeof(int));   // one spare element
            twice<<<(LEN + 127) / 128, 128>>>(d_out, d_in, LEN);
            return 0;
        }
    """)
    s = _spec(app, "twice")
    assert s.param("in").count == "LEN" and s.param("out").count == "LEN + 1"
    assert not any(f.endswith(".count") for f in _fields(s))


def test_function_like_macros_in_a_launch_and_an_allocation_are_expanded(tmp_path):
    """`<<<CEIL_DIV(n, TPB), TPB>>>` with n a local of main set from constants, and a byte count written with
    another macro: expanded as the preprocessor does, then followed like any expression."""
    app = make_app(tmp_path, """
        #define TPB 64
        #define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
        #define PADDED(x) CEIL_DIV(x, 32) * 32
        __global__ void scale(float* v, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            v[i] *= 2.0f;
        }
        int main()
        {
            int rows = 300, cols = 7;
            int n = rows * cols;
            float* d_v;
            cudaMalloc((void**)&d_v, PADDED(n) * sizeof(float));
            scale<<<CEIL_DIV(n, TPB), TPB>>>(d_v, n);
            return 0;
        }
    """)
    s = _spec(app, "scale")
    assert "launch" not in _fields(s)
    assert s.launch.block == ["TPB"]
    from mepgen import cexpr
    sizes = {**s.sizes, "TPB": 64}
    assert cexpr.evaluate(s.launch.grid[0], sizes) == (2100 + 63) // 64
    assert cexpr.evaluate(s.param("v").count, sizes) == (2100 + 31) // 32 * 32


def test_a_variadic_macro_in_a_launch_stays_a_todo(tmp_path):
    """A macro mepgen does not expand (variadic) leaves the launch underived: a todo, never a guess."""
    app = make_app(tmp_path, """
        #define FIRST(a, ...) (a)
        __global__ void fill(float* v) { v[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }
        int main()
        {
            float* d_v;
            cudaMalloc((void**)&d_v, 4096 * sizeof(float));
            fill<<<FIRST(16, 2, 3), 256>>>(d_v);
            return 0;
        }
    """)
    s = _spec(app, "fill")
    assert "launch" in _fields(s)
