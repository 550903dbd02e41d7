"""A small MEP whose kernel takes a struct of device pointers by value and a table of pointers, as `mepgen capture
--use` writes one (mep.yaml `buffers` and `relocate`, the application's addresses in the captured bytes): shared by
the CPU tests of the pycuda worker's relocations and the GPU test that runs it on both backends."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import yaml

from mepgen.cbytes import bytes_expression
from mepgen.harness import render_harness, render_makefile
from mepgen.spec import load_spec

N = 1000
#: where the application's allocations were (the captured bytes hold these; the MEP must never pass them)
APP = {"x": 0x7F3A_0000_0000, "w": 0x7F3A_0010_0000, "fa": 0x7F3A_0020_0000, "fb": 0x7F3A_0030_0000}

KERNEL = r"""
struct Particles {
    float *x;                 // positions: written (an allocation reached only through this pointer)
    const float *w;           // weights: one element into the kernel's `weights` parameter
    int n;
};

__global__ void drift(Particles p, const float *const *fields, int nfields, float dt, const float *weights,
                      float *energy)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n) return;
    float f = weights[0];
    for (int j = 0; j < nfields; ++j) f += p.w[i] * fields[j][i];
    p.x[i] += dt * f;
    energy[i] = f * f;
}
"""


def spec_dict(folder: Path) -> dict:
    """mep.yaml's content; the captured files go to `folder`/data/captured."""
    cap = folder / "data" / "captured"
    cap.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    np.save(cap / "x.npy", rng.uniform(-1, 1, N).astype(np.float32).view(np.uint8))
    np.save(cap / "fa.npy", rng.uniform(-1, 1, N).astype(np.float32).view(np.uint8))
    np.save(cap / "fb.npy", rng.uniform(-1, 1, N + 4).astype(np.float32).view(np.uint8))
    np.save(cap / "fields.npy", np.array([APP["fa"], APP["fb"] + 16], np.uint64))
    arg = struct.pack("<QQii", APP["x"], APP["w"] + 4, N, 0)
    reached = lambda name, n, note: {"name": name, "ctype": "unsigned char", "dtype": "uint8", "count": str(n),
                                     "init": {"kind": "file", "path": f"data/captured/{name[8:]}.npy"}, "note": note}
    return {
        "version": 1,
        "kernel": {"name": "drift", "id": "drift", "source": "drift.cu", "source_sha256": "0", "start_byte": 0,
                   "end_byte": 0},
        "sizes": {},
        "params": [
            {"name": "p", "role": "scalar", "ctype": "Particles", "value": bytes_expression("Particles", arg.hex()),
             "relocate": [{"at": 0, "buffer": "reached_x", "offset": 0}, {"at": 8, "buffer": "weights", "offset": 4}]},
            {"name": "fields", "role": "in", "ctype": "const float *const *", "dtype": "uint64", "count": "2",
             "lanes": 1, "init": {"kind": "file", "path": "data/captured/fields.npy"},
             "relocate": [{"at": 0, "buffer": "reached_fa", "offset": 0},
                          {"at": 8, "buffer": "reached_fb", "offset": 16}]},
            {"name": "nfields", "role": "scalar", "ctype": "int", "dtype": "int32", "value": "2"},
            {"name": "dt", "role": "scalar", "ctype": "float", "dtype": "float32", "value": "0.01f"},
            {"name": "weights", "role": "in", "ctype": "const float *", "dtype": "float32", "count": str(N + 1),
             "init": {"kind": "uniform", "low": -1, "high": 1}},
            {"name": "energy", "role": "out", "ctype": "float *", "dtype": "float32", "count": str(N)},
        ],
        "launch": {"grid": [str((N + 127) // 128)], "block": ["128"], "shared_mem": "0", "callee": "drift"},
        "build": {"arch": "native", "std": "c++17", "defines": [], "nvcc_flags": ["-O3"]},
        "verify": {"input_sets": 2, "seed": 1, "tolerance": {"energy": {"rtol": 1.0e-5, "atol": 1.0e-6}}},
        "timing": {"warmup": 2, "reps": 10, "flush_l2": True},
        "buffers": [
            {**reached("reached_x", 4 * N, "positions, written through p.x"), "role": "inout"},
            reached("reached_fa", 4 * N, "a field, read through fields[0]"),
            reached("reached_fb", 4 * (N + 4), "a field, read through fields[1] (16 bytes in)"),
        ],
    }


def write_mep(folder: Path, kernel: str = KERNEL):
    """The MEP folder as `mep` writes one: mep.yaml, kernel.cu, harness.cu, Makefile, data/captured; its spec."""
    folder.mkdir(parents=True, exist_ok=True)
    d = spec_dict(folder)
    (folder / "mep.yaml").write_text(yaml.safe_dump(d, sort_keys=False))
    spec = load_spec(folder / "mep.yaml")
    (folder / "kernel.cu").write_text(kernel)
    (folder / "harness.cu").write_text(render_harness(spec))
    (folder / "Makefile").write_text(render_makefile(spec))
    return spec
