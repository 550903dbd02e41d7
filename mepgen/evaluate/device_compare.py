"""Outputs compared with the reference outputs on the GPU, for the pycuda worker (the kernels:
templates/harness/compare.h): only a count comes back. The native harness digests its outputs instead
(output_digest.py): it never holds references.

The rule is verify.compare's, element for element, in the same arithmetic: a floating element (float16, float32,
float64) matches when, in float64, `|got - ref| <= atol + rtol * |ref|` with the difference and the reference
finite (NaN and Inf never match), each operation rounded as numpy rounds it (no fused multiply-add); where the
buffer is poisoned (role `out`) and the reference element still holds the poison (the original leaves it
unwritten), it matches only when it is unwritten in the candidate's output too; integers and bools match bit for
bit. Every other dtype (complex, records) is compared on the host. A mismatch count above zero sends the outputs
back to the parent, which computes the evidence with verify.compare: the device only says "all match" faster.

The perturbation re-check (perturb.recheck) runs there too: the candidate's outputs on the changed inputs against
the original's on the same inputs (the latter masked in place first), how many of the original's elements the
change moved (`followed`, against the reference) and whether it made any non-finite (`broken`); only when all
match does nothing come back. The same kernels tell whether a run wrote into an `in` buffer: its bits against a copy of the input set's (the
worker's _differs), instead of copying every input back to the host after every run.

The references stay on the GPU across candidates, each element XORed with a mask drawn from a key the worker
keeps in its own memory and passes to these kernels by value: a candidate kernel that reads device memory it was
not given finds no reference outputs to copy.
"""
from __future__ import annotations

from pathlib import Path

import jinja2
import numpy as np

from ..templating import template_loader
from .helper_cubin import cached_cubin
from .verify import tolerance_for

BLOCK = 256

#: the kernels' source, beside the harness's other kernels (l2_flush.h, digest.h)
SOURCE_FILE = "compare.h"


def source() -> str:
    text, _, _ = template_loader("harness").get_source(jinja2.Environment(), SOURCE_FILE)
    return text


def kernel_for(dtype: str) -> str | None:
    """The comparison kernel of an output's dtype (without the mask's), or None: compared on the host."""
    dt = np.dtype(dtype)
    if dt.kind == "f" and dt.itemsize in (2, 4, 8):
        return f"mepgen_close{dt.itemsize}"
    if dt.kind in "iub" and dt.itemsize in (1, 2, 4, 8):
        return f"mepgen_same{dt.itemsize}"
    return None


def build_cubin(arch: str, build_dir: Path, timeout: float = 300.0) -> Path:
    """The comparison kernels compiled for `arch` (cached by arch and source); MepgenError when nvcc fails."""
    # -fmad=false besides the _rn intrinsics: no contraction anywhere in the rule
    return cached_cubin(source(), "compare", "the output comparison kernels", arch, build_dir, ("-fmad=false",),
                        timeout)


def rules_for(spec) -> dict[str, list]:
    """Each output the GPU can compare: [kernel, rtol, atol, poisoned] (verify.tolerance_for; poisoned: role out)."""
    rules = {}
    for p in spec.outputs:
        kernel = kernel_for(p.dtype) if p.dtype else None
        if kernel is not None:
            tol = tolerance_for(spec, p.name)
            rules[p.name] = [kernel, float(tol.rtol), float(tol.atol), p.role == "out"]
    return rules
