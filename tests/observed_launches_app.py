"""An application that launches one kernel from one site in a loop over block sizes (64, 128 and 256 threads), and
what a capture of it writes in mep.yaml: `launch.observed`, the configurations CUPTI saw. Shared by the patch and
optimize tests of observed launches and the GPU capture test, with the helpers the patch tests of launches use
(`mepgen` as a user runs it, `variant`: a winner written beside the MEP)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def mepgen(*args, cwd):
    return subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=cwd, capture_output=True, text=True)


def variant(app: Path, name: str, edit, launch=None, kernel: str = "mirror") -> Path:
    """`app/name/kernel.cu`: the MEP's kernel.cu of `kernel` through `edit`; with `launch`, its mep.yaml through it."""
    mep = app / ".mepgen" / "meps" / kernel
    folder = app / name
    folder.mkdir(exist_ok=True)
    (folder / "kernel.cu").write_text(edit((mep / "kernel.cu").read_text()))
    if launch is not None:
        (folder / "mep.yaml").write_text(launch((mep / "mep.yaml").read_text()))
    return folder / "kernel.cu"

# each block reverses its own threads' values: what a launch computes depends on its block
APP = """#include <cstdio>
__global__ void mirror(float* out, const float* in)
{
    unsigned at = blockDim.x * blockIdx.x + threadIdx.x;
    out[at] = in[blockDim.x * blockIdx.x + blockDim.x - threadIdx.x - 1];
}

int main()
{
    const int total = 1 << 20;
    float *in, *out;
    cudaMalloc(&in, total * sizeof(float));
    cudaMalloc(&out, total * sizeof(float));
    for (int threads = 64; threads <= 256; threads *= 2)
        mirror<<<total / threads, threads>>>(out, in);
    cudaDeviceSynchronize();
    printf("done\\n");
    return 0;
}
"""

# the three launches of the loop, as a capture writes them
OBSERVED = ("observed: [{grid: [16384, 1, 1], block: [64, 1, 1], launches: 1}, "
            "{grid: [8192, 1, 1], block: [128, 1, 1], launches: 1}, {grid: [4096, 1, 1], block: [256, 1, 1], launches: 1}]")


def without_varies(mep_yaml: str) -> str:
    """A static MEP's mep.yaml of `mirror` without `launch.varies` (what extract says of the loop's site): the
    launch as a capture's mep.yaml spells it, which carries the configurations instead."""
    return re.sub(r", varies: \{[^{}]*\}", "", mep_yaml)


def with_observed(mep_yaml: str) -> str:
    """A static MEP's mep.yaml of `mirror` with the loop's three launches observed, as a capture would add them."""
    mep_yaml = without_varies(mep_yaml)
    line = next(ln for ln in mep_yaml.splitlines() if ln.startswith("launch: {"))
    return mep_yaml.replace(line, line[:-1] + ", " + OBSERVED + "}")
