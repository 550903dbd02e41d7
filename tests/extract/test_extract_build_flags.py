"""The application's nvcc options reach the MEP: read from the Makefile's CUDA compile (flags an included make
file sets) or CMake's CUDA flags, into the translation unit's nvcc_args (which the patch's validation compile
uses too), then mep.yaml's build; and the library never offers a flag the application already builds with."""
from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from mepgen.extract import ExtractOptions, extract
from mepgen.extract.appbuild import read_app_build
from mepgen.mep.buildcfg import build_config, kept_flags

KERNEL = """
    __global__ void damp(float *v, float k, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) v[i] = v[i] * __expf(-k);
    }
    int main() { float *v; cudaMalloc(&v, 4096 * sizeof(float)); damp<<<16, 256>>>(v, 0.1f, 4096); }
"""


def _write(app: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = app / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).replace("\\t", "\t"))
    return app


def _make_app(tmp_path: Path) -> Path:
    return _write(tmp_path / "app", {
        "damp.cu": KERNEL,
        "config/flags.mk": """
            GPU_FLAGS = -use_fast_math -Xptxas -O3,-v --maxrregcount 48
            ARCH_FLAGS = -gencode arch=compute_80,code=sm_80
        """,
        "Makefile": """
            include config/flags.mk
            NVCC ?= nvcc
            CUFLAGS = -O3 $(GPU_FLAGS) $(ARCH_FLAGS) $(UNSET_BY_ANYONE)
            damp: damp.o
            \t$(NVCC) $(CUFLAGS) damp.o -o damp
            %.o: %.cu
            \t$(NVCC) $(CUFLAGS) -c $< -o $@
            run: damp
            \t./damp --fast-mode
        """})


def test_flags_of_an_included_make_file_reach_the_mep_build(tmp_path):
    app = _make_app(tmp_path)
    build = read_app_build(app)
    assert build.sources == ["damp.cu"]                  # from damp.o through the pattern rule
    assert build.nvcc_options[:7] == ["-O3", "-use_fast_math", "-Xptxas", "-O3,-v", "--maxrregcount", "48",
                                      "-gencode"]
    assert any("UNSET_BY_ANYONE" in n for n in build.not_used)    # never guessed
    inv = extract(app, ExtractOptions(jobs=1))
    tu = inv["translation_units"][0]
    assert "-use_fast_math" in tu["nvcc_args"]           # the patch's validation compile reads these
    assert "nvcc options from Makefile" in inv["flags_source"]
    k = inv["kernels"][0]
    b = build_config(inv, k, set(), detect_gpu=False)
    assert b.nvcc_flags == ["-O3", "-use_fast_math", "-Xptxas", "-O3,-v", "--maxrregcount", "48"]
    assert b.arch == "sm_80"                             # -gencode's, with no GPU to detect


def test_cmake_cuda_flags_options_and_architectures(tmp_path):
    app = _write(tmp_path / "app", {"damp.cu": KERNEL, "CMakeLists.txt": """
        cmake_minimum_required(VERSION 3.18)
        project(damp LANGUAGES CUDA)
        set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} --use_fast_math")
        add_executable(damp damp.cu)
        target_compile_options(damp PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-O3> -lineinfo)
        set_target_properties(damp PROPERTIES CUDA_ARCHITECTURES 86)
    """})
    build = read_app_build(app)
    assert build.sources == ["damp.cu"]
    assert build.nvcc_options == ["--use_fast_math", "-Xptxas=-O3", "-lineinfo", "-arch=sm_86"]


def test_value_options_keep_their_values_and_host_only_ones_go():
    assert kept_flags(["-Xptxas", "-v", "-maxrregcount", "32", "-t", "8", "-Xcompiler", "-fopenmp", "-c",
                       "--expt-relaxed-constexpr", "-arch=sm_90", "-o", "x.o"]) == \
        ["-Xptxas", "-v", "-maxrregcount", "32", "--expt-relaxed-constexpr"]


def _spec(flags: list[str]):
    tol = SimpleNamespace(rtol=1e-3, atol=1e-5)
    return SimpleNamespace(build=SimpleNamespace(nvcc_flags=flags), outputs=[SimpleNamespace(name="v")],
                           verify=SimpleNamespace(tolerance={"v": tol}))


