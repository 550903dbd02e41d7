"""Two definitions of one kernel: the MEP comes from the one the application's build compiles.

A folder keeps a leftover variant of its kernel file (same kernel name and parameters, a 1D body where the built
file's is 2D). The Makefile (or compile_commands.json) says which file is built; a `.cu` the built file #includes
is built too; where nothing says, naming the kernel is refused with both candidates, and the capture tells them
apart by the application's binary (compiled here with nvcc: no GPU is needed to read machine code).
"""
from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from mepgen.errors import MepgenError
from mepgen.extract import ExtractOptions, extract
from mepgen.kernelname import find_kernel

BODY_2D = """
    __global__ void relax(float *grid, int width) {
      int x = blockIdx.x * blockDim.x + threadIdx.x;
      int y = blockIdx.y;
      if (x < width) grid[y * width + x] *= 0.5f;
    }
"""
BODY_1D = """
    __global__ void relax(float *grid, int width) {
      int x = blockIdx.x * blockDim.x + threadIdx.x;
      if (x < width) grid[x] *= 0.5f;
    }
"""
MAIN = """
    int main() {
      float *g; cudaMalloc(&g, 64 * 256 * sizeof(float));
      relax<<<dim3(1, 64), 256>>>(g, 256);
      cudaDeviceSynchronize();
      return 0;
    }
"""


def _write(app: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = app / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).replace("\\t", "\t"))
    return app


MAKEFILE = """
    NVCC = nvcc
    FLAGS = -O3
    app: solver.o
    \t$(NVCC) $(FLAGS) solver.o -o app
    %.o: %.cu
    \t$(NVCC) $(FLAGS) -c $< -o $@
    clean:
    \trm -f app *.o
"""


def test_the_makefile_says_which_definition_is_built(tmp_path):
    app = _write(tmp_path / "app", {"solver.cu": BODY_2D + MAIN, "solver_1d_old.cu": BODY_1D, "Makefile": MAKEFILE})
    inv = extract(app, ExtractOptions(jobs=1))
    twins = [k for k in inv["kernels"] if k["qualified_name"] == "relax"]
    assert len(twins) == 2
    built = next(k for k in twins if k["file"] == "solver.cu")
    left = next(k for k in twins if k["file"] == "solver_1d_old.cu")
    assert built["id"] == "relax" and built["definition"]["built"] is True
    assert "solver_1d_old.cu" in built["definition"]["others"][0]
    assert "not compiled by the application's build" in left["not_built"] and "solver.cu" in left["not_built"]
    assert find_kernel(inv, "relax") is built           # the name means the built definition
    assert find_kernel(inv, left["id"]) is left         # the leftover only by its own id


def test_mep_all_cuts_only_the_built_definition_and_says_why_not_the_other(tmp_path):
    from mepgen.mep.generate import Failed, generate
    from mepgen.workspace import Workspace
    app = _write(tmp_path / "app", {"solver.cu": BODY_2D + MAIN, "solver_1d_old.cu": BODY_1D, "Makefile": MAKEFILE})
    extract(app, ExtractOptions(jobs=1))
    failed: list[Failed] = []
    results = generate(Workspace(app), [], every=True, detect_gpu=False, failed=failed)
    assert [r.spec.kernel.source for r in results] == ["solver.cu"]      # patch edits what the build compiles
    assert results[0].spec.kernel.id == "relax"
    assert len(failed) == 1 and "not compiled by the application's build" in failed[0].reason


def test_a_cu_file_the_built_file_includes_is_built(tmp_path):
    app = _write(tmp_path / "app", {
        "main.cu": '#include "relax_impl.cu"\n' + textwrap.dedent(MAIN),
        "relax_impl.cu": BODY_2D, "relax_variant.cu": BODY_1D,
        "Makefile": "app: main.cu\n\tnvcc -O3 main.cu -o app\n"})
    inv = extract(app, ExtractOptions(jobs=1))
    k = find_kernel(inv, "relax")
    assert k["file"] == "relax_impl.cu" and k["definition"]["built"] is True
    other = next(x for x in inv["kernels"] if x["file"] == "relax_variant.cu")
    assert other.get("not_built")


def test_compile_commands_say_which_is_built(tmp_path):
    import json
    app = _write(tmp_path / "app", {"a/relax.cu": BODY_2D + MAIN, "b/relax.cu": BODY_1D})
    (app / "compile_commands.json").write_text(json.dumps([
        {"directory": str(app / "a"), "file": "relax.cu", "arguments": ["nvcc", "-O3", "-c", "relax.cu"]}]))
    inv = extract(app, ExtractOptions(jobs=1))
    # the unlisted file is not even parsed: one definition, the listed one
    assert [k["file"] for k in inv["kernels"] if k["name"] == "relax"] == ["a/relax.cu"]


def test_nothing_says_which_one_so_the_name_is_refused_with_both_listed(tmp_path):
    app = _write(tmp_path / "app", {"one.cu": BODY_2D + MAIN, "two.cu": BODY_1D})
    inv = extract(app, ExtractOptions(jobs=1))
    twins = [k for k in inv["kernels"] if k["qualified_name"] == "relax"]
    assert all(k["definition"]["ambiguous"] for k in twins) and not any(k.get("not_built") for k in twins)
    with pytest.raises(MepgenError) as e:
        find_kernel(inv, "relax")
    assert "one.cu" in str(e.value) and "two.cu" in str(e.value) and "2 definitions" in str(e.value)


