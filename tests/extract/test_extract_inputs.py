"""Flags from compile_commands.json, profiles, the incremental cache, the CLI and bad input."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from mepgen.cli import main
from mepgen.extract import ExtractOptions, extract
from mepgen.extract.flags import parse_command
from mepgen.extract.profile import base_name, load_profile


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "mepgen.cli", *args], capture_output=True, text=True, cwd=cwd)


# --- compile flags --------------------------------------------------------------------------------------

def test_nvcc_only_flags_are_stripped_for_parsing_and_kept_for_the_mep(tmp_path):
    args = ["nvcc", "-O3", "-std=c++17", "-arch=sm_90", "-gencode", "arch=compute_90,code=sm_90", "-rdc=true",
            "-Xcompiler", "-fPIC", "-ccbin", "g++-12", "--expt-relaxed-constexpr", "--expt-extended-lambda",
            "-Iinclude", "-isystem", "/opt/x", "-DNDEBUG", "-D", "NX=512", "-lineinfo", "-c", "src/a.cu",
            "-o", "build/a.o"]
    f = parse_command(args, tmp_path)
    assert f.parse_args == ["-I", str(tmp_path / "include"), "-isystem", "/opt/x", "-D", "NDEBUG", "-D", "NX=512",
                            "-std=c++17"]
    assert f.defines == ["NDEBUG", "NX=512"]
    assert "-gencode" in f.nvcc_args and "--expt-relaxed-constexpr" in f.nvcc_args and "-rdc=true" in f.nvcc_args
    assert "-c" not in f.nvcc_args and "-o" not in f.nvcc_args and "build/a.o" not in f.nvcc_args


def test_compile_commands_from_the_example_makefile(heatcg_copy):
    if shutil.which("make") is None:
        pytest.skip("needs make")
    subprocess.run(["make", "-s", "compile_commands.json"], cwd=heatcg_copy, check=True, capture_output=True)
    inv = extract(heatcg_copy, ExtractOptions(jobs=1))
    assert inv["flags_source"].endswith("compile_commands.json")
    tus = {t["file"]: t for t in inv["translation_units"]}
    assert set(tus) == {"src/analysis.cu", "src/cg.cu", "src/main.cu", "src/stencil.cu"}
    st = tus["src/stencil.cu"]
    assert st["include_dirs"] == [str((heatcg_copy / "include").resolve())]
    assert "NDEBUG" in st["defines"] and "--expt-relaxed-constexpr" in st["nvcc_args"]
    assert len(inv["kernels"]) == 9 and inv["skipped"] == []


def test_defines_change_what_is_parsed_and_the_ranking_inputs(heatcg_copy):
    inv = extract(heatcg_copy, ExtractOptions(defines=["NX=256", "NY=128"], jobs=1))
    assert inv["macros"]["NX"] == "256" and inv["macros"]["NY"] == "128"


# --- profiles -------------------------------------------------------------------------------------------

def test_demangled_names_reduce_to_qualified_names():
    assert base_name("void heat::diffuse_step(const float *, float *, heat::Grid, float, float)") == "heat::diffuse_step"
    assert base_name("void cg::axpy<float>(int, T1, const T1 *, T1 *)") == "cg::axpy"
    assert base_name("void ns::k<ns::Vec<3>, 128>(ns::Vec<3> *)") == "ns::k"
    assert base_name("column_mean") == "column_mean"


NSYS_CSV = '''Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
61.2,"9,120,000",1,9120000.0,9120000.0,9120000,9120000,0.0,"void analysis::dense_matvec(const float *, const float *, float *, int, int)"
20.0,2000000,400,5000.0,5000.0,4900,5200,50.0,"void cg::axpy<float>(int, T1, const T1 *, T1 *)"
1.0,1000000,100,10000.0,10000.0,9000,11000,10.0,"void cg::axpy<double>(int, T1, const T1 *, T1 *)"
10.0,1500000,300,5000.0,5000.0,4900,5100,30.0,"void cg::spmv_csr(int, const int *, const int *, const float *, const float *, float *)"
1.0,100,1,100.0,100.0,100,100,0.0,"void thrust::cuda_cub::core::_kernel_agent<int>(int)"
'''

NCU_CSV = '''==PROF== Connected to process 123
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","heatcg","h","void heat::diffuse_step(const float *, float *, heat::Grid, float, float)","1","7","(32, 8, 1)","(64, 256, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","35.20"
"1","1","heatcg","h","void heat::diffuse_step(const float *, float *, heat::Grid, float, float)","1","7","(32, 8, 1)","(64, 256, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","34.80"
"2","1","heatcg","h","void analysis::histogram(const float *, int, unsigned int *)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","msecond","1.5"
'''


def test_nsys_profile_ranks_by_measured_time(heatcg_copy, tmp_path):
    prof = tmp_path / "prof_cuda_gpu_kern_sum.csv"
    prof.write_text(NSYS_CSV)
    fmt, times = load_profile(prof)
    assert fmt == "nsys" and times["cg::axpy"]["time_ns"] == 3_000_000 and times["cg::axpy"]["launches"] == 500
    inv = extract(heatcg_copy, ExtractOptions(profile=prof, jobs=1))
    ranked = [k["qualified_name"] for k in sorted(inv["kernels"], key=lambda k: k["rank"])]
    assert ranked[:3] == ["analysis::dense_matvec", "cg::axpy", "cg::spmv_csr"]
    assert inv["profile_unmatched"] == ["thrust::cuda_cub::core::_kernel_agent"]
    assert inv["ranking_basis"].startswith("profile (nsys)")


def test_ncu_profile_sums_launches_and_converts_units(heatcg_copy, tmp_path):
    prof = tmp_path / "ncu.csv"
    prof.write_text(NCU_CSV)
    fmt, times = load_profile(prof)
    assert fmt == "ncu"
    assert times["heat::diffuse_step"]["time_ns"] == pytest.approx(70_000.0)
    assert times["analysis::histogram"]["time_ns"] == pytest.approx(1_500_000.0)
    inv = extract(heatcg_copy, ExtractOptions(profile=prof, jobs=1))
    assert [k["qualified_name"] for k in sorted(inv["kernels"], key=lambda k: k["rank"])][:2] == [
        "analysis::histogram", "heat::diffuse_step"]


# --- incremental reparsing ------------------------------------------------------------------------------

def test_second_run_reparses_only_changed_files(heatcg_copy):
    logs: list[str] = []
    extract(heatcg_copy, ExtractOptions(jobs=1), log=logs.append)
    assert "0 unchanged, 4 to parse" in logs[0]
    logs.clear()
    extract(heatcg_copy, ExtractOptions(jobs=1), log=logs.append)
    assert "4 unchanged, 0 to parse" in logs[0]
    # touching a header reparses exactly the translation units that include it
    cfg = heatcg_copy / "include" / "device_math.cuh"
    cfg.write_text(cfg.read_text() + "\n// edited\n")
    logs.clear()
    inv = extract(heatcg_copy, ExtractOptions(jobs=1), log=logs.append)
    assert "2 unchanged, 2 to parse" in logs[0]  # stencil.cu and analysis.cu include it
    assert len(inv["kernels"]) == 9


# --- the CLI and bad input ------------------------------------------------------------------------------

def test_cli_extract_json_and_list(heatcg_copy):
    r = run_cli("extract", str(heatcg_copy), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["kernels"] == 9 and summary["launch_sites"] == 16 and summary["skipped_files"] == []
    r = run_cli("list", "--json", cwd=heatcg_copy / "src")  # found from a subfolder
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["rank"] for row in rows] == list(range(1, 10))
    assert rows[0]["kernel"] == "cg::axpy" and rows[0]["instantiations"] == ["<float>", "<double>"]
    table = run_cli("list", cwd=heatcg_copy).stdout
    assert "cg::axpy<float>" in table and "analysis::histogram" in table


def test_help_everywhere():
    runner = CliRunner()
    for args in (["--help"], ["extract", "--help"], ["list", "--help"]):
        r = runner.invoke(main, args)
        assert r.exit_code == 0 and "Usage:" in r.output


def one_line_error(r, needle: str) -> None:
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("mepgen: ") and needle in lines[0], lines[0]
    assert "Traceback" not in r.stderr


def test_missing_path(tmp_path):
    one_line_error(run_cli("extract", str(tmp_path / "nope")), "no such file or directory")


def test_path_is_a_file(tmp_path):
    f = tmp_path / "a.cu"
    f.write_text("int x;\n")
    one_line_error(run_cli("extract", str(f)), "is not a directory")


def test_tree_without_kernels(tmp_path):
    (tmp_path / "host.cu").write_text("#include <cstdio>\nint main() { std::printf(\"hi\\n\"); }\n")
    one_line_error(run_cli("extract", str(tmp_path)), "no __global__ kernels found")


def test_tree_without_sources(tmp_path):
    (tmp_path / "README").write_text("nothing here\n")
    one_line_error(run_cli("extract", str(tmp_path)), "no CUDA sources")


def test_malformed_compile_commands(heatcg_copy):
    (heatcg_copy / "compile_commands.json").write_text('[{"directory": "/x", "file": ')
    one_line_error(run_cli("extract", str(heatcg_copy)), "compile_commands.json is not valid JSON")


def test_compile_commands_with_bad_entries(heatcg_copy):
    (heatcg_copy / "compile_commands.json").write_text('[{"file": "src/cg.cu"}]')
    one_line_error(run_cli("extract", str(heatcg_copy)), "entry 0 lacks 'file' or 'directory'")


def test_unreadable_compile_commands(heatcg_copy):
    (heatcg_copy / "compile_commands.json").write_bytes(b"[\xff\xfe\x00garbage")
    one_line_error(run_cli("extract", str(heatcg_copy)), "cannot read")


def test_missing_compile_commands_given(heatcg_copy, tmp_path):
    one_line_error(run_cli("extract", str(heatcg_copy), "-p", str(tmp_path / "none.json")),
                   "compile_commands.json not found")


def test_file_that_fails_to_parse_is_skipped_and_counted(heatcg_copy):
    (heatcg_copy / "src" / "broken.cu").write_text(
        "#include \"config.h\"\n__global__ void broken(float* x) { x[0] = undeclared_thing + ; }\n")
    r = run_cli("extract", str(heatcg_copy))
    assert r.returncode == 0, r.stderr
    assert "skipped 1 file(s) with errors in a kernel or what it uses" in r.stdout
    assert "  src/broken.cu: " in r.stdout and "undeclared_thing" in r.stdout     # each file with its first error
    inv = json.loads((heatcg_copy / ".mepgen" / "inventory.json").read_text())
    assert len([k for k in inv["kernels"] if not k.get("unreadable")]) == 9  # the rest continues
    # the broken kernel is listed, unreadable with its error: no MEP, but a capture can still record it
    assert [k["name"] for k in inv["kernels"] if k.get("unreadable")] == ["broken"]
    assert inv["skipped"][0]["file"] == "src/broken.cu" and inv["skipped"][0]["errors"] >= 1
    assert "undeclared_thing" in inv["skipped"][0]["diagnostics"][0]["message"]


def test_bad_profile(heatcg_copy, tmp_path):
    p = tmp_path / "p.csv"
    p.write_text("a,b,c\n1,2,3\n")
    one_line_error(run_cli("extract", str(heatcg_copy), "--profile", str(p)), "not an Nsight Systems")


def test_parsing_needs_no_cuda_headers(tmp_path):
    """Kernels using the toolkit's headers parse through mepgen's shim, not the installed toolkit."""
    (tmp_path / "k.cu").write_text(
        "#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <device_launch_parameters.h>\n"
        "__global__ void half_scale(__half* h, float s, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) h[i] = __float2half(__half2float(h[i]) * s);\n}\n"
        "void go(__half* h, int n) { half_scale<<<(n + 127) / 128, 128>>>(h, 2.0f, n); cudaDeviceSynchronize(); }\n")
    inv = extract(tmp_path, ExtractOptions(jobs=1))
    assert inv["skipped"] == []
    k = inv["kernels"][0]
    assert k["qualified_name"] == "half_scale" and k["params"][0]["pointee_type"] == "__half"
    assert k["launch_sites"][0]["grid"] == "(n + 127) / 128"
    assert [i["spelling"] for i in k["closure"]["includes"]] == ["cuda_runtime.h", "cuda_fp16.h",
                                                                  "device_launch_parameters.h"]


def test_typed_allocations_and_cooperative_launches_parse(tmp_path):
    """The C++ overloads of cuda_runtime.h (typed pointers, default flags) are in the shim: host code that
    nvcc compiles, such as cudaMallocHost(&h, bytes) on a float *, must not make the file unparsable."""
    (tmp_path / "k.cu").write_text(textwrap.dedent("""
        #include <cuda_runtime.h>
        __global__ void scale(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 0.5f; }
        void go(int n, cudaStream_t s)
        {
            float *h = nullptr, *d = nullptr, *m = nullptr, *a = nullptr, *p = nullptr;
            size_t pitch = 0;
            cudaMallocHost(&h, n * sizeof(float));
            cudaHostAlloc(&h, n * sizeof(float), cudaHostAllocDefault);
            cudaMallocManaged(&m, n * sizeof(float));
            cudaMallocAsync(&a, n * sizeof(float), s);
            cudaMallocPitch(&p, &pitch, 256, 256);
            cudaMalloc(&d, n * sizeof(float));
            void* args[] = {&d, &n};
            cudaLaunchCooperativeKernel(scale, dim3(4), dim3(256), args);
            scale<<<(n + 255) / 256, 256>>>(d, n);
        }
    """))
    if shutil.which("nvcc"):      # the same file is valid CUDA for the real compiler
        done = subprocess.run(["nvcc", "-c", "-o", str(tmp_path / "k.o"), str(tmp_path / "k.cu")],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    inv = extract(tmp_path, ExtractOptions(jobs=1))
    assert inv["skipped"] == []
    sites = inv["kernels"][0]["launch_sites"]
    assert [(s["kind"], s["grid"], s["block"]) for s in sites] == [
        ("cudaLaunchCooperativeKernel", "dim3(4)", "dim3(256)"), ("triple_chevron", "(n + 255) / 256", "256")]


HOST_ERRORS = """
    #include <cuda_runtime.h>
    #include <mpi.h>
    #include "generated_config.h"
    #define NX 1024
    __device__ float halve(float v) { return 0.5f * v; }
    __global__ void scale(float* x, int n)
    {
        const int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] = halve(x[i]);
    }
    void step(float* d, int n)
    {
        int minGrid = 0, block = 256;
        cudaOccupancyMaxPotentialBlockSize(&minGrid, &block, scale, 0, 0);   // not declared by the shim
        MPI_Barrier(MPI_COMM_WORLD);                                         // from the missing <mpi.h>
        scale<<<(NX + 255) / 256, 256>>>(d, NX);
    }
