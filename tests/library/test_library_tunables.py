"""tune_params: the kernel's block, its own tunable sizes, launch bounds and a register cap as one space, on
hand-written specs and kernels (no extraction, no GPU)."""
from __future__ import annotations

import random

import pytest

from mepgen.optimize.library.base import current_launch
from mepgen.optimize.library.launch_bounds import LaunchBounds
from mepgen.optimize.library.launch_config import LaunchConfig
from mepgen.optimize.library.source import KernelSource, Refused
from mepgen.optimize.library.tunables import TuneParams, tunable_sizes
from mepgen.optimize.library.tuning import suggest
from mepgen.spec import load_spec
from library_fixtures import compiles

YAML = """version: 1
kernel: {{name: {name}, id: {name}, source: k.cu, source_sha256: "0", start_byte: 0, end_byte: 1}}
sizes: {{{sizes}}}
params:
  - {{name: src, role: in, ctype: const float *, dtype: float32, count: {count}, init: {{kind: uniform, low: -1.0, high: 1.0}}}}
  - {{name: dst, role: out, ctype: float *, dtype: float32, count: {count}}}
  - {{name: n, role: scalar, ctype: int, dtype: int32, value: {count}}}
constants: []
launch: {{grid: [{grid}], block: [{block}], shared_mem: '0'}}
build: {{arch: sm_90, std: c++17, nvcc_flags: [-O3]}}
verify: {{input_sets: 2, seed: 1, tolerance: {{dst: {{rtol: 0.00001, atol: 0.000001}}}}}}
timing: {{warmup: 5, reps: 50, flush_l2: true}}
todo: []
"""

# a block-wide shared staging area sized by the block macro: launch_config alone cannot change the block
STAGED = """#if defined(MEPGEN_SIZE_CHUNK)
#define CHUNK MEPGEN_SIZE_CHUNK
#endif
__global__ void halve(const float *src, float *dst, int n) {
    __shared__ float stage[CHUNK];
    int i = blockIdx.x * CHUNK + threadIdx.x;
    stage[threadIdx.x] = i < n ? src[i] : 0.0f;
    __syncthreads();
    if (i < n) dst[i] = 0.5f * stage[CHUNK - 1 - threadIdx.x];
}
"""

# the launch alone sets the block
PLAIN = """__global__ void twice(const float *src, float *dst, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = 2.0f * src[i];
}
"""


def make(tmp_path, text, name, sizes, grid, block, count="N"):
    (tmp_path / "mep.yaml").write_text(YAML.format(name=name, sizes=sizes, grid=grid, block=block, count=count))
    spec = load_spec(tmp_path / "mep.yaml")
    return KernelSource(text, spec), spec, current_launch(spec, None)


def test_a_size_the_kernel_bakes_in_is_a_tunable(tmp_path):
    src, spec, launch = make(tmp_path, STAGED, "halve", "N: 65536, CHUNK: 128", "N / CHUNK", "CHUNK")
    with pytest.raises(Refused, match="bakes the block size CHUNK in"):
        LaunchConfig().space(src, spec, launch)
    t = TuneParams()
    space = t.space(src, spec, launch)
    assert "block" not in space
    assert space["size:CHUNK"] == [32, 64, 128, 256, 512]
    assert space["regs"][0] == 0 and space["bounds"][0] == 0
    first = t.first_point(src, spec, launch)
    assert first == {"size:CHUNK": 256, "bounds": 0, "regs": 0}
    rw = t.apply(src, spec, launch, first)
    # the new value is spelled in the kernel's own definition and in its launch: the patch stage writes both back
    # together (the application's macro, which other code may use, is left alone)
    assert "__shared__ float stage[(256)];" in rw.text
    assert "stage[(256) - 1 - threadIdx.x]" in rw.text and "#define CHUNK MEPGEN_SIZE_CHUNK" in rw.text
    assert rw.launch == {"grid": ["N / (256)"], "block": ["(256)"], "shared_mem": "0"}
    assert "CHUNK = 256 in the kernel and its launch (the application's: 128)" in rw.explanation
    # the kernel as it is is never proposed
    with pytest.raises(Refused, match="nothing to change"):
        t.apply(src, spec, launch, {"size:CHUNK": 128})
    # after the sizes changed, mep.yaml's no longer describe the kernel: the launch rewrites leave it alone
    after = KernelSource(rw.text, spec)
    with pytest.raises(Refused, match="already set"):
        t.space(after, spec, launch)
    with pytest.raises(Refused, match="tune_params"):
        LaunchBounds().space(after, spec, launch)


