"""MEPs that compile alone: what a kernel's text relies on comes with it into kernel.cu (namespace aliases and
using-directives, lambdas and local types, a functor a template kernel is launched with, a legacy `half` type,
header macros a kernel redefines, plain char buffers, host constants in a scalar argument). Each MEP is cut from a
small application (`make_app`) and built with nvcc."""
from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from mepgen.extract import ExtractOptions, extract
from mepgen.spec import load_spec
from mep_apps import make_app, run

@pytest.mark.nvcc
def test_namespace_aliases_and_using_directives_come_with_the_kernel(tmp_path):
    app = make_app(tmp_path, """
        #include <cooperative_groups.h>
        #define N 4096
        namespace cg = cooperative_groups;
        namespace phys {
        struct Body { float x, v; };
        __device__ float drift(const Body& b, float dt) { return b.x + dt * b.v; }
        }  // namespace phys
        using namespace phys;
        namespace unrelated { int host_only_counter; }
        using namespace unrelated;
        __global__ void advance(Body* bodies, float dt, int n)
        {
            cg::thread_block block = cg::this_thread_block();
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) bodies[i].x = drift(bodies[i], dt);
            block.sync();
        }
        void go(Body* b) { advance<<<(N + 127) / 128, 128>>>(b, 0.1f, N); }
    """)
    run("advance", "-C", app)
    mep = app / ".mepgen" / "meps" / "advance"
    text = (mep / "kernel.cu").read_text()
    assert "namespace cg = cooperative_groups;" in text and "using namespace phys;" in text
    assert "unrelated" not in text          # a namespace the MEP does not have is not named
    assert text.index("namespace cg =") < text.index("__global__ void advance")
    built = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-c", "-o", str(tmp_path / "k.o"), "-x", "cu",
                            str(mep / "kernel.cu")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


@pytest.mark.nvcc
def test_lambdas_and_local_types_stay_inside_their_function(tmp_path):
    """A lambda local to a kernel, and a struct local to a device function it calls: their types are declared
    inside those functions, which the MEP copies whole. Copied out on their own they cut the text apart (a
    lambda's type spans `[&](...) {...}`: kernel.cu held a stray `[;` and did not compile, on a public decoder)."""
    app = make_app(tmp_path, """
        #define N 4096
        __device__ int span(int a, int b) { struct Pair { int lo, hi; }; Pair p{a, b}; return p.hi - p.lo; }
        __global__ void count(const int* in, int* out, int n)
        {
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            int hits = 0;
            auto see = [&](int k) { if (in[k] > 3) hits += span(k, k + 1); };
            if (i < n) { see(i); if (i + 1 < n) see(i + 1); }
            if (i < n) out[i] = hits;
        }
        void go(const int* in, int* out) { count<<<(N + 255) / 256, 256>>>(in, out, N); }
    """)
    run("count", "-C", app)
    mep = app / ".mepgen" / "meps" / "count"
    text = (mep / "kernel.cu").read_text()
    assert text.count("auto see = [&](int k)") == 1 and text.count("struct Pair") == 1
    assert not any(line.strip().startswith("[") for line in text.splitlines())
    built = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-c", "-o", str(tmp_path / "k.o"), "-x", "cu",
                            str(mep / "kernel.cu")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


