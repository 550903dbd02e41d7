"""MEPs of the example applications (heatcg, examples/kernels) for the library's tests, built once."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mepgen import mepbuild
from mepgen.optimize.library.base import current_launch
from mepgen.optimize.library.source import KernelSource, Refused
from mepgen.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
SIZES = ["--size", "N=4194304", "--size", "NROWS=4194304", "--size", "NNZ=20930584"]


def example_meps(folder: Path, app: str, *mep_args: str) -> dict[str, Path]:
    """examples/APP copied to `folder` (without build outputs or an earlier .mepgen), extracted and cut into MEPs
    by `mepgen mep MEP_ARGS` (run as python -m mepgen.cli: the GPU machine has no console script); MEPs by id."""
    shutil.copytree(REPO / "examples" / app, folder, ignore=shutil.ignore_patterns("build", ".mepgen"))
    subprocess.run([sys.executable, "-m", "mepgen.cli", "extract", "."], cwd=folder, check=True, capture_output=True)
    done = subprocess.run([sys.executable, "-m", "mepgen.cli", "mep", *mep_args], cwd=folder, capture_output=True,
                          text=True)
    # exit 3: some MEP has a todo (heatcg's xpay: `beta = rr_new / rr` is computed at run time); the
    # transformations only need kernel.cu and the spec's launch, which are written either way
    assert done.returncode in (0, 3), done.stderr
    return {d.name: d for d in (folder / ".mepgen" / "meps").iterdir()}


def build_meps(root: Path) -> dict[str, Path]:
    out = {}
    for app, extra in (("heatcg", SIZES), ("kernels", [])):
        out.update(example_meps(root / app, app, "--all", *extra))
    return out


def load(mep: Path, text: str | None = None):
    spec = load_spec(mep / "mep.yaml")
    src = KernelSource(text if text is not None else (mep / "kernel.cu").read_text(), spec)
    return src, spec, current_launch(spec, None)


def build_tiling_meps(root: Path) -> dict[str, Path]:
    """MEPs of every dense kernel and of heatcg's heat::diffuse_step (the tiling transformations' tests)."""
    out = {}
    for app, args in (("dense", ["--all"]), ("heatcg", ["heat::diffuse_step"])):
        out.update(example_meps(root / app, app, *args))
    return out


def rewrite(meps, kernel, t, params):
    src, spec, launch = load(meps[kernel])
    assert set(params) <= set(t.space(src, spec, launch))
    return t.apply(src, spec, launch, params)


def refusal(meps, kernel, t, edit=None) -> str:
    """Why `t` refuses the kernel, optionally after a textual edit (old, new) of its kernel.cu."""
    src, spec, launch = load(meps[kernel])
    if edit is not None:
        assert edit[0] in src.text
        src = KernelSource(src.text.replace(edit[0], edit[1]), spec)
    with pytest.raises(Refused) as e:
        t.space(src, spec, launch)
    return str(e.value)


def ptx_of(mep, spec, rw, tmp_path) -> str:
    """The PTX nvcc makes of a rewrite's kernel.cu, built with the MEP's flags."""
    f, ptx = tmp_path / "kernel.cu", tmp_path / "k.ptx"
    f.write_text(rw.text)
    done = subprocess.run([mepbuild.nvcc_executable(), *mepbuild.build_flags(spec), f"-I{mep}", "-ptx",
                           "-x", "cu", str(f), "-o", str(ptx)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return ptx.read_text()


def dry_run_plans(app_src: Path, work: Path) -> dict:
    """kernel -> (mep folder, spec, dry-run plan) of every MEP of an app of our own (copied to `work`, extracted,
    `mep --all`): each MEP must come out complete."""
    from mepgen.optimize.dry_run import plan
    app = work / app_src.name
    shutil.copytree(app_src, app)
    for args in (["extract", "."], ["mep", "--all"]):
        done = subprocess.run([sys.executable, "-m", "mepgen.cli", *args], cwd=app, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    out = {}
    for mep in sorted((app / ".mepgen" / "meps").iterdir()):
        spec = load_spec(mep / "mep.yaml")
        assert not spec.todo, (mep.name, spec.todo)
        out[mep.name] = (mep, spec, plan(spec, (mep / "kernel.cu").read_text(), app / "dryrun" / mep.name))
    return out


def assert_structural_rewrites_compile(plans: dict, tmp_path: Path) -> None:
    """Every structural candidate of every plan compiles with its MEP's flags (nvcc_cubin)."""
    if shutil.which(mepbuild.nvcc_executable()) is None:
        pytest.skip("no nvcc")
    for kernel, (mep, spec, p) in plans.items():
        for cand in p.candidates:
            if cand["name"] not in p.structural:
                continue
            done = nvcc_cubin(spec, Path(cand["folder"]) / "kernel.cu", tmp_path / f"{kernel}.cubin", mep)
            assert done.returncode == 0, (kernel, cand["name"], done.stderr[-2000:])


#: the start of a C++ program that runs a kernel's threads one after another on the CPU: the kernel's own text and
#: its rewrite go into namespaces `before` and `after` (CPU_SIM % (defines, before, after, main's body))
CPU_SIM = """#include <cstdio>
#include <cstdlib>
#include <vector>
%s
struct D { unsigned x = 0, y = 0, z = 0; };
D blockIdx, threadIdx, blockDim, gridDim;
#define __global__
namespace before {
%s
}
namespace after {
%s
}
int main() {
%s
}
"""


