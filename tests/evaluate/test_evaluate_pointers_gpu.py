"""On a GPU: an MEP whose kernel takes a struct of device pointers by value and a table of pointers (mep.yaml `buffers`
and `relocate`, tests/pointer_mep.py) gives the same outputs and the same verdicts on the native harness and the pycuda
worker, and those outputs are the kernel's arithmetic on the MEP's own buffers (not the application's addresses)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pointer_mep import KERNEL, N, write_mep

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

HONEST = KERNEL.replace("blockIdx.x * blockDim.x + threadIdx.x", "threadIdx.x + blockDim.x * blockIdx.x")
WRONG = KERNEL.replace("p.x[i] += dt * f;", "p.x[i] += 2.0f * dt * f;")


@pytest.fixture(scope="module")
def mep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pointers") / "drift"
    spec = write_mep(folder)
    assert HONEST != KERNEL and WRONG != KERNEL
    (folder / "honest.cu").write_text(HONEST)
    (folder / "wrong.cu").write_text(WRONG)
    return folder, spec


def evaluate(folder, spec, backend: str) -> dict:
    from mepgen.evaluate import Evaluator, Options
    from mepgen.evaluate.batch import evaluate_many
    ev = Evaluator(spec, folder, Options(backend=backend, devices=[0], verify_on_device=False))
    try:
        ev.prepare()
        assert ev.backend_name == backend, ev.backend_why
        w = ev.workers[0]
        outputs = [w.backend.run(w.baseline, s, ev.store.work_dir / f"{backend}{s.index}") for s in ev.sets]
        assert all(o.fault is None for o in outputs), [o.fault for o in outputs]
        base = ev.baseline_result()
        done = evaluate_many(ev, [("honest", folder / "honest.cu"), ("wrong", folder / "wrong.cu")])
        names = ("weights", "reached_x", "reached_fa", "reached_fb")
        inputs = [{n: np.load(Path(s.data_dir) / f"{n}.npy") for n in names} for s in ev.sets]
        return {"outputs": [o.outputs for o in outputs], "inputs": inputs, "base": base,
                "verdicts": {r.name: r for r in done}}
    finally:
        ev.close()


def test_both_backends_agree_on_a_struct_of_captured_pointers(mep):
    pytest.importorskip("pycuda", reason="the pycuda backend needs mepgen[gpu]")
    folder, spec = mep
    got = {b: evaluate(folder, spec, b) for b in ("native", "pycuda")}
    for b, r in got.items():
        # the original verifies: its untouched table of pointers is no modified input on either backend
        assert r["base"].ok, f"{b}: {r['base'].feedback()}"
        assert r["verdicts"]["honest"].status == "ok", f"{b}: {r['verdicts']['honest'].feedback()}"
        wrong = r["verdicts"]["wrong"]
        assert wrong.status == "wrong_result", f"{b}: {wrong.status} {wrong.feedback()}"
        assert [m.output for m in wrong.wrong.mismatches][:1] == ["reached_x"] and not wrong.wrong.inputs_changed
        # what the kernel computes through the MEP's pointers, from the input set's data
        for out, data in zip(r["outputs"], r["inputs"]):
            w = data["weights"]
            fa, fb = data["reached_fa"].view(np.float32), data["reached_fb"].view(np.float32)[4:4 + N]
            f = w[0] + w[1:] * fa + w[1:] * fb
            np.testing.assert_allclose(out["energy"], f * f, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(out["reached_x"].view(np.float32),
                                       data["reached_x"].view(np.float32) + np.float32(0.01) * f, rtol=1e-4, atol=1e-5)
    assert [sorted(o) for o in got["native"]["outputs"]] == [["energy", "reached_x"]] * len(got["native"]["outputs"])
    for n_out, p_out in zip(got["native"]["outputs"], got["pycuda"]["outputs"]):
        for name in n_out:
            np.testing.assert_array_equal(n_out[name], p_out[name])
    assert {k: v.status for k, v in got["native"]["verdicts"].items()} == \
        {k: v.status for k, v in got["pycuda"]["verdicts"].items()}