def test_a_flag_the_application_uses_is_never_a_candidate():
    from mepgen.optimize.library.compiler_flags import CompilerFlags
    t = CompilerFlags()
    options, _ = t._options(_spec(["-O3"]))
    assert "-use_fast_math" in options and "-Xptxas -O3" in options
    options, why = t._options(_spec(["-O3", "-use_fast_math", "-Xptxas", "-O3,-v"]))
    assert options == [] and any("already builds with -use_fast_math" in w for w in why)
    options, _ = t._options(_spec(["--ptxas-options=-O3"]))
    assert "-Xptxas -O3" not in options


@pytest.mark.nvcc
def test_the_mep_builds_with_the_applications_flags(tmp_path):
    from mepgen import mepbuild
    from mepgen.mep.generate import generate
    from mepgen.workspace import Workspace
    app = _make_app(tmp_path)
    extract(app, ExtractOptions(jobs=1))
    r = generate(Workspace(app), ["damp"], detect_gpu=False)[0]
    assert "-use_fast_math" in r.spec.build.nvcc_flags
    assert "-use_fast_math" in (r.path / "Makefile").read_text()
    cmd = mepbuild.nvcc_command(r.spec, r.path, r.path / "kernel.cu", tmp_path / "mep")
    assert "--maxrregcount" in cmd and "48" in cmd
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=r.path)
    assert done.returncode == 0, done.stderr[-2000:]


def test_text_functions_of_the_makefile_are_expanded(tmp_path):
    """Lists of sources and arch flags made with $(wildcard), $(patsubst), $(addprefix): read, not left empty
    (an empty `-gencode arch=compute_,code=sm_` broke the patch's validation compile)."""
    app = _write(tmp_path / "app", {
        "src/damp.cu": KERNEL, "src/unused_notes.txt": "",
        "Makefile": """
            ARCH ?= sm_80
            SM := $(patsubst sm_%,%,$(ARCH))
            SRCS := $(wildcard src/*.cu)
            OBJS := $(addprefix obj/,$(notdir $(SRCS:.cu=.o)))
            FLAGS = -O2 -gencode arch=compute_$(SM),code=sm_$(SM) $(shell echo never-run)
            all: bin/damp
            bin/damp: $(OBJS)
            \tnvcc $(FLAGS) $^ -o $@
            obj/%.o: src/%.cu
            \tnvcc $(FLAGS) -c $< -o $@
        """})
    build = read_app_build(app)
    assert build.sources == ["src/damp.cu"]
    assert build.nvcc_options == ["-O2", "-gencode", "arch=compute_80,code=sm_80"]


def test_an_arch_this_nvcc_no_longer_builds_is_not_the_meps(monkeypatch):
    """An old application's `-arch sm_20` (nvcc 13 starts at sm_75): the MEP takes the default, not a build that
    cannot start; of several -gencode targets the newest this nvcc knows."""
    from mepgen.mep import buildcfg
    monkeypatch.setattr(buildcfg, "supported_archs", lambda: frozenset({75, 80, 86, 90, 100}))
    assert buildcfg.arch_from_flags(["-arch", "sm_20"]) is None
    assert buildcfg.arch_from_flags(["-gencode", "arch=compute_60,code=sm_60", "-gencode",
                                     "arch=compute_80,code=sm_80"]) == "sm_80"
    assert buildcfg.arch_from_flags(["-arch=sm_90a"]) == "sm_90a"
    inv = {"translation_units": [{"file": "k.cu", "nvcc_args": ["-arch", "sm_20", "-O2"]}], "app_root": "/x"}
    b = build_config(inv, {"file": "k.cu"}, set(), detect_gpu=False)
    assert b.arch == buildcfg.DEFAULT_ARCH and b.nvcc_flags == ["-O2"]
    assert "older than this nvcc supports" in buildcfg.arch_source(inv, {"file": "k.cu"}, b.arch, detect_gpu=False)


def test_host_compiler_options_go_with_their_value():
    assert kept_flags(["--compiler-options", "-fno-strict-aliasing", "-Xcompiler", "-fopenmp", "-O2"]) == ["-O2"]
