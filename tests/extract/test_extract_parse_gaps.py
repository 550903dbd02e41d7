"""A parse gap inside one kernel costs that kernel only: the file's other kernels are read, the one holding the
error is listed as unreadable with it, and a capture can still record its launches (its MEP then a todo).
Block-wide cooperative-groups tiles (`block_tile_memory`) parse with the shim."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np

from mepgen.extract import ExtractOptions, extract

TILES = """
    #include <cooperative_groups.h>
    namespace cg = cooperative_groups;
    __global__ void wide_sum(const float *in, float *out) {
      __shared__ cg::block_tile_memory<256> scratch;
      cg::thread_block block = cg::this_thread_block(scratch);
      auto tile = cg::tiled_partition<64>(block);
      float v = in[block.thread_rank()];
      for (int d = 32; d > 0; d /= 2) v += tile.shfl_down(v, d);
      if (tile.thread_rank() == 0) out[tile.meta_group_rank()] = v;
    }
    __global__ void wide_sum_cuda11(const float *in, float *out) {
      __shared__ cg::experimental::block_tile_memory<4, 256> scratch;
      cg::thread_block block = cg::experimental::this_thread_block(scratch);
      auto tile = cg::experimental::tiled_partition<128>(block);
      out[block.thread_rank()] = in[tile.thread_rank()];
    }
    int main() {
      float *a, *b; cudaMalloc(&a, 1024); cudaMalloc(&b, 1024);
      wide_sum<<<1, 256>>>(a, b); wide_sum_cuda11<<<1, 256>>>(a, b);
    }
"""

# two kernels in one file; the second uses a type no header declares (a gap of the parse, not of the code)
MIXED = """
    __global__ void copy_scaled(const float *src, float *dst, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) dst[i] = 2.0f * src[i];
    }
    __global__ void uses_gap(float *dst, int n) {
      vendor::fancy_scratch<128> scratch;
      int i = threadIdx.x;
      if (i < n) dst[i] = scratch.value(i);
    }
    int main() {
      float *a, *b; cudaMalloc(&a, 4096); cudaMalloc(&b, 4096);
      copy_scaled<<<4, 256>>>(a, b, 1024);
      uses_gap<<<1, 128>>>(b, 128);
    }
"""


ONLY_GAP = """
    __global__ void uses_gap(float *dst, int n) {
      vendor::fancy_scratch<128> scratch;
      if (threadIdx.x < n) dst[threadIdx.x] = scratch.value(threadIdx.x);
    }
