"""Idioms of CUDA code nobody here wrote (issue 20), each in a small application of its own (launch configurations:
test_mep_foreign_launch.py): loop counters and argv defaults as launch arguments, size names that collide with the application's, one bad kernel among good ones,
sizes too large to allocate, struct and byte buffers, kernels that did not parse cleanly, outputs written in
slices. Every value in an MEP is derived or a todo with its reason."""
from __future__ import annotations

import json

import pytest

from mepgen.spec import load_spec
from mep_apps import make_app, run


def spec_of(app, kernel):
    return load_spec(app / ".mepgen" / "meps" / kernel / "mep.yaml")


@pytest.mark.nvcc
def test_size_names_cannot_collide_with_the_applications_names(tmp_path):
    """Sizes named `N`, `I` and `T` (a macro, and two host values mepgen names after the kernel's parameters)
    next to a device function whose parameter is `N` and a `template <typename T>`: built with nvcc."""
    import subprocess
    app = make_app(tmp_path, """
        #include <cstdlib>
        #define N 3000
        __device__ float pick(const float* v, int N_unused, int I) { return v[I]; }
        template <typename T>
        __global__ void gather(T* out, const T* in, int t, int i)
        {
            int k = blockIdx.x * blockDim.x + threadIdx.x;
            if (k < t) out[k] = in[k] + (T)pick((const float*)0, N, 0) * 0 + (T)i;
        }
        int main(int argc, char** argv)
        {
            float *o, *x;
            cudaMalloc(&o, N * sizeof(float));
            cudaMalloc(&x, N * sizeof(float));
            int t = rand() % N, i = rand();
            gather<float><<<(N + 127) / 128, 128>>>(o, x, t, i);
            return 0;
        }
    """)
    r = run("gather", "-C", app, "--size", "T=2000", "--size", "I=1")
    assert r.exit_code == 0, r.output
    mep = app / ".mepgen" / "meps" / "gather"
    s = spec_of(app, "gather")
    assert {"N", "T", "I"} <= set(s.sizes)
    make = (mep / "Makefile").read_text()
    assert "-DMEPGEN_SIZE_T=2000" in make and "-DT=" not in make and "-DN=" not in make
    assert "#define N MEPGEN_SIZE_N" in (mep / "kernel.cu").read_text()
    built = subprocess.run(["make", "-C", str(mep)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    from mepgen.evaluate.pycuda_entry import entry_source
    entry = entry_source(s, mep / "kernel.cu")
    assert "MEPGEN_SIZE_T" in entry and "template <int I" not in entry


def test_a_launch_under_a_condition_on_the_loop_counter_gets_no_first_iteration(tmp_path):
    """`for (w = W0; w > 0; w /= 2) if (w < CUT) near<<<>>>(w) else far<<<>>>(w)`: the loop's first value may never
    reach a launch the branch selects (a capture found one that never did): a todo saying so, while a launch
    directly in a loop still takes the first iteration."""
    app = make_app(tmp_path, """
        #define N 8192
        #define CUT 128
        __global__ void near(float* u, int w) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < N - w) u[i] += u[i + w]; }
        __global__ void far(float* u, int w) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < N - w) u[i] -= u[i + w]; }
        __global__ void each(float* u, int k) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < N) u[i] *= k; }
        int main()
        {
            float* u;
            cudaMalloc(&u, N * sizeof(float));
            for (int w = N / 2; w > 0; w /= 2) {
                if (w < CUT) near<<<N / 128, 128>>>(u, w);
                else far<<<N / 128, 128>>>(u, w);
            }
            for (int k = 2; k < 6; ++k) each<<<N / 128, 128>>>(u, k);
            return 0;
        }
    """)
    run("--all", "-C", app)
    for k in ("near", "far"):
        todo = spec_of(app, k).todo
        assert any("condition on it" in t.reason and "first iteration may not reach" in t.reason for t in todo), todo
    each = spec_of(app, "each")
    assert each.param("k").value == "2" and not each.todo


def test_host_loop_counters_argv_defaults_and_init_functions(tmp_path):
    """A launch in `for (s = 0; s < STEPS; s++)` takes the first iteration's counter, said in mep.yaml; a size
    from the command line is a todo naming the argument, with the application's default where the code has one;
    a global an init function sets once is derived; a float the application computes at run time is a todo,
    never a made-up value."""
    app = make_app(tmp_path, """
        #include <cstdlib>
        #define STEPS 12
        float g_gain;
        __global__ void advance(float* u, int n, int s, float gain)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) u[i] += gain * s; }
        __global__ void damp(float* u, int n, float d)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) u[i] *= d; }
        __global__ void clear(float* u, int n)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) u[i] = 0.0f; }
        void init_params() { g_gain = 0.125f; }
        int main(int argc, char** argv)
        {
            int cells = 2000;
            if (argc > 1) cells = atoi(argv[1]);
            const int rest = atoi(argv[2]);
            init_params();
            float* u;
            cudaMalloc(&u, sizeof(float) * cells);
            int s;
            for (s = 0; s < STEPS; ++s)
                advance<<<(cells + 63) / 64, 64>>>(u, cells, s, g_gain);
            float d = (float)rand() / RAND_MAX;
            damp<<<(cells + 63) / 64, 64>>>(u, cells, d);
            clear<<<(rest + 63) / 64, 64>>>(u, rest);
            return 0;
        }
    """)
    r = run("--all", "-C", app)
    assert r.exit_code == 3, r.output
    adv = spec_of(app, "advance")
    assert adv.param("s").value == "0" and adv.param("gain").value == "0.125f"
    text = (app / ".mepgen/meps/advance/mep.yaml").read_text()
    assert "first iteration" in text and "init_params()" in text
    size = next(n for n in adv.sizes if adv.param("n").value == n)
    assert adv.sizes[size] == 2000                                     # the application's default
    assert [t.field for t in adv.todo] == [f"sizes.{size}"]
    assert "argv[1]" in adv.todo[0].reason and "default without it is 2000" in adv.todo[0].reason
    damp = spec_of(app, "damp")
    assert damp.param("d").value == "float{}" and "params[2].value" in [t.field for t in damp.todo]
    assert "0.5f" not in (app / ".mepgen/meps/damp/mep.yaml").read_text()
    clear = spec_of(app, "clear")
    reasons = " ".join(t.reason for t in clear.todo)
    assert "argv[2]" in reasons and "no default" in reasons
    assert not (app / ".mepgen/meps/clear/data").exists()             # a placeholder size allocates nothing


def test_one_kernel_without_a_readable_launch_does_not_sink_the_others(tmp_path):
    """`--all`: a kernel launched only through a function pointer gets its own outcome (no MEP, the reason); the
    kernel next to it is written; the exit code says some need a person."""
    app = make_app(tmp_path, """
        #define LEN 4096
        __global__ void fine(float* v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] = 2.0f; }
        __global__ void hidden(float* v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] = 3.0f; }
        typedef void (*kfn)(float*, int);
        void via(kfn f, float* v) { void* args[] = {&v}; cudaLaunchKernel((const void*)f, dim3(16), dim3(256), args, 0, 0); }
        int main()
        {
            float* v;
            cudaMalloc(&v, LEN * sizeof(float));
            fine<<<LEN / 256, 256>>>(v, LEN);
            via(hidden, v);
            return 0;
        }
    """)
    r = run("--all", "--json", "-C", app)
    assert r.exit_code == 3, r.output
    out = json.loads(r.stdout)
    by = {o["kernel"]: o for o in out}
    assert by["fine"]["outcome"] == "ready" and (app / ".mepgen/meps/fine/harness.cu").is_file()
    assert by["hidden"]["outcome"] == "cannot" and "launch" in by["hidden"]["reason"]
    assert "no MEP for 1 kernel(s): hidden" in r.stderr


def test_a_launch_of_literals_and_oversized_sizes_are_no_internal_errors(tmp_path):
    """`k<<<4, 256>>>(d, 1024)` has no size at all; sizes the application derives but no GPU could hold are a
    todo naming the limit, and nothing is allocated."""
    app = make_app(tmp_path, """
        #define HUGE_N (1LL << 40)
        __global__ void k(float* d, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) d[i] = 0.0f; }
        __global__ void big(float* d, long long n) { long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) d[i] = 1.0f; }
        int main()
        {
            float *d, *e;
            cudaMalloc(&d, 1024 * sizeof(float));
            k<<<4, 256>>>(d, 1024);
            cudaMalloc(&e, HUGE_N * sizeof(float));
            big<<<(HUGE_N + 255) / 256, 256>>>(e, HUGE_N);
            return 0;
        }
    """)
    r = run("--all", "-C", app)
    assert r.exit_code == 3, r.output
    k = spec_of(app, "k")
    assert k.sizes == {} and k.todo == [] and (k.launch.grid, k.launch.block) == (["4"], ["256"])
    big = spec_of(app, "big")
    # its grid of 2^32 blocks passes CUDA's limit (the application's launch fails at that size too), and its
    # buffer would take 16 GiB: either is a todo naming the limit
    assert any(t.field == "launch" and "beyond CUDA's 2147483647" in t.reason or
               t.field == "sizes" and "16 GiB" in t.reason for t in big.todo)
    assert not (app / ".mepgen/meps/big/data").exists()


def test_a_kernel_that_did_not_parse_cleanly_gets_no_confident_roles(tmp_path):
    """A macro the parse no longer sees (a header or define the build flags missed) leaves `u[i * STRIDE] += ...`
    as an invalid expression: no access of `u` is seen. Its role is a todo (inout until settled), not `in`."""
    from mepgen.inventory import load
    from mepgen.mep.assemble import assemble
    from mepgen.mep.project import Project
    app = make_app(tmp_path, """
        #define STRIDE 2
        __global__ void relax(float* u, const float* f, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) u[i * STRIDE] += 0.5f * f[i];
        }
        void go(float* u, const float* f) { relax<<<4, 256>>>(u, f, 1024); }
    """)
    src = app / "src" / "k.cu"
    src.write_text(src.read_text().replace("#define STRIDE 2", "#define STRIDX 2"))   # same bytes, one name lost
    inv = load(app / ".mepgen" / "inventory.json")
    spec, _ = assemble(Project(app, inv["translation_units"]), inv, inv["kernels"][0], {}, detect_gpu=False)
    assert spec.param("u").role == "inout" and spec.param("f").role == "in"
    todo = {t.field: t.reason for t in spec.todo}
    assert "params[0].role" in todo and "STRIDE" in todo["params[0].role"]


def test_byte_buffers_are_numbers_and_structs_of_device_pointers_name_a_capture_run(tmp_path):
    app = make_app(tmp_path, """
        #define PIXELS 4096
        typedef unsigned char byte_t;
        struct Pair { float* lhs; const float* rhs; int n; };
        __global__ void luma(const byte_t* rgb, unsigned char* y, int n)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = (rgb[3 * i] + rgb[3 * i + 2]) / 2; }
        __global__ void add(Pair p) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < p.n) p.lhs[i] += p.rhs[i]; }
        int main()
        {
            byte_t* rgb; unsigned char* y;
            cudaMalloc(&rgb, 3 * PIXELS);
            cudaMalloc(&y, PIXELS);
            luma<<<PIXELS / 128, 128>>>(rgb, y, PIXELS);
            Pair p;
            cudaMalloc(&p.lhs, PIXELS * sizeof(float));
            p.n = PIXELS;
            add<<<PIXELS / 128, 128>>>(p);
            return 0;
        }
    """)
    r = run("--all", "-C", app)
    assert r.exit_code == 3, r.output
    luma = spec_of(app, "luma")
    assert luma.todo == [] and (luma.param("rgb").dtype, luma.param("rgb").count) == ("uint8", "3 * PIXELS")
    assert luma.param("y").dtype == "uint8"
    add = spec_of(app, "add")
    assert [t.field for t in add.todo] == ["params[0].value"]
    assert "device pointers (lhs, rhs)" in add.todo[0].reason and "mepgen capture add -- ./app" in add.todo[0].reason


def test_items_of_a_brace_initialized_array_are_derived_and_assigned_items_are_not(tmp_path):
    app = make_app(tmp_path, """
        #define TX 32
        #define TY 4
        #define SIDE 512
        __global__ void fill(float* m, int side, int off)
        { int x = blockIdx.x * blockDim.x + threadIdx.x + off; int y = blockIdx.y * blockDim.y + threadIdx.y;
          if (x < side && y < side) m[y * side + x] = 1.0f; }
        int main()
        {
            float* m;
            cudaMalloc(&m, SIDE * SIDE * sizeof(float));
            size_t local[2] = {TX, TY};
            int offsets[2];
            offsets[0] = SIDE / 2;
            dim3 block(local[0], local[1]);
            dim3 grid(SIDE / local[0], SIDE / local[1]);
            fill<<<grid, block>>>(m, SIDE, offsets[0]);
            return 0;
        }
    """)
    run("--all", "-C", app)
    s = spec_of(app, "fill")
    assert [s.size(e) for e in s.launch.block] == [32, 4] and [s.size(e) for e in s.launch.grid] == [16, 128]
    todo = {t.field: t.reason for t in s.todo}
    assert list(todo) == ["params[2].value"] and "elements of `offsets` are assigned" in todo["params[2].value"]


def test_a_condition_over_constants_is_decided_by_the_compiler(tmp_path):
    """`if (LEN % 256 != 0) blocks++;` depends on macros only: decided; `if (flag)` over a run-time value is not."""
    app = make_app(tmp_path, """
        #include <cstdlib>
        #define LEN 5000
        __global__ void ones(float* v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] = 1.0f; }
        __global__ void twos(float* v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) v[i] = 2.0f; }
        int main()
        {
            float* v;
            cudaMalloc(&v, LEN * sizeof(float));
            int blocks = LEN / 256;
            if (LEN % 256 != 0) blocks++;
            else blocks += 100;
            ones<<<blocks, 256>>>(v, LEN);
            int more = 1;
            if (rand() > 5) more = 2;
            twos<<<more, 256>>>(v, LEN);
            return 0;
        }
    """)
    run("--all", "-C", app)
    ones = spec_of(app, "ones")
    assert ones.todo == [] and ones.size(ones.launch.grid[0]) == 20
    twos = spec_of(app, "twos")
    assert any("under a condition" in t.reason for t in twos.todo)


def test_values_an_init_function_stores_through_pointers_are_derived(tmp_path):
    """`setup(&rate, &n)` whose body is `*rate = 0.99f; *n = CELLS / 2;`: both derived and said; a count read
    back from a library call (`cudaGetDeviceCount(&devices)`) is not."""
    app = make_app(tmp_path, """
        #define CELLS 4096
        __global__ void decay(float* u, int n, float rate) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) u[i] *= rate; }
        void setup(float* rate, int* n) { *rate = 0.99f; *n = CELLS / 2; }
        int main()
        {
            float rate; int n, devices;
            float* u;
            setup(&rate, &n);
            cudaGetDeviceCount(&devices);
            cudaMalloc(&u, CELLS * sizeof(float));
            decay<<<(n + 127) / 128, 128>>>(u, n, rate);
            decay<<<devices, 128>>>(u, n, rate);
            return 0;
        }
    """)
    run("--all", "-C", app)
    s = spec_of(app, "decay")
    assert (s.param("rate").value, s.param("n").value) == ("0.99f", "CELLS / 2") and s.todo == []
    assert "set by setup()" in (app / ".mepgen/meps/decay/mep.yaml").read_text()
    from mepgen.inventory import load
    from mepgen.mep.assemble import assemble
    from mepgen.mep.project import Project
    inv = load(app / ".mepgen" / "inventory.json")
    k = inv["kernels"][0]
    second, _ = assemble(Project(app, inv["translation_units"]), inv, k, {}, detect_gpu=False,
                         site=k["launch_sites"][1])
    reasons = " ".join(t.reason for t in second.todo)
    assert "cudaGetDeviceCount()" in reasons


def test_constant_arrays_of_vectors_and_of_mixed_structs_are_no_internal_error(tmp_path):
    app = make_app(tmp_path, """
        #define N 1024
        struct Coef { float a; int b; };
        __constant__ float4 c_taps[4];
        __constant__ Coef c_coef[2];
        __global__ void apply(float* y, int n)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = c_taps[i % 4].x + c_coef[i % 2].a; }
        int main() { float* y; cudaMalloc(&y, N * sizeof(float)); apply<<<N / 256, 256>>>(y, N); return 0; }
    """)
    r = run("--all", "-C", app)
    assert r.exit_code == 3, r.output
    s = spec_of(app, "apply")
    taps, coef = s.constants
    assert (taps.dtype, taps.count) == ("float32", "16")                # four float4 as sixteen floats
    assert [t.field for t in s.todo] == ["constants[1].init"] and "mepgen capture apply" in s.todo[0].reason


def test_a_cast_in_a_launch_argument_keeps_its_parentheses(tmp_path):
    app = make_app(tmp_path, """
        __global__ void fillv(double* b, const int n, const double left)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) b[i] = left + i; }
        int main()
        {
            const int cells = 1664;
            double* d;
            cudaMalloc(&d, (cells + 1) * sizeof(double));
            fillv<<<(cells + 255) / 256, 256>>>(d, cells, (double)cells);
            return 0;
        }
    """)
    run("--all", "-C", app)
    assert spec_of(app, "fillv").param("left").value == "(double)1664"


@pytest.mark.gpu
def test_an_original_that_writes_one_plane_verifies_on_the_gpu(tmp_path):
    """The kernel writes plane z = NZ / 2 of a NX x NY x NZ output, an `out` buffer as far as the access analysis
    can tell: `mepgen run` checks the original against itself where it writes, says which region that is, and
    does not fail its own verification."""
    import subprocess
    import sys
    app = make_app(tmp_path, """
        #define NX 256
        #define NY 128
        #define NZ 16
        __global__ void one_plane(float* out, const float* in, int nx, int ny, int z)
        {
            int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
            if (x < nx && y < ny) out[(z * ny + y) * nx + x] = 2.0f * in[y * nx + x];
        }
        int main()
        {
            float *out, *in;
            cudaMalloc(&out, NX * NY * NZ * sizeof(float));
            cudaMalloc(&in, NX * NY * sizeof(float));
            one_plane<<<dim3(NX / 32, NY / 8), dim3(32, 8)>>>(out, in, NX, NY, NZ / 2);
            return 0;
        }
    """)
    assert run("one_plane", "-C", app).exit_code == 0
    assert spec_of(app, "one_plane").param("out").role == "out"
    done = subprocess.run([sys.executable, "-m", "mepgen.cli", "run", "one_plane", "-C", str(app)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    plane = 256 * 128
    assert f"writes {plane} of {plane * 16} elements of 'out'" in done.stdout + done.stderr
    assert f"[{8 * plane}, {9 * plane - 1}]" in done.stdout + done.stderr