def test_a_use_the_rewrite_cannot_see_keeps_a_size_fixed(tmp_path):
    """A helper the kernel calls, or a macro it uses, that spells the size would keep the old value."""
    helper = STAGED.replace("__global__", "__device__ int last() { return CHUNK - 1; }\n__global__", 1).replace(
        "stage[CHUNK - 1 - threadIdx.x]", "stage[last() - threadIdx.x]")
    src, spec, launch = make(tmp_path, helper, "halve", "N: 65536, CHUNK: 128", "N / CHUNK", "CHUNK")
    assert tunable_sizes(src, spec, launch) == ({}, ["CHUNK: last (a function the kernel calls) spells it (the rewrite "
                                                     "would not change that use)"])
    macro = STAGED.replace("__global__", "#define LAST (CHUNK - 1)\n__global__", 1).replace(
        "stage[CHUNK - 1 - threadIdx.x]", "stage[LAST - threadIdx.x]")
    src, spec, launch = make(tmp_path, macro, "halve", "N: 65536, CHUNK: 128", "N / CHUNK", "CHUNK")
    assert tunable_sizes(src, spec, launch)[1] == ["CHUNK: a macro the kernel uses spells it (the rewrite would not "
                                                   "change that use)"]


def test_a_problem_size_is_not_a_tunable(tmp_path):
    """A size that a buffer's count spells changes the problem, not its decomposition."""
    src, spec, launch = make(tmp_path, STAGED, "halve", "N: 65536, CHUNK: 128", "N / CHUNK", "CHUNK",
                             count="N + CHUNK")
    sizes, why = tunable_sizes(src, spec, launch)
    assert sizes == {} and why == ["CHUNK: mep.yaml's params use it (a problem size)"]


def test_sizes_that_leave_work_uncovered_are_not_offered(tmp_path):
    """The grid rounds down (`N / CHUNK`) and N is not a multiple of the larger values: those would leave the last
    elements without a thread, so the space stops below them."""
    src, spec, launch = make(tmp_path, STAGED, "halve", "N: 384, CHUNK: 128", "N / CHUNK", "CHUNK")
    assert TuneParams().space(src, spec, launch)["size:CHUNK"] == [32, 64, 128]


def test_block_bounds_and_register_cap_move_together(tmp_path):
    src, spec, launch = make(tmp_path, PLAIN, "twice", "N: 65536, BS: 256", "(N + BS - 1) / BS", "BS")
    t = TuneParams()
    space = t.space(src, spec, launch)
    assert space["block"] == [64, 128, 256, 512, 1024] and "size:BS" not in space
    rw = t.apply(src, spec, launch, {"block": 512, "bounds": 2, "regs": 64})
    assert rw.launch["block"] == ["512"] and rw.launch["grid"] == ["(N + 512 - 1) / 512"]
    assert "__launch_bounds__(512, 2)" in rw.text and rw.nvcc_flags == ["-maxrregcount=64"]
    assert t.first_point(src, spec, launch)["block"] == 512
    # hill climbing over the joint space never revisits a point and never proposes the kernel as it is
    seen, rng = {}, random.Random(0)
    for step in range(12):
        p = suggest(space, seen, 1, rng, "hillclimb", t.first_point(src, spec, launch))[0]
        seen[tuple(sorted((k, str(v)) for k, v in p.items()))] = (p, 1.0 - 0.01 * step)
        assert p != {"block": 256, "bounds": 0, "regs": 0}


def test_nothing_to_tune_says_why(tmp_path):
    src, spec, launch = make(tmp_path, PLAIN, "twice", "N: 65536", "(N + 255) / 256", "256")
    spec.build.nvcc_flags.append("-maxrregcount=32")
    text = PLAIN.replace("__global__", "__global__ __launch_bounds__(256)")
    src = KernelSource(text, spec)
    with pytest.raises(Refused, match="no parameter to tune"):
        TuneParams().space(src, spec, launch)


