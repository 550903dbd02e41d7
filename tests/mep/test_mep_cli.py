"""`mepgen mep` with bad input: unknown kernels, stale inventories, hand edits, unsupported constructs, and
a kernel whose sizes cannot be inferred (reported, never guessed)."""
from __future__ import annotations

import numpy as np
import pytest

from mepgen.extract import ExtractOptions, extract
from mepgen.spec import load_spec
from mep_apps import make_app, run  # noqa: F401  (other test files import them from here too)


@pytest.fixture
def heatcg(heatcg_copy):
    extract(heatcg_copy, ExtractOptions(jobs=2))
    return heatcg_copy


def test_unknown_kernel_lists_the_closest_names(heatcg):
    r = run("diffuse_stp", "-C", heatcg)
    assert r.exit_code == 2
    assert "no kernel named 'diffuse_stp'" in r.output and "heat::diffuse_step" in r.output


def test_no_kernel_and_no_all_is_an_error(heatcg):
    r = run("-C", heatcg)
    assert r.exit_code == 2 and "--all" in r.output


def test_stale_inventory_is_refused_naming_the_file(heatcg):
    (heatcg / "src" / "cg.cu").write_text((heatcg / "src" / "cg.cu").read_text() + "\n// edited\n")
    r = run("cg::dot", "-C", heatcg)
    assert r.exit_code == 2
    assert "inventory is stale: src/cg.cu changed" in r.output and "mepgen extract" in r.output
    assert not (heatcg / ".mepgen" / "meps").exists()


def test_hand_edits_are_kept_refreshed_or_backed_up(heatcg):
    assert run("heat::diffuse_step", "-C", heatcg).exit_code == 0
    mep = heatcg / ".mepgen" / "meps" / "heat.diffuse_step"
    yaml_path = mep / "mep.yaml"
    (mep / "data" / "mine.npy").write_bytes(b"user data")
    yaml_path.write_text(yaml_path.read_text().replace("  NX: 2048", "  NX: 512"))

    r = run("heat::diffuse_step", "-C", heatcg)
    assert r.exit_code == 2 and "edited by hand" in r.output and "--refresh" in r.output
    assert "NX: 512" in yaml_path.read_text()

    r = run("heat::diffuse_step", "--refresh", "-C", heatcg)
    assert r.exit_code == 0, r.output
    assert "-DMEPGEN_SIZE_NX=512" in (mep / "Makefile").read_text()
    assert np.load(mep / "data" / "in" / "u.npy").shape == (512 * 2048,)
    assert (mep / "data" / "mine.npy").read_bytes() == b"user data"   # a person's files survive

    yaml_path.write_text(yaml_path.read_text().replace("timing: {", "timing: {warmpu: 3, "))
    r = run("heat::diffuse_step", "--refresh", "-C", heatcg)
    assert r.exit_code == 2 and "timing.warmpu" in r.output and "mep.yaml:" in r.output

    r = run("heat::diffuse_step", "--force", "-C", heatcg)
    assert r.exit_code == 0, r.output
    assert "NX: 2048" in yaml_path.read_text()
    backups = list(mep.glob("mep.yaml.bak-*"))
    assert len(backups) == 1 and "warmpu" in backups[0].read_text()
    assert not [p for p in mep.parent.iterdir() if p.name.startswith(".")]   # no temporary folders left


def test_size_option_settles_a_todo(heatcg):
    r = run("cg::axpy", "--size", "N=4194304", "-C", heatcg)
    assert r.exit_code == 0, r.output
    s = load_spec(heatcg / ".mepgen" / "meps" / "cg.axpy" / "mep.yaml")
    assert s.sizes["N"] == 4194304 and s.todo == []
    assert run("cg::axpy", "--size", "N=lots", "-C", heatcg).exit_code == 2
    r = run("cg::spmv_csr", "--size", "NROWS=4096", "--size", "NNZ=20000", "-C", heatcg)
    assert r.exit_code == 0, r.output
    s = load_spec(heatcg / ".mepgen" / "meps" / "cg.spmv_csr" / "mep.yaml")
    assert (s.sizes["NROWS"], s.sizes["NNZ"], s.todo) == (4096, 20000, [])


def test_json_summary(heatcg):
    import json
    r = run("analysis::dense_matvec", "--json", "-C", heatcg)
    assert r.exit_code == 0
    out = json.loads(r.output)
    assert out[0]["kernel"] == "analysis::dense_matvec"
    assert [(p["name"], p["role"]) for p in out[0]["params"]] == [
        ("A", "in"), ("x", "in"), ("y", "out"), ("nrows", "scalar"), ("ncols", "scalar")]


UNINFERABLE = """
    #include <cuda_runtime.h>
    __device__ int slot(int i, int n) { return (i * 7919) % n; }
    __global__ void scatter(const float* in, float* out, int n)
    {
        const int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[slot(i, n)] = in[i];
    }
    void run_scatter(const float* in, float* out, int n, cudaStream_t s)
    {
        scatter<<<(n + 255) / 256, 256, 0, s>>>(in, out, n);
    }
"""