"""


@pytest.mark.nvcc
def test_errors_outside_kernels_keep_the_file_and_missing_headers_are_stubbed(tmp_path):
    """Real applications include headers that are on no include path of the scan (<mpi.h> without the MPI
    wrapper's flags, generated headers) and call APIs the shim does not declare: the kernels are still found,
    the file is reported as kept with errors, and the MEP leaves the missing headers out and builds."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.cu").write_text(textwrap.dedent(HOST_ERRORS))
    r = run_cli("-v", "extract", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "kept 1 file(s) whose errors are outside their kernels" in r.stdout
    assert "headers on no include path, stubbed empty: mpi.h, generated_config.h" in r.stderr
    inv = json.loads((tmp_path / ".mepgen" / "inventory.json").read_text())
    assert inv["skipped"] == [] and [t["file"] for t in inv["tolerated"]] == ["src/app.cu"]
    t = inv["tolerated"][0]
    assert t["stubbed_includes"] == ["mpi.h", "generated_config.h"]
    assert all(not d["in_kernel"] for d in t["diagnostics"]) and t["errors"] >= 2
    assert any("cudaOccupancyMaxPotentialBlockSize" in d["message"] for d in t["diagnostics"])
    k = inv["kernels"][0]
    assert k["qualified_name"] == "scale" and [f["name"] for f in k["closure"]["device_functions"]] == ["halve"]
    assert [(s["grid"], s["block"]) for s in k["launch_sites"]] == [("(NX + 255) / 256", "256")]
    r = run_cli("mep", "scale", "-C", str(tmp_path))
    assert r.returncode == 0, r.stderr
    mep = tmp_path / ".mepgen" / "meps" / "scale"
    text = (mep / "kernel.cu").read_text()
    assert "#include <mpi.h>" not in text and "// left out: #include mpi.h" in text
    built = subprocess.run(["make", "-s", "-C", str(mep)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


def test_a_missing_header_the_kernel_needs_still_skips_the_file(tmp_path):
    """With the missing header stubbed, what the kernel needed from it is an error inside the kernel: that
    kernel is unreadable, naming that error (not the missing header alone); the file's other kernel stands."""
    (tmp_path / "k.cu").write_text(textwrap.dedent("""
        #include "physics_types.h"
        __global__ void push(Particle* p, int n)
        {
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) p[i].x += p[i].vx;
        }
        __global__ void clear(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] = 0.0f; }
        void go(Particle* p, float* x, int n) { push<<<1, 32>>>(p, n); clear<<<1, 32>>>(x, n); }
    """))
    (tmp_path / "ok.cu").write_text("__global__ void fine(float* x) { x[threadIdx.x] = 1.0f; }\n"
                                    "void run_fine(float* x) { fine<<<1, 32>>>(x); }\n")
    inv = extract(tmp_path, ExtractOptions(jobs=1))
    by = {k["qualified_name"]: k for k in inv["kernels"]}
    assert sorted(by) == ["clear", "fine", "push"] and inv["skipped"] == []
    assert "Particle" in by["push"]["unreadable"]
    assert not by["clear"].get("unreadable") and not by["fine"].get("unreadable")


def test_the_device_api_kernels_use_parses_without_errors(tmp_path):
    """Math functions without <cmath>, intrinsics, half precision, warp collectives and cooperative groups
    are declared by the shim: a kernel using them is extracted, not skipped."""
    src = Path(__file__).parent.parent / "extract_fixtures" / "device_api.cu"
    shutil.copy(src, tmp_path / "k.cu")
    (tmp_path / "k.cu").write_text(src.read_text() + "void go(const float* a, float* b, double* d, int* c, "
                                   "unsigned long long* u, __half* h, int n) { many<<<(n + 255) / 256, 256>>>"
                                   "(a, b, d, c, u, h, n); }\n")
    if shutil.which("nvcc"):
        done = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-c", "-o", str(tmp_path / "k.o"),
                               str(tmp_path / "k.cu")], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    inv = extract(tmp_path, ExtractOptions(jobs=1))
    assert inv["skipped"] == [] and inv["tolerated"] == []
    k = inv["kernels"][0]
    assert k["qualified_name"] == "many" and [p["name"] for p in k["params"]] == ["a", "b", "d", "c", "u", "h", "n"]
    assert {"atomics", "warp_intrinsics", "block_sync", "cooperative_groups"} <= set(k["features"])