#: the same with a block's threads run at once (std::thread each), `__syncthreads()` a real barrier and `__shared__`
#: arrays static (one per kernel, the blocks run one after another): for rewrites with barriers inside loops.
#: `launch(grid, bx, by, [&] { after::k(...); })` runs a kernel; `launch2(gx, gy, bx, by, ...)` on a 2D grid.
CPU_SIM_BLOCKS = """#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
%s
struct D { unsigned x = 0, y = 0, z = 0; };
thread_local D threadIdx;
D blockIdx, blockDim, gridDim;
std::barrier<> *block_barrier;
#define __global__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __syncthreads() block_barrier->arrive_and_wait()
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };
namespace before {
%s
}
namespace after {
%s
}
template <class F> void launch2(unsigned gx, unsigned gy, unsigned bx, unsigned by, F kernel) {
    blockDim = {bx, by, 1};
    gridDim = {gx, gy, 1};
    for (unsigned g = 0; g < gx * gy; g++) {
        blockIdx = {g %% gx, g / gx, 0};
        std::barrier<> bar(bx * by);
        block_barrier = &bar;
        std::vector<std::thread> threads;
        for (unsigned y = 0; y < by; y++)
            for (unsigned x = 0; x < bx; x++)
                threads.emplace_back([=] { threadIdx = {x, y, 0}; kernel(); });
        for (auto &t : threads) t.join();
    }
}
template <class F> void launch(unsigned grid, unsigned bx, unsigned by, F kernel) { launch2(grid, 1, bx, by, kernel); }
int main() {
%s
}
"""


def assert_same_on_cpu(tmp_path: Path, before: str, after: str, main_body: str, defines: str = "",
                       blocks: bool = False) -> None:
    """Builds CPU_SIM (CPU_SIM_BLOCKS where `blocks`) with g++ and runs it: `main_body` runs both kernels' threads
    in an order of its choice and returns non-zero (printing where) when their results differ."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    (tmp_path / "sim.cpp").write_text((CPU_SIM_BLOCKS if blocks else CPU_SIM) % (defines, before, after, main_body))
    built = subprocess.run([cxx, "-O1", *(["-std=c++20", "-pthread"] if blocks else []), "-o", str(tmp_path / "sim"),
                            str(tmp_path / "sim.cpp")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    try:             # a rewrite that deadlocks its threads (a barrier some never reach) fails instead of hanging
        ran = subprocess.run([str(tmp_path / "sim")], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the CPU simulation did not finish in 120 s: its threads wait on a barrier some never reach")
    assert ran.returncode == 0, ran.stdout


def planned(plan, name: str) -> tuple[dict, str]:
    """The dry run's candidate of transformation `name` and the kernel.cu it wrote."""
    cand = next(c for c in plan.candidates if c["name"] == name)
    return cand, (Path(cand["folder"]) / "kernel.cu").read_text()


def written(folder: Path, yaml_text: str, kernel_text: str):
    """A hand-written MEP's spec (`yaml_text` as mep.yaml in `folder`) and kernel: (KernelSource, spec, launch)."""
    (folder / "mep.yaml").write_text(yaml_text)
    spec = load_spec(folder / "mep.yaml")
    return KernelSource(kernel_text, spec), spec, current_launch(spec, None)


def nvcc_cubin(spec, cu: Path, out: Path, include: Path | None = None) -> subprocess.CompletedProcess:
    """`cu` built as the evaluator builds a candidate: to a cubin, with the MEP's build flags. nvcc's front end reads
    the whole file (host code too); the host compiler's pass, which a candidate never gets, is left out (it doubled
    these checks' time)."""
    folders = [f"-I{include}"] if include else []
    return subprocess.run([mepbuild.nvcc_executable(), *mepbuild.build_flags(spec), *folders, "-cubin", "-x", "cu",
                           str(cu), "-o", str(out)], capture_output=True, text=True)


def compiles(folder: Path, spec, text: str) -> None:
    """`text` compiles as a candidate's kernel.cu with the MEP's build flags (nvcc_cubin)."""
    f = folder / "kernel.cu"
    f.write_text(text)
    done = nvcc_cubin(spec, f, folder / "k.cubin")
    assert done.returncode == 0, done.stderr


# each thread of a 3-D launch (a cell and one of 8 directions) fills its face: energies x values x angles, the
# angles innermost and contiguous, through a helper of its own and an enumerator bound
FACES = """enum { NV = 3 };
__device__ float weight(int a, int e, int v, int o) { return (float)(1 + a) * (float)(e + 1) + (float)(v * o); }
__global__ void faces(const float *src, float *out, int ne, int na, int nx, int ny) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int o = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= nx || y >= ny || o >= 8) return;
    for (int e = 0; e < ne; ++e)
        for (int v = 0; v < NV; v++)
            for (int a = 0; a < na; ++a) {
                const float w = weight(a, e, v, o);
                out[a + na * (v + NV * (e + ne * (x + nx * (y + ny * o))))] /* the face's element */ = src[a] * w;
            }
}
"""


def evaluate_rewrite(tmp_path: Path, mep: Path, spec, rw, rounds: int = 2):
    """A rewrite judged as optimize judges any candidate (GPU): built, verified on every input set, timed against
    the original; the candidate's result."""
    from mepgen.evaluate import Evaluator, Options
    from mepgen.optimize import candidates
    from mepgen.optimize.proposer import Proposal
    ev = Evaluator(spec, mep, Options(rounds=rounds, use_cache=False, backend="pycuda"))
    try:
        ev.prepare()
        return candidates.evaluate(ev, mep, spec, [Proposal(text=rw.text, change=rw.explanation, source="library",
                                                            launch=rw.launch)], tmp_path / "cands")[0]
    finally:
        ev.close()
