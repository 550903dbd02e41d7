"""A parameter the function itself changes before the launch has the value it gave it, not the one its caller
passed: `n = 2 * n` is followed, and a count a reader stores through a reference (`measure(path, n)`) is the
input's, a todo of kind `file`, never the caller's argument. Template arguments of type bool are written as
`true`/`false` (libclang reports `true` as -1, which no compiler takes for a bool parameter)."""
from __future__ import annotations

from mepgen.spec import load_spec
from mep_apps import make_app, run

_KERNEL = """
    #include <cstdio>
    __global__ void halve(float* v, unsigned n)
    { unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] *= 0.5f; }
"""


def _spec(app, kernel):
    return load_spec(app / ".mepgen" / "meps" / kernel / "mep.yaml")


def test_a_parameter_reassigned_before_the_launch(tmp_path):
    app = make_app(tmp_path, _KERNEL + """
        void twice(float* d, unsigned n)
        {
            n = 2 * n;
            halve<<<(n + 127) / 128, 128>>>(d, n);
        }
        int main() { float* d; cudaMalloc(&d, 4000 * sizeof(float)); twice(d, 1500); return 0; }
    """)
    r = run("halve", "-C", app)
    assert r.exit_code == 0, r.output
    s = _spec(app, "halve")
    assert s.todo == []
    assert s.param("n").value == "2 * 1500"      # not the 1500 its caller passed


def test_a_count_a_reader_stores_through_a_reference_is_the_inputs(tmp_path):
    app = make_app(tmp_path, _KERNEL + """
        void measure(const char* path, unsigned& count)
        {
            FILE* f = fopen(path, "rb");
            fseek(f, 0, SEEK_END);
            count = (unsigned)ftell(f) / 4;
            fclose(f);
        }
        void work(const char* path, unsigned count)
        {
            measure(path, count);
            float* d;
            cudaMalloc(&d, count * sizeof(float));
            halve<<<(count + 255) / 256, 256>>>(d, count);
        }
        int main(int argc, char** argv) { work(argv[1], 4096); return 0; }
    """)
    r = run("halve", "-C", app)
    assert r.exit_code == 3, r.output
    s = _spec(app, "halve")
    assert 4096 not in s.sizes.values(), s.sizes
    assert any(t.kind == "file" and "measure" in t.reason for t in s.todo), [(t.field, t.reason) for t in s.todo]


def test_bool_template_arguments_are_true_and_false(tmp_path):
    app = make_app(tmp_path, """
        template <bool first, bool last>
        __global__ void edge(float* v, int n)
        { int i = threadIdx.x; if (i < n) v[i] = first ? 1.f : (last ? 2.f : 3.f); }
        int main() { float* v; cudaMalloc(&v, 64 * sizeof(float)); edge<true, false><<<1, 64>>>(v, 64); return 0; }
    """)
    r = run("edge", "-C", app)
    assert r.exit_code == 0, r.output
    s = _spec(app, "edge")
    assert s.launch.callee == "edge<true, false>"


def test_an_address_stored_for_cuda_launch_kernel_changes_nothing(tmp_path):
    """`void* args[] = {&d, &n}; cudaLaunchKernel(..., args, ...)`: n is read, not changed; it is the caller's."""
    app = make_app(tmp_path, _KERNEL + """
        void launch(float* d, unsigned n)
        {
            void* args[] = {&d, &n};
            cudaLaunchKernel((const void*)halve, dim3((n + 127) / 128), dim3(128), args, 0, 0);
        }
        int main() { float* d; cudaMalloc(&d, 2048 * sizeof(float)); launch(d, 2048); return 0; }
    """)
    r = run("halve", "-C", app)
    assert r.exit_code == 0, r.output
    assert _spec(app, "halve").param("n").value == "2048"
