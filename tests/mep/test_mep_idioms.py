"""MEP inference on the idioms real kernels use: stores through class assignments, struct fields, references,
pointer arithmetic and casts; buffers of records (float4, plain structs); ternary bounds. Each MEP is cut from a
small application (`make_app`) and, where it matters, built with nvcc; what must come with a kernel for its MEP to
compile alone is test_mep_builds_alone.py."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from mepgen.spec import load_spec
from mep_apps import make_app, run


def test_stores_through_class_assignments_and_struct_fields_are_writes(tmp_path):
    """`h[i] = __float2half(v)` is a call of __half::operator=, and `p[i].x += v` / `q->x = v` store one
    field of an element: all three parameters are written (a field store is a read-modify-write of the
    element), never inputs the evaluator would not check."""
    app = make_app(tmp_path, """
        #include <cuda_fp16.h>
        #define N 4096
        struct P { float x; float v; };
        __global__ void k(__half* h, P* p, P* q, const float* w, int n)
        {
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {
                h[i] = __float2half(w[i]);
                p[i].x += p[i].v;
                if (i == 0) q->x = 1.0f;
            }
        }
        void go(__half* h, P* p, P* q, const float* w) { k<<<(N + 255) / 256, 256>>>(h, p, q, w, N); }
    """)
    run("k", "-C", app)
    s = load_spec(app / ".mepgen" / "meps" / "k" / "mep.yaml")
    assert [(p.name, p.role) for p in s.params] == [("h", "out"), ("p", "inout"), ("q", "inout"), ("w", "in"),
                                                    ("n", "scalar")]
    assert s.param("h").dtype == "float16" and s.param("h").count == "N"


def test_an_element_address_handed_to_a_device_function_may_be_written(tmp_path):
    """`deposit(&(out[base]), ...)` hands a device function a pointer into `out`, which it accumulates into
    (an atomicAdd there): `out` is written, never an input the evaluator would leave unchecked (the capture
    sweep found such a kernel read as `in`). A pointer into a buffer the callee takes as const stays an input."""
    app = make_app(tmp_path, """
        #define N 8192
        __device__ void deposit(const float* __restrict__ src, float* __restrict__ dst, int k)
        {
            atomicAdd(&dst[2 * k + 1], src[k]);
        }
        __global__ void scatter(const float* a, float* out, float* tally, int base)
        {
            const int k = blockIdx.x * blockDim.x + threadIdx.x;
            if (k < N / 4) {
                deposit(&(a[base]), &(out[base]), k);
                deposit(a + base, tally + base, k);
            }
        }
        void go(const float* a, float* out, float* tally) { scatter<<<N / 4 / 128, 128>>>(a, out, tally, 0); }
    """)
    run("scatter", "-C", app)
    s = load_spec(app / ".mepgen" / "meps" / "scatter" / "mep.yaml")
    assert [(p.name, p.role) for p in s.params] == [("a", "in"), ("out", "inout"), ("tally", "inout"),
                                                    ("base", "scalar")]


def test_a_non_const_reference_to_an_element_is_not_a_read(tmp_path):
    app = make_app(tmp_path, """
        #define N 4096
        __global__ void byref(const float* in, float* out, int n)
        {
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {
                const float& src = in[i];      // a const reference only reads
                float& dst = out[i];           // stores may go through dst
                dst = src + 1.0f;
            }
        }
        void go(const float* in, float* out) { byref<<<(N + 255) / 256, 256>>>(in, out, N); }
    """)
    run("byref", "-C", app)
    s = load_spec(app / ".mepgen" / "meps" / "byref" / "mep.yaml")
    assert (s.param("in").role, s.param("out").role) == ("in", "inout")
    text = (app / ".mepgen" / "meps" / "byref" / "mep.yaml").read_text()
    assert "# out: inout: written and aliased by a local pointer or reference" in text


RECORDS = """
    #include <cuda_runtime.h>
    #define NP 4096
    struct Particle { float x, y, z; float v[3]; };
    struct Tagged { float w; int id; };
    __global__ void push(const float4* __restrict__ forces, Particle* parts, float dt, int n)
    {
        const int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            const float4 f = forces[i];
            parts[i].v[0] += dt * f.x; parts[i].v[1] += dt * f.y; parts[i].v[2] += dt * f.z;
            parts[i].x += dt * parts[i].v[0];
        }
    }
    __global__ void tag(Tagged* t, int n)
    {
        const int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) t[i].id = i;
    }
    void step(const float4* f, Particle* p, Tagged* t)
    {
        push<<<(NP + 127) / 128, 128>>>(f, p, 0.01f, NP);
        tag<<<(NP + 127) / 128, 128>>>(t, NP);
    }
