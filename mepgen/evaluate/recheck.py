"""The perturbation re-check of a timing session (perturb.py changes the inputs; this judges what came back)."""
from __future__ import annotations

import numpy as np

from ..perturb import BLOCK
from ..spec import Spec
from .results import Mismatch, WrongResult
from .verify import changed_elements, compare, tolerance_for


def recheck(spec: Spec, refs: dict, t, k: int):
    """The perturbation re-check of a timing session `t` (backend.TimingOutput) on input set k, whose reference
    outputs are `refs`: the candidate's outputs on the timed inputs changed in place must equal the original
    kernel's on the same inputs. (results.WrongResult or None, notes for the result)."""
    what = (f"perturbation re-check: {t.perturbed_buffers} input buffer(s) changed in blocks of {BLOCK} "
            f"elements before every timed launch and after timing")
    followed_note = lambda n: what + (f"; the candidate's outputs followed the original's ({n} element(s) changed)"
                                      if n else "; the original's outputs did not change, so the re-check could "
                                      "not tell a reused result from a computed one")
    done = t.perturbed_summary
    if t.perturbed_buffers and done and set(done.get("outputs") or []) == {p.name for p in spec.outputs}:
        return None, [followed_note(int(done.get("followed") or 0)) + " (compared on the GPU)"]
    if not t.perturbed_buffers or not t.perturbed_ref:
        if any("--perturb-seed" in n for n in t.notes):
            return None, []
        return None, ["perturbation: no input of this MEP can be changed safely (perturb.py: random draws or "
                      "captured floating-point values only), so timed launches saw the same inputs and only the "
                      "re-check on another input set guards against reuse"]
    mismatches, followed = [], 0
    broken = [name for name, ref in t.perturbed_ref.items() if ref.dtype.kind == "f" and name in refs
              and (~np.isfinite(ref) & np.isfinite(refs[name])).any()]
    if broken:         # the original itself breaks on the changed inputs: nothing to compare with
        return None, [f"perturbation re-check skipped: the original kernel's {', '.join(broken)} hold NaN or Inf on "
                      "the changed inputs (its inputs are not free to change)"]
    for p in spec.outputs:
        ref, got = t.perturbed_ref.get(p.name), t.perturbed.get(p.name)
        if ref is None:
            continue
        if got is None:
            mismatches.append(Mismatch(p.name, k, "perturbed", int(ref.size), int(ref.size),
                                       note="no output written in the perturbation re-check"))
            continue
        m = compare(p.name, got, ref, tolerance_for(spec, p.name), k, "perturbed", p.role == "out")
        if m:
            mismatches.append(m)
        followed += changed_elements(ref, refs[p.name])
    if mismatches:
        return WrongResult(mismatches), []
    return None, [followed_note(followed)]
