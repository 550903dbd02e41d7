"""Kernel features, similarity and the per-user patterns database; inherited wins reach the proposers."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mepgen.errors import MepgenError
from mepgen.optimize.features import access_pattern, kernel_features, loop_depth, similarity
from mepgen.optimize.patterns import PatternStore, default_path
from mepgen.spec import load_spec


def test_access_patterns_and_loops_from_source():
    assert access_pattern("__global__ void k(float* y){ int i = blockIdx.x*blockDim.x+threadIdx.x; y[i] = 1; }") == "coalesced"
    assert access_pattern("__global__ void k(){ const int row = blockIdx.x * blockDim.x + threadIdx.x;"
                          " for (int j = 0; j < n; ++j) s += A[row * ncols + j]; }") == "strided"
    assert access_pattern("__global__ void k(){ int r = threadIdx.x; s += v[k] * x[col[k]]; }") == "gather"
    assert access_pattern("__global__ void k(){ atomicAdd(&b[i], 1); }") == "atomic"
    assert loop_depth("{ for (i=0;i<n;i++) { for (j=0;j<m;j++) s++; } while (x) { y(); } }") == 2
    assert loop_depth("{ y = 1; }") == 0


def test_features_of_the_example_kernels(heatcg_meps):
    app, result = heatcg_meps
    meps = app / ".mepgen" / "meps"

    def feats(kid):
        spec = load_spec(meps / kid / "mep.yaml")
        return kernel_features(spec, (meps / kid / "kernel.cu").read_text(), "NVIDIA H200", meps / kid)
    axpy, xpay, matvec, spmv, hist = (feats(k) for k in ("cg.axpy", "cg.xpay", "analysis.dense_matvec",
                                                          "cg.spmv_csr", "analysis.histogram"))
    assert axpy["access"] == "coalesced" and matvec["access"] == "strided" and spmv["access"] == "gather"
    assert hist["access"] == "atomic" and "atomics" in hist["tags"]
    assert axpy["intensity"] == "memory" and axpy["dtype"] == "float32" and spmv["dtype"] == "float32"
    assert matvec["loop_depth"] == 1
    assert similarity(axpy, xpay) == 1.0
    assert similarity(axpy, xpay) > similarity(axpy, matvec) > similarity(axpy, hist) - 0.2
    assert similarity(axpy, hist) < 0.7 <= similarity(axpy, xpay)


FEAT = {"access": "coalesced", "loop_depth": 1, "intensity": "memory", "dtype": "float32", "gpu": "NVIDIA H200",
        "tags": [], "dims": 1}


def test_store_records_wins_and_finds_similar_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("MEPGEN_PATTERNS_DB", str(tmp_path / "p.sqlite"))
    assert default_path() == tmp_path / "p.sqlite"
    store = PatternStore()
    store.record(kernel="cg.axpy", app="/a", features=FEAT, source="library", change="vectorize float4",
                 speedup=1.3, transformations=[{"name": "vectorize", "params": {"width": 4}}])
    store.record(kernel="cg.axpy", app="/a", features=FEAT, source="library", change="vectorize float4",
                 speedup=1.1, transformations=[{"name": "vectorize", "params": {"width": 4}}])   # not better: kept 1.3
    store.record(kernel="cg.dot", app="/a", features={**FEAT, "access": "atomic", "tags": ["atomics"]},
                 source="llm", change="warp shuffle reduction", speedup=2.0, strategy="shuffle", edit="...")
    store.record(kernel="heat.step", app="/b", features={**FEAT, "dims": 2, "loop_depth": 0}, source="library",
                 change="block 32x8", speedup=1.2, launch={"block": [32, 8]})
    store.close()
    store = PatternStore()                    # shared across runs: a new connection sees everything
    assert len(store.all()) == 3
    found = store.similar({**FEAT})
    assert [f["change"] for f in found] == ["vectorize float4", "block 32x8"]
    assert found[0]["speedup"] == 1.3 and found[0]["transformations"][0]["params"] == {"width": 4}
    assert found[0]["similarity"] == 1.0 and found[1]["launch"] == {"block": [32, 8]}
    assert store.similar(FEAT, exclude_kernel=("cg.axpy", "/a"))[0]["change"] == "block 32x8"


def test_schema_is_versioned(tmp_path):
    path = tmp_path / "p.sqlite"
    PatternStore(path).close()
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.close()
    with pytest.raises(MepgenError, match="schema version 99 is newer"):
        PatternStore(path)
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database at all " * 100)
    with pytest.raises(MepgenError, match="not a mepgen patterns database"):
        PatternStore(bad)


def test_default_location_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv("MEPGEN_PATTERNS_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_path() == Path(tmp_path) / "mepgen" / "patterns.sqlite"


def test_inherited_chains_are_replayed_first_and_dropped_when_they_do_not_apply(tmp_path):
    from mepgen.optimize import strategies
    from mepgen.optimize.inherit import InheritedProposer
    from mepgen.optimize.library.source import Refused
    from mepgen.optimize.search import Budget, Search
    from mepgen.optimize.trajectory import Trajectory
    from optimize_fakes import FakeEvaluate, MarkerProposer, baseline, make_ctx

    class Rw:
        def __init__(self, text, launch=None):
            self.text, self.launch, self.explanation, self.nvcc_flags = text, launch, "rw", []

    class Mark:
        name = "vectorize"

        def apply(self, src, spec, launch, params):
            return Rw(src.text + f"// vectorized {params['width']} MARK:speed=1.6\n", {"block": ["128"]})

    class Never:
        name = "tile"

        def apply(self, src, spec, launch, params):
            raise Refused("no loop to tile")

    ctx = make_ctx(tmp_path)
    ctx.patterns = [{"kernel": "cg.axpy", "source": "library", "change": "vectorize float4", "speedup": 1.5,
                     "transformations": [{"name": "vectorize", "params": {"width": 4}}]},
                    {"kernel": "x", "source": "library", "change": "tile", "speedup": 1.2,
                     "transformations": [{"name": "tile", "params": {}}]},
                    {"kernel": "y", "source": "llm", "change": "shuffle", "speedup": 2.0, "transformations": []}]
    inh = InheritedProposer([Mark(), Never()])
    traj = Trajectory(tmp_path / "run", {"kernel": "cg.xpay", "spec_sha256": "s"}, progress=lambda line: None)
    out = Search(ctx, [inh, MarkerProposer()], FakeEvaluate(), strategies.make("elite"), Budget(candidates=5, width=4),
                 traj, baseline=baseline()).run()
    first = traj.attempts()[0]
    assert first["proposer"] == "inherited" and first["source"] == "inherited"
    assert first["change"].startswith("inherited from cg.axpy: vectorize float4")
    assert first["launch"] == {"block": ["128"]} and first["transformations"][0]["params"] == {"width": 4}
    assert inh.refusals == {"tile": "no loop to tile"}
    assert out.best.proposal.source == "inherited"


def test_an_inherited_chain_keeps_the_nvcc_flags_its_steps_need(tmp_path):
    """A pattern whose chain includes nvcc_flags(...) is replayed with those flags (it was replayed without)."""
    from mepgen.optimize.inherit import InheritedProposer
    from mepgen.optimize.library.base import Rewrite
    from optimize_fakes import make_ctx

    class Flags:
        name = "nvcc_flags"

        def apply(self, src, spec, launch, params):
            return Rewrite(src.text, "flags", None, params["flags"].split())

    ctx = make_ctx(tmp_path)
    ctx.patterns = [{"kernel": "cg.axpy", "source": "library", "change": "fast math", "speedup": 1.1,
                     "transformations": [{"name": "nvcc_flags", "params": {"flags": "-use_fast_math"}}]}]
    (prop,) = InheritedProposer([Flags()]).propose(ctx, None, 4)
    assert prop.nvcc_flags == ["-use_fast_math"] and prop.text == ctx.original and prop.source == "inherited"