"""


@pytest.mark.nvcc
def test_buffers_of_vector_types_and_plain_structs_are_kept_as_scalars(tmp_path):
    """float4 and a struct of floats become float32 buffers with 4 and 6 lanes per record: generated,
    poisoned and compared like any buffer, handed to the kernel as the record pointer it declares."""
    app = make_app(tmp_path, RECORDS)
    r = run("push", "-C", app)
    assert r.exit_code == 0, r.output
    mep = app / ".mepgen" / "meps" / "push"
    s = load_spec(mep / "mep.yaml")
    f, p = s.param("forces"), s.param("parts")
    assert (f.role, f.dtype, f.count, f.lanes) == ("in", "float32", "NP * 4", 4)
    assert (p.role, p.dtype, p.count, p.lanes) == ("inout", "float32", "NP * 6", 6)
    assert "Particle records of 6 x float32" in (mep / "mep.yaml").read_text()
    assert np.load(mep / "data" / "in" / "parts.npy").shape == (4096 * 6,)
    assert "mep_record_ptr{d_forces}" in (mep / "harness.cu").read_text()
    built = subprocess.run(["make", "-s", "-C", str(mep)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


def test_a_struct_of_mixed_fields_needs_a_person(tmp_path):
    app = make_app(tmp_path, RECORDS)
    r = run("tag", "-C", app)
    assert r.exit_code == 3 and "params[0].dtype" in r.output
    assert load_spec(app / ".mepgen" / "meps" / "tag" / "mep.yaml").param("t").lanes is None


def test_lanes_must_be_a_positive_integer(tmp_path):
    app = make_app(tmp_path, RECORDS)
    run("push", "-C", app)
    yaml_file = app / ".mepgen" / "meps" / "push" / "mep.yaml"
    yaml_file.write_text(yaml_file.read_text().replace("lanes: 4", "lanes: 0"))
    with pytest.raises(Exception, match="lanes must be a positive integer"):
        load_spec(yaml_file)


POINTER_IDIOMS = """
    #include <cuda_runtime.h>
    #define N 4096
    __global__ void ptrarith(const float* in, float* out, int n)
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) *(out + i) = in[i]; }
    __global__ void atomptr(const float* in, float* out, int n)
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) atomicAdd(out + (i % 16), in[i]); }
    __global__ void castvec(const float* in, float* out, int n)
    { int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n / 4) reinterpret_cast<float4*>(out)[i] = reinterpret_cast<const float4*>(in)[i]; }
    __global__ void devset(float* out, int n)
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n / 8) memset(out + 8 * i, 0, 8 * sizeof(float)); }
    __global__ void legacy_in(float* in, float* out, int n)      // an input not declared const
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = 2.0f * in[i]; }
    void go(float* in, float* out)
    {
        ptrarith<<<(N + 255) / 256, 256>>>(in, out, N);
        atomptr<<<(N + 255) / 256, 256>>>(in, out, N);
        castvec<<<(N + 255) / 256, 256>>>(in, out, N);
        devset<<<(N + 255) / 256, 256>>>(out, N);
        legacy_in<<<(N + 255) / 256, 256>>>(in, out, N);
    }
