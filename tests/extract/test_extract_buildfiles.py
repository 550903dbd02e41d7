"""Include folders and defines read from the application's own Makefile / CMakeLists.txt, when there is no
compile_commands.json: a kernel whose header sits in a sibling folder is found, and the flags are stated."""
from __future__ import annotations

import textwrap
from pathlib import Path

from mepgen.extract import ExtractOptions, extract
from mepgen.extract.buildfiles import read_build_files


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


SHARED_HEADER = """
    #pragma once
    #define LANES 4
    __device__ inline float twice(float v) { return 2.0f * v; }
"""
KERNEL = """
    #include "lanes.cuh"
    __global__ void widen(float *out, const float *in, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n * LANES) out[i] = twice(in[i]) + SCALE;
    }
    int main() { float *a, *b; cudaMalloc(&a, 4096); cudaMalloc(&b, 4096); widen<<<4, 256>>>(a, b, 256); }
"""


def test_makefile_sibling_include_folder_and_define_make_the_kernel_parse(tmp_path):
    _write(tmp_path, {
        "shared/lanes.cuh": SHARED_HEADER,
        "app/main.cu": KERNEL,
        "app/Makefile": """
            NVCC = nvcc
            OPT ?= yes
            COMMON := ../shared
            CFLAGS := -std=c++17 -I$(COMMON) -DSCALE=3
            ifeq ($(OPT),yes)
              CFLAGS += -O3
            endif
            ifeq ($(DEBUG),yes)
              CFLAGS += -DNEVER_ON_BY_DEFAULT
            endif
            main: main.o
            \t$(NVCC) $(CFLAGS) main.o -o main
            %.o: %.cu
            \t$(NVCC) $(CFLAGS) -c $< -o $@
            clean:
            \trm -f main *.o -DNOT_A_BUILD_FLAG
        """.replace("\\t", "\t"),
    })
    app = tmp_path / "app"
    build = read_build_files(app)
    assert build.include_dirs == [str((tmp_path / "shared").resolve())]
    assert build.defines == ["SCALE=3"]            # not the DEBUG branch, not the clean recipe
    assert build.std == "c++17"
    inv = extract(app, ExtractOptions(jobs=1, use_cache=False))
    assert [k["name"] for k in inv["kernels"]] == ["widen"] and inv["skipped"] == []
    assert "from Makefile: -I" in inv["flags_source"] and "-DSCALE=3" in inv["flags_source"]
    assert inv["macros"]["SCALE"] == "3"
    assert inv["build_files"]["include_dirs"] == [str((tmp_path / "shared").resolve())]


def test_without_the_build_file_the_same_kernel_is_not_understood(tmp_path):
    _write(tmp_path, {"shared/lanes.cuh": SHARED_HEADER, "app/main.cu": KERNEL})
    inv = extract(tmp_path / "app", ExtractOptions(jobs=1, use_cache=False))
    # the file did not parse: its kernel is listed as unreadable (a capture can still record it), never an MEP
    assert [s["file"] for s in inv["skipped"]] == ["main.cu"]
    assert [k["name"] for k in inv["kernels"]] == ["widen"] and inv["kernels"][0]["unreadable"]


def test_cmake_include_directories_definitions_and_keyword_functions(tmp_path):
    _write(tmp_path, {
        "inc/a.h": "#define A 1\n", "src/b.h": "#define B 1\n",
        "CMakeLists.txt": """
            cmake_minimum_required(VERSION 3.18)
            set(CMAKE_CUDA_STANDARD 14)
            set(HDR ${CMAKE_CURRENT_SOURCE_DIR}/inc)
            include_directories(${HDR})
            add_definitions(-DUSE_FAST=1)
            target_compile_definitions(app PRIVATE TILE=8)
            my_add_program(NAME app SOURCES main.cu INCLUDE_DIRS src COMPILE_DEFINITIONS WIDTH=2)
            target_include_directories(app PRIVATE ${UNSET_ROOT}/include)
        """,
    })
    build = read_build_files(tmp_path)
    assert build.include_dirs == [str((tmp_path / "inc").resolve()), str((tmp_path / "src").resolve())]
    assert build.defines == ["USE_FAST=1", "TILE=8", "WIDTH=2"]
    assert build.std == "c++14"
    assert any("$(UNSET_ROOT)" in n and "does not define" in n for n in build.not_used)


def test_toolkit_and_missing_folders_are_reported_not_used(tmp_path):
    toolkit = tmp_path / "fake-cuda" / "include"
    toolkit.mkdir(parents=True)
    (toolkit / "cuda_runtime.h").write_text("/* the real toolkit */\n")
    _write(tmp_path, {"app/Makefile": f"all:\n\tnvcc -I{toolkit} -I../nowhere -I$(CUDA_HOME)/include -c a.cu\n"})
    build = read_build_files(tmp_path / "app")
    assert build.include_dirs == []
    text = " | ".join(build.not_used)
    assert "CUDA toolkit" in text and "no such folder" in text and "$(CUDA_HOME)" in text


def test_no_build_file_means_no_build_flags(tmp_path):
    assert read_build_files(tmp_path) is None


def test_a_recipe_that_runs_cmake_gives_no_macros(tmp_path):
    (tmp_path / "Makefile").write_text("all:\n\tmkdir -p b && cd b && cmake .. -DSM_ARCH=90 -DCMAKE_BUILD_TYPE=Release\n"
                                       "\tnvcc -DREAL_MACRO=1 -c k.cu\n")
    assert read_build_files(tmp_path).defines == ["REAL_MACRO=1"]


def test_an_include_named_through_a_variable_brings_the_shared_rules_and_their_flags(tmp_path):
    # a suite whose programs share one rules file two folders up: each program's Makefile only names its
    # sources and where the shared folder is, and includes the rules through that variable
    _write(tmp_path, {
        "suite/support/lanes.cuh": SHARED_HEADER,
        "suite/support/rules.mk": """
            all:
            \tnvcc -O2 $(SOURCES) -I$(SUPPORT) -DSCALE=2 -o $(PROGRAM)
            clean:
            \trm -f $(PROGRAM)
        """.replace("\\t", "\t"),
        "suite/group/widen/main.cu": KERNEL,
        "suite/group/widen/Makefile": """
            PROGRAM := widen.exe
            SOURCES := main.cu
            SUPPORT := ../../support
            ifdef NEVER_SET
            include $(SUPPORT)/missing.mk
            endif
            -include ${SUPPORT}/optional-and-absent.mk
            include ${SUPPORT}/rules.mk
        """,
    })
    app = tmp_path / "suite" / "group" / "widen"
    build = read_build_files(app)
    assert build.include_dirs == [str((tmp_path / "suite" / "support").resolve())]
    assert build.defines == ["SCALE=2"]
    inv = extract(app, ExtractOptions(jobs=1, use_cache=False))
    assert [k["name"] for k in inv["kernels"]] == ["widen"] and inv["skipped"] == []
