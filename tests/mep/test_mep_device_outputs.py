"""Kernels that leave their result in `__device__` variables (the host reads them back with cudaMemcpyFromSymbol):
which variables a kernel writes (extract/global_writes.py), and the MEP that compares them as outputs (mep.yaml
`constants[i].role: inout`): static completion, capture, the spec's checks, both backends' builds."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from device_outputs_app import MIN_AND_SUM
from mepgen.errors import MepgenError
from mepgen.spec import load_spec

# a warp that marks repeated values into a namespace-scope array, a warp minimum and sum left in two scalars, and a
# kernel that only reads a `__device__` table: written in this project's own words
APP = """
#include <cstdio>
#define LANES 32
namespace tally { __device__ int seen[LANES]; }
__device__ float weights[LANES];
__device__ bool repeats(int v) {
  unsigned m = __match_any_sync(0xffffffffu, v);
  return __popc(m) > 1;
}

__global__ void mark_repeats(int n, const int* v) {
  tally::seen[threadIdx.x] = repeats(v[threadIdx.x]) ? 1 : 0;
}

""" + MIN_AND_SUM + """
__global__ void scale(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * weights[i % LANES];
}

int main() {
  const int n = 4096;
  int* v; float* w; float* y;
  cudaMalloc(&v, n * sizeof(int)); cudaMalloc(&w, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
  mark_repeats<<<1, LANES>>>(n, v);
  min_and_sum<<<1, LANES>>>(v, w, n);
  scale<<<n / 256, 256>>>(y, w, n);
  unsigned lo; cudaMemcpyFromSymbol(&lo, lowest, sizeof(lo));
  printf("%u\\n", lo);
  return 0;
}
"""

# every way a body may write a namespace-scope variable, and reads that are no writes
WRITES = """
namespace app { __device__ int hits[32]; __device__ int cnt; }
__device__ unsigned int mask;
__device__ float table[64];
__device__ float* ptr;
__device__ const int fixed = 3;
__constant__ float coef[4];
__device__ int counter;
__device__ int byref;
__device__ int viaarr[8];
struct S { int a; float b[4]; };
__device__ S rec;
__device__ int readonly[16];
__device__ int named;
__device__ void bump(int& x) { x += 1; }
__device__ void fill(int* p) { p[0] = 1; }
__device__ int value_of(int x) { return x; }
__global__ void k1(const int* v) {
  app::hits[threadIdx.x] = v[threadIdx.x];
  if (threadIdx.x == 0) mask = 7;
  float t = table[threadIdx.x] + coef[0] + fixed + readonly[2] + value_of(named);
  ptr[threadIdx.x] = t;
  atomicAdd(&counter, 1);
  app::cnt++;
  bump(byref);
  fill(viaarr + 1);
  rec.b[2] = t;
  int s = sizeof(readonly);
  (void)s;
}
"""


def test_each_way_of_writing_a_variable_is_found_and_reads_are_not(tmp_path):
    from mepgen.extract.global_writes import written_variables
    from mepgen.parsing import clang
    (tmp_path / "k.cu").write_text(WRITES)
    tu = clang.parse(tmp_path / "k.cu", [])
    k1 = next(c for c in tu.cursor.walk_preorder() if c.spelling == "k1" and c.is_definition())
    names = sorted(u.rsplit("@", 1)[-1] for u in written_variables(k1))
    # assigned, ++, atomicAdd(&x), bound to an int&, an array decaying into a call, a member of a record;
    # not: a table only read, writes through a pointer a variable holds, const and __constant__ ones, sizeof,
    # a variable passed by value
    assert names == ["byref", "cnt", "counter", "hits", "mask", "rec", "viaarr"]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from mepgen.extract import ExtractOptions, extract
    from mepgen.mep.generate import generate
    from mepgen.workspace import Workspace
    root = tmp_path_factory.mktemp("app")
    (root / "flags.cu").write_text(APP)
    inv = extract(root, ExtractOptions(jobs=1))
    results = {r.kernel: r for r in generate(Workspace(root), [], every=True, detect_gpu=False)}
    return root, inv, results


def test_extract_marks_the_variables_a_kernel_or_its_callees_write(app):
    _, inv, _ = app
    written = {k["qualified_name"]: sorted(g["qualified_name"] for g in k["closure"]["globals"] if g.get("written"))
               for k in inv["kernels"]}
    # mark_repeats writes through its own statement; the device function it calls writes nothing
    assert written == {"mark_repeats": ["tally::seen"], "min_and_sum": ["lowest", "total"], "scale": []}


def test_static_completion_makes_written_variables_outputs(app):
    _, _, results = app
    spec = results["min_and_sum"].spec
    assert not spec.todo
    consts = {c.name: c for c in spec.constants}
    assert consts["lowest"].role == "inout" and consts["total"].role == "inout"
    assert [o.name for o in spec.outputs] == ["lowest", "total"]
    tol = spec.verify.tolerance
    assert (tol["lowest"].rtol, tol["lowest"].atol) == (0.0, 0.0) and tol["total"].rtol > 0   # a float sum
    assert [o.name for o in results["mark_repeats"].spec.outputs] == ["tally::seen"]
    scale = results["scale"].spec                  # reads its table: an input only
    assert [c.role for c in scale.constants] == [None] and [o.name for o in scale.outputs] == ["y"]
    again = load_spec(results["min_and_sum"].path / "mep.yaml")     # the role survives mep.yaml
    assert [o.name for o in again.outputs] == ["lowest", "total"]


def test_the_harness_reads_written_variables_back_after_each_kept_run(app):
    from mepgen.harness import render_harness
    _, _, results = app
    text = render_harness(results["mark_repeats"].spec)
    assert "cudaMemcpyFromSymbolAsync(d_sym_0, tally::seen, sizeof(tally::seen)" in text
    assert '{"tally::seen", d_sym_0, n_sym_0 * sizeof(int)},' in text           # digested like any output
    assert text.count("harvest();") == 3            # the kept run, the perturbation re-check, the re-check after
    assert 'dir + "/tally::seen.npy"' in text


def test_the_spec_refuses_a_written_variable_it_cannot_compare(app):
    root, _, results = app
    path = results["min_and_sum"].path / "mep.yaml"
    text = path.read_text()
    no_init = text.replace("init: {kind: uniform, low: 0, high: 15}, role: inout", "role: inout")
    with pytest.raises(MepgenError, match="role inout .* needs a dtype, a count and an init"):
        load_spec(path, no_init)
    clash = text.replace("name: lowest,", "name: n,").replace("lowest: {rtol", "n: {rtol")
    with pytest.raises(MepgenError, match="'n' is also a parameter's or a buffer's name"):
        load_spec(path, clash)


def test_a_capture_keeps_the_written_variable_an_output(app, tmp_path):
    from mepgen.capture.mepwrite import write_captured_mep
    from mepgen.workspace import Workspace
    root, inv, _ = app
    ws = Workspace(root)
    k = next(x for x in inv["kernels"] if x["qualified_name"] == "mark_repeats")
    cap = ws.mep_dir(k["id"]) / "data" / "captured"
    (cap / "before").mkdir(parents=True, exist_ok=True)
    np.save(cap / "before" / "v.npy", np.arange(32, dtype=np.int32))
    np.save(cap / "before" / "const.tally.seen.npy", np.zeros(32, np.int32))
    m = {"kernel": "mark_repeats", "params": [
        {"name": "n", "kind": "value", "value": 32, "dtype": "int32", "bytes_hex": "20000000"},
        {"name": "v", "kind": "buffer", "dtype": "int32", "itemsize": 4, "count": 32, "offset_bytes": 0,
         "allocation": 0, "address": 4096, "before": "before/v.npy", "after": None, "written": False,
         "changed_elements": 0, "notes": []}],
        "allocations": [{"id": 0, "bytes": 128, "params": ["v"]}], "relocations": [],
        "constants": [{"name": "tally::seen", "symbol": "_ZN5tally4seenE", "bytes": 128, "ctype": "int", "dtype": "int32",
                       "count": 32, "file": "before/const.tally.seen.npy", "notes": []}],
        "grid": [1, 1, 1], "block": [32, 1, 1], "shared_mem": 0, "launch_index": 0}
    w = write_captured_mep(ws, inv, k, m, detect_gpu=False)
    assert [o.name for o in w.spec.outputs] == ["tally::seen"]
    assert w.spec.constants[0].init.kind == "file"


@pytest.mark.nvcc
def test_meps_with_written_variables_build_on_both_backends(app, tmp_path):
    from mepgen import mepbuild
    from mepgen.evaluate.cubin import Cubin
    from mepgen.evaluate.pycuda_entry import describe, entry_source
    _, _, results = app
    for name in ("mark_repeats", "min_and_sum"):
        r = results[name]
        native = subprocess.run(mepbuild.nvcc_command(r.spec, r.path, r.path / "kernel.cu", tmp_path / name),
                                capture_output=True, text=True, timeout=300)
        assert native.returncode == 0, native.stderr[-2000:]
        entry = tmp_path / f"{name}.entry.cu"
        entry.write_text(entry_source(r.spec, r.path / "kernel.cu"))
        cubin = tmp_path / f"{name}.cubin"
        done = subprocess.run([mepbuild.nvcc_executable(), *mepbuild.build_flags(r.spec), f"-I{r.path}", "-cubin",
                               str(entry), "-o", str(cubin)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        consts = describe(r.spec, Cubin(cubin.read_bytes()))["constants"]
        assert all(c["output"] for c in consts) and consts


def test_a_written_variable_named_like_a_parameter_is_not_an_output(tmp_path):
    """Outputs are named by their names alone: a global `count` that a device function bumps, under a kernel whose
    parameter is also `count`, stays an input with the reason (mep.yaml would be refused otherwise)."""
    from mepgen.extract import ExtractOptions, extract
    from mepgen.mep.generate import generate
    from mepgen.workspace import Workspace
    (tmp_path / "k.cu").write_text("""
__device__ int count;
__device__ void bump() { atomicAdd(&count, 1); }
__global__ void tally(int* out, int count) { bump(); out[threadIdx.x] = count; }
int main() { int* o; cudaMalloc(&o, 32 * sizeof(int)); tally<<<1, 32>>>(o, 5); return 0; }
""")
    extract(tmp_path, ExtractOptions(jobs=1))
    (r,) = generate(Workspace(tmp_path), ["tally"], detect_gpu=False)
    c = r.spec.constants[0]
    assert c.name == "count" and c.role is None and [o.name for o in r.spec.outputs] == ["out"]
    assert "# count: the kernel writes it, but a parameter of the kernel has its name: not compared" \
        in (r.path / "mep.yaml").read_text()