"""


@pytest.mark.parametrize("kernel, roles, out_init", [
    ("ptrarith", {"in": "in", "out": "out"}, None),            # *(out + i) = ...: element i, as out[i]
    ("atomptr", {"in": "in", "out": "inout"}, "zeros"),        # atomicAdd(out + k, v): an accumulator
    ("castvec", {"in": "in", "out": "inout"}, "uniform"),      # stores through a cast mepgen does not follow
    ("devset", {"out": "inout"}, "uniform"),                   # memset(out + 8 * i, ...) in device code
    ("legacy_in", {"in": "in", "out": "out"}, None),           # plain subscripts stay precise
])
def test_a_pointer_used_in_ways_mepgen_does_not_follow_is_never_an_input(tmp_path, kernel, roles, out_init):
    """Stores through pointer arithmetic, casts or device memset must not leave an output unchecked: a
    non-const pointer whose use mepgen cannot follow is read and written (inout)."""
    app = make_app(tmp_path, POINTER_IDIOMS)
    run(kernel, "-C", app)
    s = load_spec(app / ".mepgen" / "meps" / kernel / "mep.yaml")
    assert {p.name: p.role for p in s.params if p.role != "scalar"} == roles
    out = s.param("out")
    assert (out.init.kind if out.init else None) == out_init


def test_conditional_reads_and_first_element_accumulators_are_bounded(tmp_path):
    """`i < n ? x[i] : 0.0f` bounds x like `if (i < n)`; a buffer only used as `atomicAdd(out, v)` or `*out`
    holds one element; `*(y + i)` under `i < n` is y[i]."""
    app = make_app(tmp_path, """
        #define N 4096
        template <int BS> __global__ void block_sum(const float* x, float* out, float* y, int n)
        {
            extern __shared__ float partial[];
            const int i = blockIdx.x * BS + threadIdx.x;
            partial[threadIdx.x] = i < n ? x[i] : 0.0f;
            __syncthreads();
            for (int s = BS / 2; s > 0; s >>= 1) {
                if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
                __syncthreads();
            }
            if (threadIdx.x == 0) atomicAdd(out, partial[0]);
            if (i < n) *(y + i) = 2.0f * x[i];
        }
        void go(const float* x, float* out, float* y)
        {
            block_sum<256><<<(N + 255) / 256, 256, 256 * sizeof(float)>>>(x, out, y, N);
        }
    """)
    r = run("block_sum", "-C", app)
    assert r.exit_code == 0, r.output
    s = load_spec(app / ".mepgen" / "meps" / "block_sum" / "mep.yaml")
    assert [(p.name, p.role, p.count) for p in s.params if p.role != "scalar"] == [
        ("x", "in", "N"), ("out", "inout", "1"), ("y", "out", "N")]
    assert s.param("out").init.kind == "zeros"


def test_an_output_written_under_a_tighter_bound_than_its_size_is_inout(tmp_path):
    """A valid-mode filter writes out[0 .. n-KW] of an n-element buffer: the last KW-1 elements keep what the
    application had there, so `out` is inout (compared whole, its tail included), not an output the harness
    poisons and the evaluator then finds unwritten. An output whose bound is its size stays out."""
    app = make_app(tmp_path, """
        #define N 65536
        #define KW 9
        __global__ void filt(const float* in, const float* w, float* out, float* full, int n)
        {
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n - KW + 1) {
                float s = 0.0f;
                for (int k = 0; k < KW; ++k) s += w[k] * in[i + k];
                out[i] = s;
            }
            if (i < n) full[i] = 2.0f * in[i];
        }
        void go(const float* in, const float* w)
        {
            float *out, *full;
            cudaMalloc(&out, N * sizeof(float));
            cudaMalloc(&full, N * sizeof(float));
            filt<<<(N + 255) / 256, 256>>>(in, w, out, full, N);
        }
    """)
    run("filt", "-C", app)
    s = load_spec(app / ".mepgen" / "meps" / "filt" / "mep.yaml")
    assert s.param("out").role == "inout" and s.param("out").count == "N"
    assert "cover N - KW + 1 of its N elements (65528 of 65536)" in \
        (app / ".mepgen" / "meps" / "filt" / "mep.yaml").read_text()
    assert s.param("out").init is not None
    assert s.param("full").role == "out"


def test_a_value_passed_through_a_macro_parameter_is_a_todo_not_the_parameter_name(tmp_path):
    """`#define STEP(g) advance(g, u, cells)` then `STEP(0.25f)`: libclang spells the call's argument as the
    macro's parameter `g`; written as the value it named nothing (the MEP was called complete). Until mepgen
    follows macro arguments it is a todo saying so; the body's other names (`cells`) still resolve."""
    app = make_app(tmp_path, """
        #define CELLS 8192
        __global__ void damp(float* u, int n, float g)
        { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) u[i] *= g; }
        void advance(float g, float* u, int n) { damp<<<(n + 127) / 128, 128>>>(u, n, g); }
        #define STEP(g) advance(g, u, cells)
        int main()
        {
            float* u;
            int cells = CELLS;
            cudaMalloc(&u, CELLS * sizeof(float));
            STEP(0.25f);
            return 0;
        }
    """)
    run("damp", "-C", app)
    s = load_spec(app / ".mepgen" / "meps" / "damp" / "mep.yaml")
    assert s.param("g").value != "g"
    assert any(t.field.startswith("params[2]") and "macro's parameter" in t.reason for t in s.todo), s.todo
    assert s.param("n").value == "CELLS"
