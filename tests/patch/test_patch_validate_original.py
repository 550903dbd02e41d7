"""Patch validation on old code: the original is compiled first, so a failure it already had (a runtime
call removed from the toolkit) is told apart from one the patch caused."""
from __future__ import annotations

import stat
import sys
import textwrap
from pathlib import Path

from mepgen.patch.validate import Check, Validation, against_original, compile_units

FAKE_NVCC = textwrap.dedent(f"""\
    #!{sys.executable}
    # a stand-in for nvcc: fails on the calls a newer toolkit removed, and on code a patch broke
    import sys
    src = open(sys.argv[sys.argv.index("-c") + 1]).read()
    errors = []
    for line_no, line in enumerate(src.splitlines(), 1):
        if "cudaThreadSynchronize" in line:
            errors.append(f'{{sys.argv[sys.argv.index("-c") + 1]}}({{line_no}}): error: identifier "cudaThreadSynchronize" is undefined')
        if "not_a_function" in line:
            errors.append(f'{{sys.argv[sys.argv.index("-c") + 1]}}({{line_no}}): error: identifier "not_a_function" is undefined')
    print("\\n".join(errors), file=sys.stderr)
    sys.exit(1 if errors else 0)
""")

ORIGINAL = """\
__global__ void inc(float *x) { x[threadIdx.x] += 1.0f; }
int main() { float *x; cudaMalloc(&x, 128); inc<<<1, 32>>>(x); cudaThreadSynchronize(); }
"""


def _setup(tmp_path: Path, monkeypatch) -> dict:
    nvcc = tmp_path / "fake-nvcc"
    nvcc.write_text(FAKE_NVCC)
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("NVCC", str(nvcc))
    (tmp_path / "app.cu").write_text(ORIGINAL)
    return {"translation_units": [{"file": "app.cu", "std": "c++17", "nvcc_args": [], "include_dirs": [],
                                   "defines": []}]}


def test_a_failure_the_original_already_had_is_not_the_patch(tmp_path, monkeypatch):
    inv = _setup(tmp_path, monkeypatch)
    before = compile_units(tmp_path, inv, "app.cu")
    assert not before[0].ok
    # the patch moves lines (a longer kernel) but adds no error
    (tmp_path / "app.cu").write_text("// tuned\n" + ORIGINAL.replace("+= 1.0f;", "+= 1.0f;\n"))
    after = against_original(before, compile_units(tmp_path, inv, "app.cu"))
    assert after[0].pre_existing and "already failed before the patch" in after[0].detail
    assert Validation(after).ok


def test_an_error_the_patch_added_is_the_patch(tmp_path, monkeypatch):
    inv = _setup(tmp_path, monkeypatch)
    before = compile_units(tmp_path, inv, "app.cu")
    (tmp_path / "app.cu").write_text(ORIGINAL.replace("+= 1.0f;", "+= not_a_function();"))
    after = against_original(before, compile_units(tmp_path, inv, "app.cu"))
    assert not after[0].pre_existing and "not_a_function" in after[0].detail
    assert not Validation(after).ok


def test_a_clean_original_broken_by_the_patch_fails(tmp_path, monkeypatch):
    inv = _setup(tmp_path, monkeypatch)
    (tmp_path / "app.cu").write_text(ORIGINAL.replace(" cudaThreadSynchronize();", ""))
    before = compile_units(tmp_path, inv, "app.cu")
    assert before[0].ok
    (tmp_path / "app.cu").write_text(ORIGINAL.replace(" cudaThreadSynchronize();", "").replace("1.0f", "not_a_function()"))
    after = against_original(before, compile_units(tmp_path, inv, "app.cu"))
    assert not after[0].ok and not after[0].pre_existing and not Validation(after).ok


def test_validation_passes_when_nothing_failed():
    assert Validation([Check("compile a.cu", True)]).ok
