"""A launching template that another template calls through a function-like macro (`#define RUN(t) bench<T, t>(d,
n)` then `RUN(128); RUN(256);`): its template arguments are read from the macro's expansion, with the calling
template's own instantiation substituted, and a non-type parameter used in the launch (`dim3 b(THREADS)`) takes
the same value. The choice among several is stated in mep.yaml."""
from __future__ import annotations

from mepgen.spec import load_spec
from mep_apps import make_app, run


def test_template_arguments_through_a_macro_in_another_template(tmp_path):
    app = make_app(tmp_path, """
        template <typename T>
        __global__ void scale(T* v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] *= 2; }

        template <typename T, int THREADS>
        void bench(T* d, int n)
        {
            dim3 b(THREADS);
            scale<T><<<(n + THREADS - 1) / THREADS, b>>>(d, n);
        }

        template <typename T>
        void all_sizes(T* d, int n)
        {
        #define RUN(t) bench<T, t>(d, n)
            RUN(128);
            RUN(256);
        }

        int main() { double* d; cudaMalloc(&d, 5000 * sizeof(double)); all_sizes<double>(d, 5000); return 0; }
    """)
    r = run("scale", "-C", app)
    assert r.exit_code == 0, r.output
    path = app / ".mepgen" / "meps" / "scale" / "mep.yaml"
    s, text = load_spec(path), path.read_text()
    assert s.todo == []
    assert s.launch.callee == "scale<double>"
    assert [str(b) for b in s.launch.block] == ["128"]
    assert "bench() is instantiated as <double, 128>, <double, 256>; this MEP uses <double, 128>" in text
