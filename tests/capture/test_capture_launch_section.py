"""The launch section a capture writes and mep.yaml keeps: the configurations the application launched the kernel
with (`launch.observed`, from CUPTI's records; validated, read back) and what a loop around a static MEP's launch
site changes each round (`launch.varies`)."""
from __future__ import annotations

import pytest


def test_several_launch_configurations_are_written_as_launch_observed():
    from mepgen.capture.mepwrite import _observed
    one = {"grid": [8, 1, 1], "block": [64, 1, 1], "shared_mem": 0, "launches": 3, "total_ms": 0.5}
    notes = []
    assert _observed({"app_gpu": {"configs": [one]}}, notes) == {} and notes == []
    assert _observed({}, notes) == {} and notes == []
    two = {**one, "block": [128, 1, 1], "grid": [4, 1, 1], "launches": 1}
    got = _observed({"app_gpu": {"configs": [one, two, {"more": 2}]}}, notes)
    assert got == {"observed": [one, two]}
    assert "launched this kernel with 2+ configurations" in notes[0] and "2 launch(es)" in notes[0]


def test_launch_observed_is_validated_and_read_back(tmp_path):
    from mepgen.errors import MepgenError
    from mepgen.spec import validate_dict
    doc = {"version": 1, "kernel": {"name": "k", "id": "k", "source": "k.cu", "source_sha256": "", "start_byte": 0,
                                    "end_byte": 1},
           "sizes": {}, "params": [{"name": "out", "role": "out", "ctype": "float*", "dtype": "float32", "count": "4"}],
           "launch": {"grid": ["1"], "block": ["4"], "observed": [{"grid": [1, 1, 1], "block": [4, 1, 1]},
                                                                {"grid": [2, 1, 1], "block": [2, 1, 1]}]}}
    spec = validate_dict(doc)
    assert spec.launch.observed_blocks() == [(2, 1, 1), (4, 1, 1)]
    assert spec.to_dict()["launch"]["observed"][1] == {"grid": [2, 1, 1], "block": [2, 1, 1]}
    doc["launch"]["observed"][1]["block"] = [2, 1]
    with pytest.raises(MepgenError, match=r"observed.*is not an x, y, z of positive numbers"):
        validate_dict(doc)


def test_launch_varies_is_read_back():
    from mepgen.spec import validate_dict
    doc = {"version": 1, "kernel": {"name": "k", "id": "k", "source": "k.cu", "source_sha256": "", "start_byte": 0,
                                    "end_byte": 1},
           "sizes": {}, "params": [{"name": "out", "role": "out", "ctype": "float*", "dtype": "float32", "count": "4"}],
           "launch": {"grid": ["1"], "block": ["4"], "varies": {"block": ["threads"]}}}
    spec = validate_dict(doc)
    assert spec.launch.varies == {"block": ["threads"]}
    assert spec.to_dict()["launch"]["varies"] == {"block": ["threads"]}
    doc["launch"].pop("varies")
    assert "varies" not in validate_dict(doc).to_dict()["launch"]
