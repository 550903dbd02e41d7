"""Patch validation compiles a changed file the way the application does: its compile_commands.json command
(compiler, flags, folder), only the object written elsewhere; without one, the flags extract recorded."""
from __future__ import annotations

import json
import os

from mepgen.patch.validate import compile_units, with_output


def test_the_output_is_redirected_and_the_rest_kept():
    assert with_output(["nvcc", "-O3", "-o", "x.o", "-c", "a.cu"], "/t/0.o") == \
        ["nvcc", "-O3", "-c", "a.cu", "-o", "/t/0.o"]
    assert with_output(["nvcc", "-ox.o", "a.cu", "-use_fast_math"], "/t/0.o") == \
        ["nvcc", "a.cu", "-use_fast_math", "-c", "-o", "/t/0.o"]


def test_validation_runs_the_applications_own_compile_command(tmp_path):
    app = tmp_path / "app"
    (app / "src").mkdir(parents=True)
    (app / "build").mkdir()
    (app / "src/k.cu").write_text("__global__ void k() {}\n")
    seen = tmp_path / "seen.txt"
    fake = tmp_path / "my-nvcc"
    fake.write_text(f"#!/bin/sh\necho \"$PWD $*\" > {seen}\n[ \"$MUST_FAIL\" = 1 ] && echo 'k.cu(1): error: boom' >&2 "
                    f"&& exit 1\nexit 0\n")
    os.chmod(fake, 0o755)
    (app / "build/compile_commands.json").write_text(json.dumps([{
        "directory": str(app / "build"), "file": "../src/k.cu",
        "command": f"{fake} -use_fast_math -Xptxas -O3 -DAPP_FLAG=1 -o CMakeFiles/k.o -c ../src/k.cu"}]))
    inv = {"translation_units": [{"file": "src/k.cu", "include_dirs": [], "defines": [], "nvcc_args": []}],
           "extract_options": {"compile_commands": None}}
    checks = compile_units(app, inv, "src/k.cu")
    assert [c.ok for c in checks] == [True]
    cwd, args = seen.read_text().split(" ", 1)
    assert cwd == str(app / "build")
    assert "-use_fast_math -Xptxas -O3 -DAPP_FLAG=1 -c ../src/k.cu -o " in args and "CMakeFiles/k.o" not in args
    os.environ["MUST_FAIL"] = "1"
    try:
        checks = compile_units(app, inv, "src/k.cu")
    finally:
        del os.environ["MUST_FAIL"]
    assert not checks[0].ok and checks[0].errors == ["error: boom"]
