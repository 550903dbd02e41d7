"""On a GPU: the native harness's output digests (templates/harness/digest.h) are output_digest.py's, on aligned
and unaligned buffers of any length; a run of the original writes no output back; and the native judge with digests
gives every variant of the adversarial suite the verdict of the judge of old (every output written back and
compared in the parent)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from mepgen import mepbuild
from mepgen.evaluate import output_digest
from mepgen.templating import _SOURCE_TREE

pytestmark = pytest.mark.gpu
sys.path.insert(0, str(ROOT / "bench"))


@pytest.fixture(scope="module")
def app():
    import adversarial
    return adversarial.prepare_app(None, sorted(p.name for p in adversarial.SUITE.iterdir() if p.is_dir()))


@pytest.fixture(scope="module")
def digest_kernel(tmp_path_factory):
    cuda = pytest.importorskip("pycuda.driver")
    cuda.init()
    ctx = cuda.Device(0).make_context()
    cc = "".join(str(v) for v in cuda.Device(0).compute_capability())
    d = tmp_path_factory.mktemp("digest")
    (d / "digest.cu").write_text((_SOURCE_TREE / "harness" / "digest.h").read_text())
    subprocess.run([mepbuild.nvcc_executable(), f"-arch=sm_{cc}", "-cubin", str(d / "digest.cu"), "-o",
                    str(d / "digest.cubin")], check=True)
    yield cuda, cuda.module_from_buffer((d / "digest.cubin").read_bytes()).get_function("mepgen_digest")
    ctx.pop()


@pytest.mark.parametrize("offset", [0, 1, 3, 8])
@pytest.mark.parametrize("nbytes", [0, 5, 8, 4096 + 3, 3 << 20])
def test_the_gpu_digest_is_output_digest_py_s(digest_kernel, offset, nbytes):
    cuda, kernel = digest_kernel
    data = np.random.default_rng(nbytes + offset).integers(0, 256, nbytes, dtype=np.uint8)
    buf = cuda.mem_alloc(max(nbytes + offset, 1))
    if nbytes:
        cuda.memcpy_htod(int(buf) + offset, data)
    sums = cuda.to_device(np.zeros(2, np.uint64))
    blocks = max(1, min(((nbytes + 7) // 8 + 255) // 256, 4096))
    kernel(np.uintp(int(buf) + offset), np.uint64(nbytes), np.uint64(output_digest.KEY_A),
           np.uint64(output_digest.KEY_B), sums, block=(256, 1, 1), grid=(blocks, 1))
    got = cuda.from_device(sums, (2,), np.uint64)
    assert (f"{int(got[0]):016x}", f"{int(got[1]):016x}") == output_digest.of_bytes(data.tobytes())


def test_the_original_s_runs_write_nothing_back(app):
    from mepgen.evaluate import Evaluator, Options
    from mepgen.spec import load_spec

    mep = Path(app) / ".mepgen" / "meps" / "cg.axpy"
    ev = Evaluator(load_spec(mep / "mep.yaml"), mep, Options(backend="native"))
    try:
        ev.prepare()
        w = ev.workers[0]
        assert w.backend.digested, "the harness was rendered before digests: mep --refresh"
        names = sorted(p.name for p in ev.spec.outputs)
        for k in range(ev.k):       # the harness's digests of the reference run are numpy's of the files
            assert sorted(w.backend.ref_digests[k]) == names
            for name in names:
                assert w.backend.ref_digests[k][name] == list(output_digest.of_bytes(ev.refs[k][name]))
        out = w.backend.run(w.baseline, ev.sets[1], ev.store.work_dir / "digests")
        assert sorted(out.matched) == names and out.outputs == {}
        assert not list((ev.store.work_dir / "digests").glob("*.npy"))
        base = ev.baseline_result()
        assert base.ok, base.feedback()
    finally:
        ev.close()


def test_the_native_judge_with_digests_gives_the_verdicts_of_old(app):
    import adversarial
    kernels = sorted(p.name for p in adversarial.SUITE.iterdir() if p.is_dir())
    fast = adversarial.run_suite(app, "native", kernels)
    old = adversarial.run_suite(app, "native", kernels, verify_on_device=False, baseline_once=False)
    assert [(r["kernel"], r["variant"], r["passed"]) for r in fast] == [(r["kernel"], r["variant"], True) for r in old]
    assert [r["got"] for r in fast if "rac" not in r["variant"]] == [r["got"] for r in old if "rac" not in r["variant"]]