@pytest.mark.nvcc
def test_the_binary_tells_the_two_definitions_apart(tmp_path):
    from mepgen.capture.definition import device_code, find_binary, resolve
    app = _write(tmp_path / "app", {"one.cu": BODY_2D + MAIN, "two.cu": BODY_1D + MAIN})
    inv = extract(app, ExtractOptions(jobs=1))
    twins = [k for k in inv["kernels"] if k["qualified_name"] == "relax"]
    subprocess.run(["nvcc", "-O3", "-arch=sm_80", "two.cu", "-o", "runme"], cwd=app, check=True)
    binary = find_binary(["./runme", "--flag"], app)
    assert binary == app / "runme" and device_code(binary.read_bytes(), "relax")
    r = resolve(binary, app, inv, twins)
    assert r.chosen is not None and r.chosen["file"] == "two.cu", r.reason
    # a binary without the kernel's machine code (PTX only) is no answer: nothing is picked
    subprocess.run(["nvcc", "-O3", "-arch=compute_80", "-code=compute_80", "one.cu", "-o", "ptxonly"], cwd=app,
                   check=True)
    r = resolve(app / "ptxonly", app, inv, twins)
    assert r.chosen is None and "one.cu" in r.reason and "two.cu" in r.reason


@pytest.mark.nvcc
def test_capture_all_records_only_the_definition_the_binary_runs(tmp_path, monkeypatch):
    from mepgen.capture.command import _chosen_names, _definitions
    from mepgen.capture.names import choose_kernel
    from mepgen.workspace import Workspace
    app = _write(tmp_path / "app", {"one.cu": BODY_2D + MAIN, "two.cu": BODY_1D + MAIN})
    inv = extract(app, ExtractOptions(jobs=1))
    subprocess.run(["nvcc", "-O3", "-arch=sm_80", "one.cu", "-o", "runme"], cwd=app, check=True)
    monkeypatch.chdir(app)
    names = _chosen_names(inv, None, None, True)
    choices, refused = _definitions(Workspace(app), inv, names, ["./runme"], choose_kernel, lambda m: None)
    assert [c.kernel["file"] for c in choices] == ["one.cu"]
    assert len(refused) == 1 and refused[0]["reason"].startswith("not the definition the application runs")
    # a command whose binary cannot be read: neither is recorded, both named
    choices, refused = _definitions(Workspace(app), inv, names, ["./absent"], choose_kernel, lambda m: None)
    assert choices == [] and len(refused) == 2 and all("one.cu" in r["reason"] and "two.cu" in r["reason"]
                                                       for r in refused)


def test_a_launched_kernel_is_never_called_unlaunched_for_want_of_instantiations():
    """Two targets of one name (two definitions): the second gets no launch, and it must not read as
    "never launched; its instantiations that did: relax"."""
    from types import SimpleNamespace
    from mepgen.capture.launcher import AppRun, explain_failure
    run = AppRun(["./app"], 0, 0.1, [{"targets": [{"matched": 1, "captured": True}, {"matched": 0}],
                                      "seen": {"relax(float*, int)": 3}}])
    plan = SimpleNamespace(choice=SimpleNamespace(kernel={"qualified_name": "relax", "is_template": False},
                                                  display="relax"), longest=False, launch=0, after_ms=None)
    why = explain_failure(run, plan, 1)
    assert "never launched" not in why and "launched (3 time(s))" in why


def test_a_second_program_built_by_another_target_is_not_a_leftover(tmp_path):
    """`make` builds `app`; `make app_old` builds the other file: both are compiled by the build, so neither
    definition is dropped, and the name is refused until the binary tells them apart."""
    app = _write(tmp_path / "app", {"one.cu": BODY_2D + MAIN, "two.cu": BODY_1D + MAIN, "Makefile": """
        app: one.cu
        \t$(NVCC) -O3 one.cu -o app
        app_old: two.cu
        \t$(NVCC) -O3 two.cu -o app_old
    """})
    inv = extract(app, ExtractOptions(jobs=1))
    twins = [k for k in inv["kernels"] if k["qualified_name"] == "relax"]
    assert len(twins) == 2 and not any(k.get("not_built") for k in twins)
    assert all(k["definition"]["reason"] == "the build compiles 2 of them" for k in twins)
    with pytest.raises(MepgenError):
        find_kernel(inv, "relax")


@pytest.mark.gpu
def test_a_real_capture_records_the_definition_the_binary_runs_and_ready_keeps_it(tmp_path):
    """On a GPU: the binary built from one.cu runs; `capture --all --use` records one.cu's relax (told apart by
    the binary), refuses two.cu's, and `mepgen ready` afterwards keeps the captured MEP."""
    import json
    from conftest import run_mepgen
    app = _write(tmp_path / "app", {"one.cu": BODY_2D + MAIN, "two.cu": BODY_1D + MAIN})
    r = subprocess.run(["nvcc", "-O3", "one.cu", "-o", "runme"], cwd=app, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert run_mepgen("extract", app).returncode == 0
    r = run_mepgen("capture", "--all", "--use", "--json", "-C", app, "--", app / "runme")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    captured = [o for o in out if o["outcome"] == "captured"]
    assert len(captured) == 1 and captured[0]["complete"], out
    assert "one.cu" in (Path(captured[0]["mep"]) / "mep.yaml").read_text()
    refused = [o for o in out if o["outcome"] == "refused"]
    assert len(refused) == 1 and "not the definition the application runs" in refused[0]["reason"]
    before = (Path(captured[0]["mep"]) / "mep.yaml").read_bytes()
    r = run_mepgen("ready", "--json", "-C", app)
    kept = [k for k in json.loads(r.stdout)["kernels"] if k["origin"] == "capture"]
    assert len(kept) == 1 and (Path(captured[0]["mep"]) / "mep.yaml").read_bytes() == before
