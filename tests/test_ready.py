"""`mepgen ready`: per kernel, ready / needs a person (which field, why) / cannot (why), as text and JSON."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

from click.testing import CliRunner

from mepgen.cli import main

APP = """
    #include <cstdlib>
    #define LEN 4096
    __global__ void scale_add(float a, const float *x, float *y, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) y[i] = a * x[i] + y[i];
    }
    __global__ void bump(float *y, int n, int by) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) y[i] += by;
    }
    __global__ void fetch(cudaTextureObject_t t, float *y) { y[threadIdx.x] = tex1Dfetch<float>(t, threadIdx.x); }
    int main(int argc, char **argv) {
      float *x, *y;
      cudaMalloc(&x, LEN * sizeof(float)); cudaMalloc(&y, LEN * sizeof(float));
      scale_add<<<(LEN + 255) / 256, 256>>>(2.0f, x, y, LEN);
      int m = atoi(argv[1]);
      bump<<<(m + 127) / 128, 128>>>(y, m, 3);
      cudaTextureObject_t t = 0;
      fetch<<<1, 32>>>(t, y);
    }
"""


def _app(tmp_path: Path) -> Path:
    (tmp_path / "app.cu").write_text(textwrap.dedent(APP))
    (tmp_path / "broken.cu").write_text("__global__ void lost(float *x) { x[0] = undeclared_thing; }\n")
    return tmp_path


def test_ready_reports_each_kernel_and_what_was_not_understood(tmp_path):
    app = _app(tmp_path)
    r = CliRunner().invoke(main, ["ready", "-C", str(app), "--json"])
    assert r.exit_code == 3, r.output
    report = json.loads(r.output)
    by = {k["kernel"]: k for k in report["kernels"]}
    assert by["scale_add"]["outcome"] == "ready" and Path(by["scale_add"]["mep"]).is_dir()
    assert by["bump"]["outcome"] == "needs a person"
    assert any("argv" in t["reason"] or "atoi" in t["reason"] for t in by["bump"]["todo"])
    assert [t["kind"] for t in by["bump"]["todo"]] == ["argv"]          # machine-readable, for the sweep
    assert by["fetch"]["outcome"] == "cannot" and "texture" in by["fetch"]["reason"]
    assert by["fetch"]["mep"] is None and not by["fetch"]["internal"]
    assert [f["file"] for f in report["files_not_understood"]] == ["broken.cu"]
    assert "undeclared_thing" in report["files_not_understood"][0]["first"]
    # the broken file's kernel is listed, unreadable: no MEP, but a capture can still record its launches
    assert by["lost"]["outcome"] == "cannot" and "could not read" in by["lost"]["reason"]
    assert "mepgen capture" in by["lost"]["reason"]
    assert report["summary"] == {"kernels": 4, "ready": 1, "needs a person": 1, "cannot": 2, "internal_errors": 0}
    assert report["extracted_now"] is True


def test_ready_text_names_fields_and_reasons_and_reuses_a_fresh_inventory(tmp_path):
    app = _app(tmp_path)
    runner = CliRunner()
    runner.invoke(main, ["ready", "-C", str(app)])
    r = runner.invoke(main, ["ready", "-C", str(app)])
    lines = r.output.splitlines()
    assert any(line.startswith("scale_add") and " ready " in line for line in lines)
    assert any(line.startswith("bump") and "needs a person" in line and "sizes." in line for line in lines)
    assert any("not understood: broken.cu" in line for line in lines)
    assert "4 kernels: 1 ready, 1 need a person, 2 cannot" in r.output
    r = runner.invoke(main, ["ready", "-C", str(app), "--json"])
    assert json.loads(r.output)["extracted_now"] is False


def test_a_bug_on_one_kernel_is_its_outcome_not_the_end(tmp_path, monkeypatch):
    app = _app(tmp_path)
    import mepgen.mep.generate as gen
    real = gen._one

    def flaky(ws, inv, project, arch, k, *a, **kw):     # the mep stage's work on one kernel
        if k["qualified_name"] == "bump":
            raise KeyError("boom")
        return real(ws, inv, project, arch, k, *a, **kw)
    monkeypatch.setattr(gen, "_one", flaky)
    r = CliRunner().invoke(main, ["ready", "-C", str(app), "--json"])
    report = json.loads(r.output)
    by = {k["kernel"]: k for k in report["kernels"]}
    assert by["bump"]["outcome"] == "cannot" and by["bump"]["internal"]
    assert "KeyError" in by["bump"]["reason"] and by["scale_add"]["outcome"] == "ready"
    assert report["summary"]["internal_errors"] == 1


def test_ready_on_a_folder_that_does_not_exist(tmp_path):
    r = CliRunner().invoke(main, ["ready", "-C", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "no such directory" in r.output


def test_ready_extracts_again_when_given_flags(tmp_path):
    (tmp_path / "k.cu").write_text(textwrap.dedent("""
        __global__ void fill(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = WIDTH; }
        int main() { float *x; cudaMalloc(&x, 4 * 4096); fill<<<16, 256>>>(x, 4096); }
    """))
    runner = CliRunner()
    first = json.loads(runner.invoke(main, ["ready", "-C", str(tmp_path), "--json", "-D", "WIDTH=2"]).output)
    assert first["summary"]["kernels"] == 1 and first["extracted_now"]
    again = json.loads(runner.invoke(main, ["ready", "-C", str(tmp_path), "--json", "-D", "WIDTH=3"]).output)
    assert again["extracted_now"]