def test_a_rewrite_then_its_parameters(tmp_path):
    """Combinations: block coarsening first, then the search over the coarsened kernel's block; the grid keeps
    following both (the coarsening's stop is written over blockDim, so a new block size keeps it right)."""
    from mepgen.optimize.library.base import apply_chain
    from mepgen.optimize.library.catalog import all_transformations
    src, spec, launch = make(tmp_path, PLAIN, "twice", "N: 65536, BS: 256", "(N + BS - 1) / BS", "BS")
    catalog = {t.name: t for t in all_transformations()}
    text, new_launch, flags = apply_chain(catalog, src.text, spec, [
        {"name": "coarsen_blocks", "params": {"factor": 4, "dim": "x"}},
        {"name": "tune_params", "params": {"block": 512, "bounds": 0, "regs": 32}}])
    assert "if (mepgen_b >= (unsigned int)(((n) + blockDim.x - 1) / blockDim.x)) break;" in text
    assert new_launch["block"] == ["512"] and new_launch["grid"] == ["(((N + 512 - 1) / 512) + 4 - 1) / 4"]
    assert flags == [] and "__global__ __maxnreg__(32)" in text     # the cap in the text: patch carries it


def test_a_replayed_point_this_kernel_does_not_offer_is_refused(tmp_path):
    """A pattern's chain carries another kernel's points: a 2D kernel's block `32x4` replayed on a 1-D launch is
    refused with the reason (it raised ValueError, exit 70, when tune shared patterns between applications)."""
    import pytest
    from mepgen.optimize.library.base import StepRefused, apply_chain
    from mepgen.optimize.library.catalog import all_transformations
    src, spec, launch = make(tmp_path, PLAIN, "twice", "N: 65536, BS: 256", "(N + BS - 1) / BS", "BS")
    catalog = {t.name: t for t in all_transformations()}
    for name in ("launch_config", "tune_params"):
        with pytest.raises(StepRefused) as e:
            apply_chain(catalog, src.text, spec, [{"name": name, "params": {"block": "32x4"}}])
        assert e.value.step == name and "block '32x4' is not one this kernel offers" in str(e.value)
    text, new_launch, _ = apply_chain(catalog, src.text, spec, [{"name": "launch_config", "params": {"block": 128}}])
    assert new_launch["block"] == ["128"]
    with pytest.raises(StepRefused) as e:       # a pattern of another mepgen: a parameter this one does not know
        apply_chain(catalog, src.text, spec, [{"name": "launch_config", "params": {"block_size": 128}}])
    assert "do not fit this kernel or this mepgen (KeyError: 'block')" in str(e.value)


def test_without_a_block_to_move_the_register_cap_comes_first(tmp_path):
    """A literal block the kernel bakes in (`[256]` shared) leaves the register cap and launch bounds to tune."""
    fixed = STAGED.replace("CHUNK", "256").split("#endif\n", 1)[1]
    src, spec, launch = make(tmp_path, fixed, "halve", "N: 65536, CHUNK: 128", "N / 256", "256")
    t = TuneParams()
    assert set(t.space(src, spec, launch)) == {"bounds", "regs"}
    first = t.first_point(src, spec, launch)
    assert first == {"bounds": 0, "regs": 64}
    rw = t.apply(src, spec, launch, first)
    assert rw.nvcc_flags == [] and "__global__ __maxnreg__(64)" in rw.text
    # beside launch bounds (nvcc refuses both on one kernel) the cap is the build flag
    rw = t.apply(src, spec, launch, {"bounds": 2, "regs": 64})
    assert rw.nvcc_flags == ["-maxrregcount=64"] and "__maxnreg__" not in rw.text
    compiles(tmp_path, spec, t.apply(src, spec, launch, first).text)
    # on a kernel capped so, neither a second cap nor launch bounds (nvcc refuses them beside __maxnreg__)
    capped = KernelSource(t.apply(src, spec, launch, first).text, spec)
    with pytest.raises(Refused, match="no parameter to tune"):
        t.space(capped, spec, launch)
    with pytest.raises(Refused, match="__maxnreg__"):
        LaunchBounds().space(capped, spec, launch)
