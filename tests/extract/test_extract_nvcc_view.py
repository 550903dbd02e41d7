"""Parsing the way nvcc compiles: what nvcc only warns about does not skip a file, names its implicit
headers bring in are known, and launches inside templates or through tables of kernel pointers are found."""
from __future__ import annotations

import textwrap
from pathlib import Path

from mepgen.extract import ExtractOptions, extract


def _app(root: Path, files: dict[str, str]) -> dict:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return extract(root, ExtractOptions(jobs=1, use_cache=False))


def _sites(inv: dict) -> dict[str, list[dict]]:
    return {k["name"]: k["launch_sites"] for k in inv["kernels"]}


def test_narrowing_register_and_implicit_limits_do_not_skip_the_kernel(tmp_path):
    inv = _app(tmp_path, {"clip.cu": """
        __global__ void clip(int *v, int n) {
          register int i = blockIdx.x * blockDim.x + threadIdx.x;
          int bounds[2] = {0.0, 1e6};            // narrowing: a warning for nvcc
          if (i < n) v[i] = v[i] > INT_MAX / 2 ? bounds[1] : (int)(uint8_t)v[i];
        }
        int main() { int *d; void *h = malloc(64); memset(h, 0, 64); cudaMalloc(&d, 64);
                     clip<<<1, 16>>>(d, 16); free(h); }
    """})
    assert inv["skipped"] == []
    assert [s["grid"] for s in _sites(inv)["clip"]] == ["1"]


def test_launches_inside_function_and_class_templates(tmp_path):
    inv = _app(tmp_path, {"t.cu": """
        template <int F, typename T> __global__ void mul(T *x, int n) { int i = threadIdx.x; if (i < n) x[i] *= F; }
        template <typename T> void by_three(T *x, int n) { mul<3, T><<<1, 128>>>(x, n); }
        template <int W> struct Pass { static void go(float *x, int n) { mul<W, float><<<(n + W - 1) / W, W>>>(x, n); } };
        int main() { float *x; cudaMalloc(&x, 512); by_three(x, 100); Pass<32>::go(x, 100); }
    """})
    sites = sorted(_sites(inv)["mul"], key=lambda s: s["line"])
    assert [s["enclosing_function"] for s in sites] == ["by_three", "Pass::go"]
    assert sites[0]["template_args"] == ["3", "T"] and sites[1]["grid"] == "(n + W - 1) / W"


def test_launch_through_a_table_of_kernel_pointers_belongs_to_each_kernel_in_it(tmp_path):
    inv = _app(tmp_path, {"tab.cu": """
        __global__ void up(float *x);
        __global__ void down(float *x);
        typedef void (*step_fn)(float *);
        static step_fn steps[] = {up, down};
        int main() {
          float *x; cudaMalloc(&x, 256);
          for (int s = 0; s < 2; ++s) steps[s]<<<2, 32>>>(x);
        }
        __global__ void up(float *x) { x[threadIdx.x] += 1.0f; }
        __global__ void down(float *x) { x[threadIdx.x] -= 1.0f; }
    """})
    sites = _sites(inv)
    for name in ("up", "down"):
        assert len(sites[name]) == 1, name
        assert sites[name][0]["through"] == "steps[s]" and sites[name][0]["in_loop"]


def test_kernel_declared_in_a_header_defined_in_one_file_launched_in_another(tmp_path):
    inv = _app(tmp_path, {
        "k.h": "__global__ void fill(float *x, float v, int n);\n",
        "k.cu": """
            #include "k.h"
            __global__ void fill(float *x, float v, int n) { int i = threadIdx.x; if (i < n) x[i] = v; }
        """,
        "main.cu": """
            #include "k.h"
            int main() { float *x; cudaMalloc(&x, 256); fill<<<1, 64>>>(x, 2.0f, 64); }
        """,
    })
    sites = _sites(inv)["fill"]
    assert [(s["file"], s["grid"], s["block"]) for s in sites] == [("main.cu", "1", "64")]
