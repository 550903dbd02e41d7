"""`mepgen mep --all` memory follows the largest group of linked translation units, not the application
(issue 40): groups that share no file, call or launch are parsed one at a time and dropped; input data is
written one array at a time, generated in slices that give the same numbers."""
from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace

import numpy as np

from mepgen import datagen
from mepgen.extract import ExtractOptions, extract
from mepgen.mep import components


def tu(file, reads):
    return {"file": file, "reads": reads}


def kernel(kid, file, sites=()):
    return {"id": kid, "file": file, "launch_sites": [{"file": f, "enclosing_usr": u} for f, u in sites]}


def test_units_that_share_nothing_are_separate_groups():
    inv = {"translation_units": [tu("a/k.cu", ["a/k.cu", "a/h.h"]), tu("b/k.cu", ["b/k.cu", "b/h.h"]),
                                 tu("b/main.cu", ["b/main.cu"])],
           "kernels": [kernel("ka", "a/k.cu", [("a/k.cu", "ua")]), kernel("kb", "b/k.cu", [("b/k.cu", "ub")])],
           "host_calls": [{"caller_usr": "main", "callee_usr": "ub", "file": "b/main.cu"}]}
    got = components.groups(inv, inv["kernels"])
    assert [(sorted(u), [k["id"] for k in ks]) for u, ks in got] == [
        (["a/k.cu"], ["ka"]), (["b/k.cu", "b/main.cu"], ["kb"])]      # b's main calls b's launcher: one group


def test_a_shared_header_or_an_unknown_file_keeps_one_group():
    inv = {"translation_units": [tu("a.cu", ["a.cu", "common.h"]), tu("b.cu", ["b.cu", "common.h"])],
           "kernels": [kernel("ka", "a.cu"), kernel("kb", "b.cu")], "host_calls": []}
    assert [sorted(u) for u, _ in components.groups(inv, inv["kernels"])] == [["a.cu", "b.cu"]]
    inv["translation_units"] = [tu("a.cu", ["a.cu"]), tu("b.cu", ["b.cu"])]
    inv["kernels"][1]["launch_sites"] = [{"file": "launchers.h", "enclosing_usr": "x"}]   # no unit read it
    assert len(components.groups(inv, inv["kernels"])) == 1
    del inv["translation_units"][0]["reads"]                      # an inventory from before: as before
    assert len(components.groups(inv, inv["kernels"])) == 1


def test_mep_all_drops_each_group_before_parsing_the_next(tmp_path, monkeypatch):
    import mepgen.mep.generate as generate
    from mepgen.workspace import Workspace

    app = tmp_path / "app"
    for m in ("one", "two"):
        (app / m).mkdir(parents=True)
        (app / m / "sizes.h").write_text("#define N 1024\n")
        (app / m / "k.cu").write_text(
            f'#include "sizes.h"\nnamespace {m} {{\n__global__ void scale(float* x) {{ x[threadIdx.x] *= 2.0f; }}\n'
            f'void run(float* x) {{ scale<<<N / 256, 256>>>(x); }}\n}}\n')
    extract(app, ExtractOptions(jobs=1))
    real = generate.Project
    alive, built = [], []

    def counted(*a, **k):
        assert not [r for r in alive if r() is not None], "the previous group is still in memory"
        p = real(*a, **k)
        alive.append(weakref.ref(p))
        built.append(sorted(k["only"]))
        return p

    monkeypatch.setattr(generate, "Project", counted)
    results = generate.generate(Workspace(app), [], every=True, detect_gpu=False, failed=[])
    gc.collect()
    assert built == [["one/k.cu"], ["two/k.cu"]]
    from mepgen.inventory import load
    ranked = [k["qualified_name"] for k in load(app / ".mepgen/inventory.json")["kernels"]]
    assert [r.kernel for r in results] == ranked and sorted(ranked) == ["one::scale", "two::scale"]


def test_input_data_in_slices_is_the_same_data():
    for dtype in (np.float32, np.float64, np.float16):
        for count in (0, 7, (1 << 20) + 3, 3 << 20):
            rng_a, rng_b = np.random.default_rng(11), np.random.default_rng(11)
            work = np.float32 if np.dtype(dtype).itemsize <= 4 else np.float64
            want = rng_a.uniform(-1, 2, size=count).astype(work).astype(dtype)
            got = datagen._generate(SimpleNamespace(kind="uniform", args={"low": -1, "high": 2}), np.dtype(dtype),
                                    count, None, None, rng_b, "x")
            assert got.dtype == want.dtype and np.array_equal(got, want)
            assert rng_a.random() == rng_b.random()           # the generator is left where it was
    cases = ((10, 0, 5, 1), ((1 << 21) + 5, 10, 99_999, 3), (0, 0, 4, 2), (3 << 20, 0, 1 << 22, 1000))
    for count, low, high, band in cases:
        rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
        centre = low + (np.arange(count, dtype=np.int64) * (high - low)) // max(count, 1)
        want = np.clip(centre + rng_a.integers(-band, band, size=count, endpoint=True), low, high - 1)
        got = datagen._banded(low, high, band, count, rng_b, "x", np.int32)
        assert got.dtype == np.int32 and np.array_equal(got, want.astype(np.int32))
        assert rng_a.random() == rng_b.random()
