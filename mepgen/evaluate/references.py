"""The input sets and the original's reference outputs (Evaluator.prepare): made once per MEP and input set,
cached by content (store.py). A reference the original cannot produce (a fault, NaN where an output was poisoned)
is the MEP's problem: a MepgenError with the evidence, exit code 3. Their phases go to `Evaluator.spent`
(inputs, references)."""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import MepgenError
from . import device_compare, launchcfg, output_digest
from . import peaks as peaks_mod
from .backend import InputSet
from .store import Store
from .verify import reference_problem, written_region


class LazyInputs(dict):
    """Input set k's arrays, read from the store on first use: the pycuda worker compares the inputs itself
    (inputs_changed), so on that backend the evaluator never holds a copy of every input set."""

    def __init__(self, store: Store):
        super().__init__()
        self.store = store

    def __missing__(self, k: int) -> dict[str, np.ndarray]:
        self[k] = self.store.load_inputs(k)
        return self[k]


def make_inputs(ev) -> None:
    """The input sets the store lacks: the first alone (its time says what the others take), the rest side by side."""
    start = time.monotonic()
    missing = [k for k in range(ev.k) if not ev.store.has_input_set(k)]
    ev.todo["gen"] = len(missing)
    if missing:       # the first alone (its time says what the others take), the others side by side
        mib = ev.store.set_bytes() / 2**20
        if mib >= 64:
            ev.log(f"making {len(missing)} input set(s) of {mib:.0f} MiB")
        t0 = time.monotonic()
        ev.store.input_set(missing[0])
        ev.gen_s, ev.todo["gen"] = time.monotonic() - t0, len(missing) - 1
        ev.check_time()
        if missing[1:]:
            # numpy draws, casts and writes free the GIL
            with ThreadPoolExecutor(min(len(missing) - 1, os.cpu_count() or 1)) as pool:
                list(pool.map(ev.store.input_set, missing[1:]))
        ev.todo["gen"] = 0
    ev.sets = [InputSet(k, ev.store.input_set(k)) for k in range(ev.k)]
    ev._spend("inputs", start)


def compute(ev) -> None:
    """The original's outputs on every input set (from the store where they are already there)."""
    refs_start = time.monotonic()
    ev.inputs = LazyInputs(ev.store)     # read only where a backend hands inputs back to compare
    w = ev.workers[0]
    for s in ev.sets:
        ref = ev.store.load_ref(ev.ref_key, s.index)
        if ref is None:
            ev.check_time()
            ev.log(f"computing reference outputs for input set {s.index}")
            t0 = time.monotonic()
            out = w.backend.run(w.baseline, s, ev.store.work_dir / "reference" / f"set{s.index}")
            if out.fault is not None:
                hint = "" if ev.sandbox == "off" or out.fault.kind not in ("cuda_error", "crash") else (
                    f" (it ran in the sandbox, level {ev.sandbox}: if the GPU or a library is out of its reach "
                    "there, `evaluate.sandbox: off` tells; docs/sandbox.md)")
                raise MepgenError(f"the original kernel fails on input set {s.index}: {out.fault.kind}: "
                                  f"{out.fault.message}{hint}", exit_code=3)
            poisoned = {o.name: o.role == "out" for o in ev.spec.outputs}
            for name, arr in out.outputs.items():
                problem = reference_problem(name, arr, s.index, poisoned.get(name, True))
                if problem:
                    raise MepgenError(problem, exit_code=3)
            ev._saw_baseline(out)
            ev.store.save_ref(ev.ref_key, s.index, out.outputs,
                                {"seed": ev.spec.verify.seed + s.index, "backend": ev.backend_name,
                                 "device": out.record.get("device", ""),
                                 "digests": output_digest.of_run(ev.spec.outputs, out, out.outputs)})
            ref = out.outputs
            ev._saw_run(time.monotonic() - t0)
        ev.todo["ref"] -= 1
        ev.refs[s.index] = ref
        use_digests(ev, s.index, output_digest.stored(ev.store.ref_dir(ev.ref_key, s.index)))
        for name, arr in ref.items():
            if name not in {o.name for o in ev.spec.outputs if o.role == "out"}:
                continue            # only an out buffer is poisoned: an inout one's elements are all data
            region = written_region(name, arr, s.index)
            if region and region not in ev.ref_notes:
                ev.log(region)
                ev.ref_notes.append(region)
    ev._spend("references", refs_start)


def equip(ev) -> None:
    """The workers get what the references tell: the references themselves where outputs are compared on the GPU,
    the notes (a stale harness, outputs written in part), the GPU's measured peaks."""
    if ev.opts.verify_on_device:       # the pycuda worker compares outputs on the GPU (device_compare.py)
        refs_of = lambda k: {p.name: ev.store.ref_dir(ev.ref_key, k) / f"{p.name}.npy"
                             for p in ev.spec.outputs}
        for worker in (w for w in ev.workers if hasattr(w.backend, "use_references")):
            worker.backend.use_references(refs_of, device_compare.rules_for(ev.spec))
    stale = launchcfg.stale_harness(ev.spec, ev.mep_dir)
    for worker in ev.workers:
        if stale and stale not in worker.notes:
            worker.notes.append(stale)
        worker.notes += [n for n in ev.ref_notes if n not in worker.notes]
        if ev.opts.check_peaks:
            try:
                worker.peaks = peaks_mod.get(worker.device, ev.store.build_dir / "peaks")
            except RuntimeError as e:
                worker.notes.append(f"no peak check: {e}")


def use_digests(ev, k: int, digests: dict[str, list[str]]) -> None:
    """From now on an output with a reference digest is not written back where it matches (native.py; off with
    verify_on_device: every output comes back)."""
    for w in (w for w in ev.workers if digests and ev.opts.verify_on_device and hasattr(w.backend, "use_digests")):
        w.backend.use_digests(k, digests)
