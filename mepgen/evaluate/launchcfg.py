"""A candidate's own launch configuration (grid, block, dynamic shared memory), for rewrites that change
how many threads a kernel needs (one warp per row instead of one thread, thread coarsening, ...).

The baseline always runs with the launch of mep.yaml. A candidate with an override gets a harness
rendered by mepgen's own template from the spec with only `launch` replaced (native backend), or a cubin
whose launch geometry comes from the overridden spec (pycuda backend), so both sides of a comparison
differ in the kernel and its launch only. An MEP whose harness.cu no longer matches what its mep.yaml
renders (edited by hand, or rendered by an older mepgen) cannot take overrides: the candidate's harness
would differ from the baseline's in more than the launch.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from ..errors import MepgenError
from ..harness import render_harness
from ..spec import Launch, Spec

LAUNCH_KEYS = ("grid", "block", "shared_mem")


def launch_from(spec: Spec, d: dict | Launch | None) -> Launch | None:
    """A Launch from a proposal's `{"grid": [...], "block": [...], "shared_mem": "..."}` (missing keys keep
    mep.yaml's); None when `d` is None or changes nothing."""
    if d is None:
        return None
    if isinstance(d, Launch):
        launch = d
    else:
        unknown = sorted(set(d) - set(LAUNCH_KEYS))
        if unknown:
            raise MepgenError(f"unknown launch key(s) {', '.join(unknown)}: use {', '.join(LAUNCH_KEYS)}")
        dims = {}
        for key in ("grid", "block"):
            value = d.get(key, getattr(spec.launch, key))
            if isinstance(value, (str, int)):
                value = [value]
            if not isinstance(value, (list, tuple)) or not 1 <= len(value) <= 3:
                raise MepgenError(f"launch {key} must be 1 to 3 dimension expressions, not {value!r}")
            dims[key] = [str(v).strip() for v in value]
            if any(not v for v in dims[key]):
                raise MepgenError(f"launch {key} has an empty dimension: {value!r}")
        launch = Launch(grid=dims["grid"], block=dims["block"],
                        shared_mem=str(d.get("shared_mem", spec.launch.shared_mem) or "0"), callee=spec.launch.callee)
    if (launch.grid, launch.block, str(launch.shared_mem)) == (spec.launch.grid, spec.launch.block,
                                                              str(spec.launch.shared_mem)):
        return None
    return launch


def with_launch(spec: Spec, launch: Launch) -> Spec:
    return dataclasses.replace(spec, launch=dataclasses.replace(launch, callee=launch.callee or spec.launch.callee))


def with_flags(spec: Spec, flags) -> Spec:
    """The spec with extra nvcc flags after mep.yaml's own (a candidate built with e.g. -use_fast_math)."""
    if not flags:
        return spec
    return dataclasses.replace(spec, build=dataclasses.replace(spec.build, nvcc_flags=[*spec.build.nvcc_flags,
                                                                                        *flags]))


#: mep.yaml arches that name no one GPU: a cubin (no PTX to fall back on) needs the device's own
_NOT_ONE_ARCH = ("native", "all", "all-major")


@functools.lru_cache(maxsize=None)
def device_arch(arch: str, device: int, physical: bool = False, only=_NOT_ONE_ARCH) -> str:
    """`sm_XY` of GPU `device` (a CUDA ordinal among the visible GPUs; `physical`: nvidia-smi's index) where
    mep.yaml's arch is one of `only` (`native`, `all`): nvcc resolves `-arch=native` by asking the driver, which a
    confined compile cannot reach (no GPU there: nvcc then builds for its default arch, and a cubin for another GPU
    does not load, "no kernel image is available"). Any other arch is kept; so is `native` where nvidia-smi cannot
    say (nvcc's own answer then)."""
    if arch not in only or shutil.which("nvidia-smi") is None:
        return arch
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    which = str(device) if physical or device >= len(visible) else visible[device]   # nvidia-smi counts every GPU
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader", "-i", which],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return arch
    cap = done.stdout.strip().splitlines()[:1]
    if done.returncode != 0 or not cap or not re.fullmatch(r"\d+\.\d+", cap[0].strip()):
        return arch
    major, minor = cap[0].strip().split(".")
    return f"sm_{major}{minor}"


def with_arch(spec: Spec, arch: str) -> Spec:
    """The spec built for `arch` instead of mep.yaml's (device_arch's answer)."""
    if arch == spec.build.arch:
        return spec
    return dataclasses.replace(spec, build=dataclasses.replace(spec.build, arch=arch))


def as_dict(launch: Launch) -> dict:
    return {"grid": list(launch.grid), "block": list(launch.block), "shared_mem": str(launch.shared_mem)}


def stale_harness(spec: Spec, mep_dir: Path) -> str | None:
    """Why the MEP's harness.cu is not what its mep.yaml renders (one of them edited since `mepgen mep`), or None.
    The native backend builds harness.cu as it is (its launch, placements and sizes baked in); the pycuda
    backend follows mep.yaml."""
    mine = Path(mep_dir) / "harness.cu"
    if not mine.is_file():
        return f"{mine} is missing"
    if mine.read_text(errors="replace") == render_harness(spec):
        return None
    return (f"harness.cu is not what mep.yaml renders (one of them edited by hand since `mepgen mep`): the native "
            f"backend runs harness.cu as it is, the pycuda backend follows mep.yaml; `mepgen mep {spec.kernel.id} "
            f"--refresh` renders harness.cu from mep.yaml again")


def candidate_harness(spec: Spec, mep_dir: Path, launch: Launch, build_dir: Path) -> tuple[Path | None, str]:
    """(harness.cu rendered with `launch`, its text), or (None, why) when the MEP cannot take an override."""
    mine = Path(mep_dir) / "harness.cu"
    if stale_harness(spec, mep_dir):
        return None, (f"{mine} differs from what mep.yaml renders (edited by hand or from an older mepgen): a "
                      f"candidate with its own launch configuration needs `mepgen mep {spec.kernel.id} --refresh`")
    text = render_harness(with_launch(spec, launch))
    folder = Path(build_dir) / ("harness-" + hashlib.sha256(text.encode()).hexdigest()[:20])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "harness.cu"
    if not path.is_file() or path.read_text() != text:
        tmp = folder / f"harness.{id(text)}.tmp"
        tmp.write_text(text)
        tmp.replace(path)
    return path, text