"""


def _app(tmp_path: Path, text: str) -> Path:
    app = tmp_path / "app"
    app.mkdir()
    (app / "k.cu").write_text(textwrap.dedent(text))
    return app


def test_block_tile_memory_parses(tmp_path):
    inv = extract(_app(tmp_path, TILES), ExtractOptions(jobs=1))
    assert sorted(k["name"] for k in inv["kernels"]) == ["wide_sum", "wide_sum_cuda11"]
    assert not inv["skipped"] and not any(k.get("unreadable") for k in inv["kernels"])


def test_an_error_inside_one_kernel_keeps_the_files_other_kernels(tmp_path):
    from mepgen.mep.generate import Failed, generate
    from mepgen.workspace import Workspace
    app = _app(tmp_path, MIXED)
    inv = extract(app, ExtractOptions(jobs=1))
    by = {k["name"]: k for k in inv["kernels"]}
    assert not by["copy_scaled"].get("unreadable") and by["copy_scaled"]["launch_sites"]
    assert "vendor" in by["uses_gap"]["unreadable"] and by["uses_gap"]["unreadable"].startswith("k.cu:")
    assert inv["skipped"] == []
    failed: list[Failed] = []
    done = generate(Workspace(app), [], every=True, detect_gpu=False, failed=failed)
    assert [r.kernel for r in done] == ["copy_scaled"] and not done[0].spec.todo
    assert len(failed) == 1 and "could not read uses_gap" in failed[0].reason and "capture" in failed[0].reason


def test_a_file_whose_only_kernel_is_unreadable_still_lists_it_for_the_capture(tmp_path):
    from mepgen.capture.mepwrite import write_captured_mep
    from mepgen.capture.names import choose_kernel
    from mepgen.capture.plan import make_plan
    from mepgen.workspace import Workspace
    app = _app(tmp_path, ONLY_GAP)
    inv = extract(app, ExtractOptions(jobs=1))
    assert [k["name"] for k in inv["kernels"]] == ["uses_gap"] and inv["kernels"][0]["unreadable"]
    assert [s["file"] for s in inv["skipped"]] == ["k.cu"]          # still said: the file did not parse
    choice = choose_kernel(inv, "uses_gap")
    plan = make_plan(choice, tmp_path / "raw", app_root=app)
    assert [(p.name, p.kind) for p in plan.params] == [("dst", "pointer"), ("n", "value")]
    ws = Workspace(app)
    k = choice.kernel
    cap = ws.mep_dir(k["id"]) / "data" / "captured"
    (cap / "before").mkdir(parents=True)
    (cap / "after").mkdir(parents=True)
    np.save(cap / "before" / "dst.npy", np.zeros(128, np.float32))
    np.save(cap / "after" / "dst.npy", np.ones(128, np.float32))
    m = {"kernel": "uses_gap", "launch_index": 0, "grid": [1, 1, 1], "block": [128, 1, 1], "shared_mem": 0,
         "params": [{"name": "dst", "kind": "buffer", "dtype": "float32", "itemsize": 4, "count": 128,
                     "offset_bytes": 0, "allocation": 0, "address": 1 << 21, "before": "before/dst.npy",
                     "after": "after/dst.npy", "written": True, "changed_elements": 128, "notes": []},
                    {"name": "n", "kind": "value", "value": 128, "dtype": "int32", "bytes_hex": "80000000"}],
         "allocations": [{"id": 0, "bytes": 512, "params": ["dst"]}], "relocations": [], "constants": []}
    (cap / "manifest.json").write_text(json.dumps(m))
    w = write_captured_mep(ws, inv, k, m, detect_gpu=False)
    assert len(w.todo) == 1 and w.todo[0].startswith("kernel: extract could not read the kernel")
    assert w.spec.launch.grid == ["1"] and w.spec.params[1].value == "128"     # the capture's values stand


def test_bfloat16_bit_casts_and_pair_atomics_parse(tmp_path):
    app = _app(tmp_path, """
        #include <cuda_bf16.h>
        __global__ void bump_pairs(__nv_bfloat16 *acc, int n) {
          int t = blockIdx.x * blockDim.x + threadIdx.x;
          if (t >= n) return;
          __nv_bfloat162 one {__ushort_as_bfloat16((unsigned short)0x3f80U), __short_as_bfloat16(0)};
          atomicAdd(reinterpret_cast<__nv_bfloat162 *>(acc) + t, one);
          acc[0] = __ushort_as_bfloat16(__bfloat16_as_ushort(acc[0]));
        }
    """)
    inv = extract(app, ExtractOptions(jobs=1))
    assert [k["name"] for k in inv["kernels"]] == ["bump_pairs"] and not inv["kernels"][0].get("unreadable")


def test_eight_bit_floats_parse(tmp_path):
    """<cuda_fp8.h>'s types, their vector forms built from halves and bfloat16 pairs, and its conversion
    intrinsics: a public bias kernel was unreadable (`__nv_fp8_e4m3` undeclared: the parse shim had no such header)."""
    app = _app(tmp_path, """
        #include <cuda_fp8.h>
        __global__ void to_fp8(const float *x, __nv_fp8_e4m3 *y, __nv_fp8x4_e4m3 *y4, unsigned char *raw, int n) {
          int t = blockIdx.x * blockDim.x + threadIdx.x;
          if (t >= n) return;
          y[t] = __nv_fp8_e4m3(x[t] * (float)y[0]);
          __nv_bfloat162 lo = __float2bfloat162_rn(x[t]), hi = __bfloat162bfloat162(__float2bfloat16(x[t]));
          y4[t] = __nv_fp8x4_e4m3(lo, hi);
          raw[t] = __nv_cvt_float_to_fp8(x[t], __NV_SATFINITE, __NV_E5M2);
        }
    """)
    inv = extract(app, ExtractOptions(jobs=1))
    assert [k["name"] for k in inv["kernels"]] == ["to_fp8"] and not inv["kernels"][0].get("unreadable")
