"""On a GPU: vector_loads on a grid-stride loop indexed in 64 bits (`for (size_t i = (size_t)blockIdx.x * blockDim.x +
threadIdx.x; ...)`, the casts kept in the rewrite) gives the original's outputs on every input set, as the evaluator
verifies any candidate, and is timed like one."""
from __future__ import annotations

import pytest

from library_fixtures import example_meps, load

pytestmark = pytest.mark.gpu


def evaluated(spec, mep_dir, candidate, **options):
    """The evaluator's record of `candidate` on the MEP (verified on every input set, then timed)."""
    from mepgen.evaluate import Evaluator, Options
    from mepgen.evaluate.batch import evaluate_many
    ev = Evaluator(spec, mep_dir, Options(rounds=2, use_cache=False, **options))
    try:
        ev.prepare()
        return evaluate_many(ev, [(candidate.stem, candidate)])[0]
    finally:
        ev.close()


def test_vector_loads_of_a_64_bit_index_verify(tmp_path):
    from mepgen.optimize.library.vector_loads import VectorLoads
    from mepgen.spec import load_spec
    mep = example_meps(tmp_path / "heatcg", "heatcg", "cg::axpy", "--size", "N=1048576")["cg.axpy"]
    text = (mep / "kernel.cu").read_text()
    loop = next(ln for ln in text.splitlines() if ln.strip().startswith("for (int i ="))
    wide = loop.replace("int i = blockIdx.x * blockDim.x + threadIdx.x",
                        "size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x")
    assert wide != loop
    (mep / "kernel.cu").write_text(text.replace(loop, wide))       # the MEP's own kernel, indexed in 64 bits
    src, spec, launch = load(mep)
    rewritten = tmp_path / "wide_vector.cu"
    rewritten.write_text(VectorLoads().apply(src, spec, launch, {}).text)
    assert "for (size_t mepgen_q = (size_t)blockIdx.x * blockDim.x + threadIdx.x;" in rewritten.read_text()
    result = evaluated(load_spec(mep / "mep.yaml"), mep, rewritten)
    assert result.status == "ok", result.feedback()
    print("vector_loads on the 64-bit index:", result.timed.decision if result.timed else None,
          f"{result.timed.speedup:.2f}x" if result.timed and result.timed.speedup else "")


def test_vector_loads_of_float2_elements_verify(tmp_path):
    """float2 elements stored whole through the struct's copy assignment (test_library_transformations2's kernel):
    the rewrite's outputs equal the original's on the GPU (pycuda backend: the MEP as capture writes it, no
    harness rendered)."""
    from library_fixtures import written
    from test_library_transformations2 import FLOAT2, FLOAT2_YAML
    from mepgen.optimize.library.vector_loads import VectorLoads
    (tmp_path / "mep").mkdir()
    (tmp_path / "mep" / "kernel.cu").write_text(FLOAT2)
    src, spec, launch = written(tmp_path / "mep", FLOAT2_YAML, FLOAT2)
    rewritten = tmp_path / "float2_vector.cu"
    rewritten.write_text(VectorLoads().apply(src, spec, launch, {}).text)
    result = evaluated(spec, tmp_path / "mep", rewritten, backend="pycuda")
    assert result.status == "ok", result.feedback()
    print("vector_loads on float2 elements:", result.timed.decision if result.timed else None)