@pytest.mark.nvcc
def test_a_functor_a_template_kernel_is_launched_with_comes_with_it(tmp_path):
    """`apply<<<...>>>(x, n, Scale{2.0f})`: the kernel's body only names its template parameter F, the
    launch instantiates it with Scale; Scale (and what it uses) must be in kernel.cu for the MEP to build."""
    app = make_app(tmp_path, """
        #define N 4096
        __device__ float clamp01(float v) { return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v); }
        template <class F> __global__ void apply(float* x, int n, F f)
        {
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) x[i] = f(x[i]);
        }
        struct Scale { float s; __device__ float operator()(float v) const { return clamp01(s * v); } };
        void go(float* x) { apply<<<(N + 255) / 256, 256>>>(x, N, Scale{2.0f}); }
    """)
    r = run("apply", "-C", app)
    assert r.exit_code == 0, r.output
    mep = app / ".mepgen" / "meps" / "apply"
    text = (mep / "kernel.cu").read_text()
    assert "struct Scale" in text and "float clamp01(float v)" in text
    inv = json.loads((app / ".mepgen" / "inventory.json").read_text())
    k = next(k for k in inv["kernels"] if k["name"] == "apply")
    assert [t["name"] for t in k["closure"]["types"]] == ["Scale"]
    built = subprocess.run(["make", "-s", "-C", str(mep)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


@pytest.mark.nvcc
def test_legacy_code_with_its_own_half_type_builds(tmp_path):
    """Mixed-precision codes older than cuda_fp16.h define their own `half`; the harness includes
    <cuda_fp16.h> only for buffers that hold halves, so such an MEP builds."""
    app = make_app(tmp_path, """
        #define N 4096
        struct half { unsigned short bits; };
        __device__ float half_to_float(half h) { return (float)h.bits * (1.0f / 65535.0f); }
        __global__ void widen(const half* in, float* out, int n)
        {
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = half_to_float(in[i]);
        }
        void go(const half* in, float* out) { widen<<<(N + 255) / 256, 256>>>(in, out, N); }
    """)
    r = run("widen", "-C", app, "--size", "N=4096")
    mep = app / ".mepgen" / "meps" / "widen"
    assert "cuda_fp16.h" not in (mep / "harness.cu").read_text(), r.output
    s = load_spec(mep / "mep.yaml")
    assert (s.param("in").dtype, s.param("in").lanes, s.param("in").count) == ("uint16", 1, "N")
    built = subprocess.run(["make", "-s", "-C", str(mep)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


@pytest.mark.nvcc
def test_a_macro_each_kernel_redefines_in_its_body_takes_the_header_macros_it_uses(tmp_path):
    """A kernels file included after a header (`#include "tune.h"` then `#include "kern.cu"`) whose kernels each
    `#define` the same helper macro in their body and `#undef` it after, over the header's tuning macros: the
    MEP must carry the header macros the kernel's own definition uses, and no other kernel's definition of
    the helper (a public application's 25 MEPs came out complete and did not compile)."""
    app = tmp_path / "app"
    (app / "src").mkdir(parents=True)
    (app / "src" / "tune.h").write_text("#define LANES 4\n#define GROUPS 8\n#define N 8192\n")
    (app / "src" / "kern.cu").write_text(textwrap.dedent("""
        __global__ void strided(float* v)
        {
            #define slot(i) ((blockIdx.x * GROUPS + threadIdx.y) * LANES + (i))
            if (slot(0) < N) v[slot(0)] *= 2.0f;
            #undef slot
        }
        __global__ void flat(float* v)
        {
            #define slot(i) (blockIdx.x * blockDim.x + threadIdx.x + (i) * 0)
            if (slot(0) < N) v[slot(0)] += 1.0f;
            #undef slot
        }
    """))
    (app / "src" / "main.cu").write_text(textwrap.dedent("""
        #include "tune.h"
        #include "kern.cu"
        int main()
        {
            float* v;
            cudaMalloc(&v, N * sizeof(float));
            strided<<<N / (GROUPS * LANES), dim3(1, GROUPS)>>>(v);
            flat<<<N / 256, 256>>>(v);
            return 0;
        }
    """))
    extract(app, ExtractOptions(jobs=1))
    run("strided", "-C", app)
    mep = app / ".mepgen" / "meps" / "strided"
    text = (mep / "kernel.cu").read_text()
    assert "define GROUPS" in text and "define LANES" in text
    assert "blockDim.x + threadIdx.x + (i) * 0" not in text       # flat's helper is not strided's
    built = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-c", "-o", str(tmp_path / "k.o"), "-x", "cu",
                            str(mep / "kernel.cu")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


@pytest.mark.nvcc
def test_a_plain_char_buffer_builds_in_the_harness(tmp_path):
    """`const char*` is int8 data, but C++ keeps `char` and the harness's `signed char` apart: the harness passes
    the buffer as the kernel's own pointer type (a public application's complete MEP did not compile natively)."""
    app = make_app(tmp_path, """
        #define ROWS 64
        #define COLS 256
        typedef long count_t;
        __global__ void hamming(const char* bits, count_t* dist)
        {
            int r = blockIdx.x, c = threadIdx.x;
            if (r < ROWS && c < COLS && bits[r * COLS + c] != bits[c]) atomicAdd((unsigned long long*)&dist[r], 1ull);
        }
        void go(const char* b, count_t* d) { hamming<<<ROWS, COLS>>>(b, d); }
    """)
    run("hamming", "-C", app)
    mep = app / ".mepgen" / "meps" / "hamming"
    built = subprocess.run(["make", "-s", "-C", str(mep)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    assert "mep_record_ptr{d_bits}" in (mep / "harness.cu").read_text()


@pytest.mark.nvcc
def test_host_constants_in_a_scalar_argument_are_written_out(tmp_path):
    """`relax<<<...>>>(u, n, STEP / (LIMIT * RATE))` over host-only physical constants: the kernel does not use them,
    so the MEP does not define them; the value is written with their definitions (a public MEP did not compile),
    while an integer macro stays a size."""
    app = make_app(tmp_path, """
        #define N 4096
        #define LIMIT (2.5e3)
        #define RATE 0.5f
        #define STEP 0.001
        __global__ void relax(float* u, int n, float k)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) u[i] *= k; }
        void go(float* u) { relax<<<N / 256, 256>>>(u, N, STEP / (LIMIT * RATE)); }
    """)
    run("relax", "-C", app)
    mep = app / ".mepgen" / "meps" / "relax"
    s = load_spec(mep / "mep.yaml")
    k = s.param("k").value
    assert not {"STEP", "LIMIT", "RATE"} & set(k.replace("(", " ").replace(")", " ").split())
    assert eval(k.replace("0.5f", "0.5")) == pytest.approx(0.001 / (2.5e3 * 0.5))
    assert s.param("n").value == "N" and s.sizes["N"] == 4096
    built = subprocess.run(["make", "-s", "-C", str(mep)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]


@pytest.mark.nvcc
def test_what_a_header_includes_first_comes_first(tmp_path):
    """tables.h includes limits.h (the macro NSTATES) and then declares a typedef sized by it. The MEP copies both
    in the order the compiler reads them; ordered by when each file was first opened, the typedef came before the
    macro and kernel.cu did not compile (a public RNA folding code: 9 kernels)."""
    app = tmp_path / "app"
    (app / "src").mkdir(parents=True)
    (app / "src" / "limits.h").write_text("#pragma once\n#define NSTATES 5\ntypedef int score_t;\n")
    (app / "src" / "tables.h").write_text(textwrap.dedent("""
        #pragma once
        #include "limits.h"
        typedef score_t pair_table_t[NSTATES][NSTATES];
        struct Params { pair_table_t pairs; score_t bonus; };
    """))
    (app / "src" / "k.cu").write_text(textwrap.dedent("""
        #include "tables.h"
        #define N 4096
        __global__ void score(const Params *p, const int *a, const int *b, score_t *out, int n)
        {
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = p->pairs[a[i] % NSTATES][b[i] % NSTATES] + p->bonus;
        }
        void go(const Params *p, const int *a, const int *b, score_t *o) { score<<<(N + 127) / 128, 128>>>(p, a, b, o, N); }
    """))
    extract(app, ExtractOptions(jobs=1))
    run("score", "-C", app)
    mep = app / ".mepgen" / "meps" / "score"
    text = (mep / "kernel.cu").read_text()
    assert text.index("#define NSTATES") < text.index("pair_table_t[NSTATES]") < text.index("struct Params")
    assert text.index("typedef int score_t") < text.index("pair_table_t[NSTATES]")
    built = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-cubin", "-o", str(tmp_path / "k.cubin"), "-x", "cu",
                            str(mep / "kernel.cu")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


@pytest.mark.nvcc
def test_a_macro_that_declares_several_types_comes_with_what_each_of_them_names(tmp_path):
    """`MAKE_VECTORS(float, f);` declares a plain and a padded vector type in one use; the kernel names one of them,
    but the use's whole text comes into kernel.cu, so the template the other one names must come too."""
    app = make_app(tmp_path, """
        namespace geo {
        template <typename T, int N> struct vec { T c[N]; };
        template <typename T> struct padded { T c[3]; T pad; };
        #define MAKE_VECTORS(T, t) using vec3##t = vec<T, 3>; using vec3##t##p = padded<T>;
        MAKE_VECTORS(float, f);
        }  // namespace geo
        using vec3f = geo::vec3f;
        __global__ void lengths(const float* x, float* out, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i >= n) return;
            vec3f v = {{x[3 * i], x[3 * i + 1], x[3 * i + 2]}};
            out[i] = sqrtf(v.c[0] * v.c[0] + v.c[1] * v.c[1] + v.c[2] * v.c[2]);
        }
        int main() { float *x, *o; cudaMalloc(&x, 3 * 4096); cudaMalloc(&o, 4096);
                     lengths<<<4, 256>>>(x, o, 1024); return 0; }
    """)
    r = run("lengths", "-C", app)
    assert r.exit_code == 0, r.output
    mep = app / ".mepgen" / "meps" / "lengths"
    text = (mep / "kernel.cu").read_text()
    assert "MAKE_VECTORS(float, f);" in text and "struct padded" in text
    built = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-c", "-o", str(tmp_path / "k.o"), "-x", "cu",
                            str(mep / "kernel.cu")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


@pytest.mark.nvcc
def test_a_type_brought_in_by_a_using_declaration_comes_with_it(tmp_path):
    """`using geo::vec3f;` then `vec3f v`: libclang shows the use as the type the alias stands for, so the alias and
    the using-declaration are found by name; a kernel spelled from `__global__` (a macro of the parse) has tokens."""
    app = make_app(tmp_path, """
        namespace geo {
        template <typename T, int N> struct vec { T c[N]; };
        using vec3f = vec<float, 3>;
        }  // namespace geo
        using geo::vec3f;
        __global__ void first(const float* x, float* out, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i >= n) return;
            vec3f v = {{x[3 * i], x[3 * i + 1], x[3 * i + 2]}};
            out[i] = v.c[0];
        }
        int main() { float *x, *o; cudaMalloc(&x, 3 * 4096); cudaMalloc(&o, 4096); first<<<4, 256>>>(x, o, 1024);
                     return 0; }
    """)
    r = run("first", "-C", app)
    assert r.exit_code == 0, r.output
    text = (app / ".mepgen" / "meps" / "first" / "kernel.cu").read_text()
    assert "using vec3f = vec<float, 3>;" in text and "using geo::vec3f;" in text
    built = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-c", "-o", str(tmp_path / "k.o"), "-x", "cu",
                            str(app / ".mepgen" / "meps" / "first" / "kernel.cu")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
