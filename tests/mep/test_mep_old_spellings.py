"""Spellings of older CUDA code that nvcc accepts: launches written `k << < grid, block >> > (args)`, which
clang lexes as `<<` `<` (the launch vanished: "no launch site"), and byte counts written
`sizeof (double) *n`, whose type in parentheses was taken for a cast of `*n`."""
from __future__ import annotations

from mepgen.spec import load_spec
from mep_apps import make_app, run


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


def test_a_branch_chosen_by_a_word_of_the_run_command(tmp_path):
    """`if (strcmp(argv[1], "gen") == 0) n = SIZE; else n = count_lines(argv[1]);` with the run command
    `./app gen`: the generated input's size, stated in mep.yaml as taken from the run command."""
    app = make_app(tmp_path, """
        #include <cstdio>
        #include <cstring>
        #define SIZE 6000
        int count_lines(const char* path) { FILE* f = fopen(path, "r"); int n = 0; fscanf(f, "%d", &n); return n; }
        __global__ void zero(float* v, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) v[i] = 0.0f;
        }
        int main(int argc, char** argv)
        {
            int n = 0;
            if (strcmp(argv[1], "gen") == 0) n = SIZE;
            else n = count_lines(argv[1]);
            float* d;
            cudaMalloc(&d, n * sizeof(float));
            zero<<<(n + 255) / 256, 256>>>(d, n);
            return 0;
        }
    """)
    (app / "run").write_text("./app gen\n")
    (app / ".mepgen").exists() and __import__("shutil").rmtree(app / ".mepgen")
    from mepgen.extract import ExtractOptions, extract
    extract(app, ExtractOptions(jobs=1))
    r = run("zero", "-C", app)
    assert r.exit_code == 0, r.output
    s = load_spec(app / ".mepgen" / "meps" / "zero" / "mep.yaml")
    assert s.todo == [] and 6000 in s.sizes.values()
    assert "passes `gen`" in (app / ".mepgen" / "meps" / "zero" / "mep.yaml").read_text()


def test_a_pointer_declared_through_a_type_macro_is_followed(tmp_path):
    """`VEC *o = (VEC*) out;` in a kernel file the main file includes, VEC a macro for a vector type: libclang
    gives that declaration no tokens, its initializer was lost, and `out` (written only through `o`) came out
    as an input, which the MEP then caught being modified."""
    import textwrap
    from mepgen.extract import ExtractOptions, extract
    app = tmp_path / "app"
    (app / "src").mkdir(parents=True)
    (app / "src" / "kern.cu").write_text(textwrap.dedent("""
        __global__
        void bump(const float* in, float* out)
        {
            VEC *__restrict__ o = (VEC*) out;
            const VEC *a = (const VEC*) in;
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < LEN / 4) { o[i].x += a[i].x; o[i].y += a[i].y; o[i].z += a[i].z; o[i].w += a[i].w; }
        }
    """))
    (app / "src" / "defs.h").write_text("#ifndef LANES\n#define LANES 4\n#endif\n#if LANES == 4\n"
                                        "#define VEC float4\n#else\n#define VEC float2\n#endif\n#define LEN 4096\n")
    (app / "src" / "main.cu").write_text(textwrap.dedent("""
        #include "defs.h"
        #include "kern.cu"
        int main()
        {
            float *in, *out;
            cudaMalloc(&in, LEN * sizeof(float));
            cudaMalloc(&out, LEN * sizeof(float));
            bump<<<LEN / 4 / 128, 128>>>(in, out);
            return 0;
        }
    """))
    extract(app, ExtractOptions(jobs=1))
    run("bump", "-C", app)
    s = load_spec(app / ".mepgen" / "meps" / "bump" / "mep.yaml")
    assert s.param("out").role in ("inout", "out")
    assert s.param("in").role == "in"


def test_an_initializer_is_found_without_tokens():
    """libclang gave no tokens for such declarations in a real application (a kernel file included after the
    header that defines the type macro): the initializer is then the declaration's last expression child, and an
    array's bound is not taken for one."""
    from types import SimpleNamespace as NS
    from mepgen.mep.syntax import init_expr
    kind = lambda name: NS(name=name)
    cast = NS(kind=kind("CSTYLE_CAST_EXPR"))
    ptr = NS(spelling="o", get_tokens=lambda: [], type=NS(get_canonical=lambda: NS(kind=kind("POINTER"))),
             get_children=lambda: [NS(kind=kind("TYPE_REF")), cast])
    assert init_expr(ptr) is cast
    bound = NS(kind=kind("INTEGER_LITERAL"))
    arr = NS(spelling="c", get_tokens=lambda: [], type=NS(get_canonical=lambda: NS(kind=kind("CONSTANTARRAY"))),
             get_children=lambda: [bound])
    assert init_expr(arr) is None
