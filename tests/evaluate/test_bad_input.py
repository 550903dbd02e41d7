"""Bad input is a one-line error naming the file, the field and the fix, never an internal error."""
from __future__ import annotations

from pathlib import Path

import pytest

from mepgen import datagen
from mepgen.errors import MepgenError
from mepgen.evaluate import rules
from mepgen.extract.run import check_text
from mepgen.spec import load_spec

AXPY = Path(__file__).resolve().parent.parent / "evaluate_fixtures" / "axpy" / "mep.yaml"


def spec_with(tmp_path, old: str, new: str):
    f = tmp_path / "mep.yaml"
    f.write_text(AXPY.read_text().replace(old, new))
    return f


def test_a_binary_named_cu_is_named_with_its_fix(tmp_path):
    f = tmp_path / "blob.cu"
    f.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)))
    with pytest.raises(MepgenError, match=r"blob.cu: not a text file \(byte 7 is NUL.*remove or rename it"):
        check_text(f)
    latin = tmp_path / "old.cu"
    latin.write_bytes("// \xa9 2013 someone\n__global__ void k() {}\n".encode("latin-1"))
    check_text(latin)                      # text in another encoding is still source code


def test_a_binary_variant_is_refused_by_the_rules():
    found = rules.check("\x7fELF\x00\x00junk", "__global__ void k() {}\n")
    assert found and "not a text file" in found[0].rule


def test_a_negative_size_names_the_field(tmp_path):
    with pytest.raises(MepgenError, match=r"mep.yaml:\d+: sizes.N: -5 is negative.*0 or more"):
        load_spec(spec_with(tmp_path, "sizes: {N: 1048576}", "sizes: {N: -5}"))


def test_a_negative_count_names_the_field(tmp_path):
    f = spec_with(tmp_path, "count: N, init: {kind: uniform, low: -1, high: 1}}\n  - {name: y",
                  "count: N - 2000000, init: {kind: uniform, low: -1, high: 1}}\n  - {name: y")
    with pytest.raises(MepgenError, match=r"params\[2\].count: 'N - 2000000' is -951424 with N=1048576"):
        load_spec(f)


@pytest.mark.parametrize("n", [10 ** 15, 10 ** 20])
def test_a_size_beyond_the_machine_names_the_field_and_the_fix(tmp_path, n):
    spec = load_spec(spec_with(tmp_path, "sizes: {N: 1048576}", f"sizes: {{N: {n}}}"))
    with pytest.raises(MepgenError, match=rf"mep.yaml: params\[2\].count: x has {n} elements \(N={n}\).*"
                                          r"lower the sizes \(`mepgen mep cg::axpy --size SYM=VALUE`"):
        datagen.make_inputs(spec, tmp_path, 1, tmp_path / "in")
    assert not (tmp_path / "in").exists()
