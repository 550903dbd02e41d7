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