def test_uninferable_counts_are_reported_not_guessed(tmp_path):
    app = make_app(tmp_path, UNINFERABLE)
    r = run("scatter", "-C", app)
    assert r.exit_code == 3
    assert "mep.yaml needs a person for: scatter: sizes.N; scatter: params[1].count" in r.output
    s = load_spec(app / ".mepgen" / "meps" / "scatter" / "mep.yaml")
    out = s.param("out")
    # written through an opaque index: not every element is written, so not a plain output
    assert out.role == "inout" and out.count == "OUT_COUNT"
    assert s.param("in").count == "N" and s.param("n").value == "N"
    assert [t.field for t in s.todo] == ["sizes.N", "params[1].count"]
    assert "slot()" in s.todo[1].reason
    text = (app / ".mepgen" / "meps" / "scatter" / "mep.yaml").read_text()
    assert text.count("# TODO(mepgen):") == 3   # at sizes.N, at params[1] and at OUT_COUNT


def test_textures_are_refused_by_name(tmp_path):
    app = make_app(tmp_path, """
        #include <cuda_runtime.h>
        __global__ void fetch(cudaTextureObject_t tex, float* out, int n)
        {
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = static_cast<float>(tex + i);  // a texture object parameter is enough
        }
        void go(cudaTextureObject_t t, float* o) { fetch<<<4, 256>>>(t, o, 1024); }
    """)
    r = run("fetch", "-C", app)
    assert r.exit_code == 2 and "texture" in r.output and "cannot reproduce" in r.output


def test_dynamic_parallelism_is_refused_by_name(tmp_path):
    app = make_app(tmp_path, """
        #include <cuda_runtime.h>
        __global__ void child(float* x, int n)
        {
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) x[i] *= 2.0f;
        }
        __global__ void parent(float* x, int n)
        {
            if (threadIdx.x == 0 && blockIdx.x == 0) child<<<(n + 255) / 256, 256>>>(x, n);
        }
        void go(float* x, int n) { parent<<<1, 32>>>(x, n); }
    """)
    r = run("parent", "-C", app)
    assert r.exit_code == 2 and "dynamic parallelism" in r.output and "cannot reproduce" in r.output
    assert not (app / ".mepgen" / "meps" / "parent").exists()      # nothing half-written


def test_cooperative_launches_are_refused_by_name(tmp_path):
    app = make_app(tmp_path, """
        #include <cuda_runtime.h>
        __global__ void sweep(float* x, int n)
        {
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) x[i] += 1.0f;
        }
        void go(float* x, int n, cudaStream_t s)
        {
            void* args[] = {&x, &n};
            cudaLaunchCooperativeKernel((const void*)sweep, dim3(64), dim3(256), args, 0, s);
        }
    """)
    r = run("sweep", "-C", app)
    assert r.exit_code == 2 and "cooperative launches" in r.output and "cannot reproduce" in r.output


def test_managed_memory_is_named_in_the_spec(tmp_path):
    app = make_app(tmp_path, """
        #include <cuda_runtime.h>
        #define N 4096
        __global__ void scale(float* x, int n)
        {
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) x[i] *= 0.5f;
        }
        void go()
        {
            float* x = nullptr;
            cudaMallocManaged(&x, N * sizeof(float));
            scale<<<(N + 255) / 256, 256>>>(x, N);
        }
    """)
    r = run("scale", "-C", app)
    text = (app / ".mepgen" / "meps" / "scale" / "mep.yaml").read_text()
    assert "x is managed memory in the application; the MEP uses device memory" in text, r.output


def test_size_option_settles_a_count_todo(tmp_path):
    """The todo of an unbounded count says `set sizes.OUT_COUNT`: giving it with --size settles it."""
    app = make_app(tmp_path, UNINFERABLE)
    r = run("scatter", "-C", app, "--size", "N=4096", "--size", "OUT_COUNT=4096")
    assert r.exit_code == 0, r.output
    s = load_spec(app / ".mepgen" / "meps" / "scatter" / "mep.yaml")
    assert s.todo == [] and s.param("out").count == "OUT_COUNT" and s.sizes["OUT_COUNT"] == 4096
    assert "TODO(mepgen)" not in (app / ".mepgen" / "meps" / "scatter" / "mep.yaml").read_text()


def test_configured_arch_wins_and_a_bad_one_is_refused(heatcg):
    (heatcg / ".mepgen" / "config.yaml").write_text("mep: {arch: sm_100a}\n")
    r = run("heat::apply_boundary", "-C", heatcg)
    assert r.exit_code == 0, r.output
    mep = heatcg / ".mepgen" / "meps" / "heat.apply_boundary"
    assert load_spec(mep / "mep.yaml").build.arch == "sm_100a"
    assert "# build.arch: configured (mep.arch)" in (mep / "mep.yaml").read_text()
    assert "-arch=sm_100a" in (mep / "Makefile").read_text()
    (heatcg / ".mepgen" / "config.yaml").write_text("mep: {arch: hopper}\n")
    r = run("heat::apply_boundary", "-C", heatcg, "--force")
    assert r.exit_code != 0 and "mep.arch 'hopper' is not an nvcc real architecture" in r.output
