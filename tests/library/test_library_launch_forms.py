"""The launch a transformation starts from, whatever its spelling: a side written as one dim3 object
(`k<<<dim3(NPTS / M1W), dim3(M1W)>>>`, kept so in mep.yaml) is read as its components, as the harness's
`const dim3 grid(dim3(...))` launches it; other spellings are kept as written."""
from __future__ import annotations

from mepgen.optimize.library.launch_facts import dim3_components


def test_a_dim3_object_is_read_as_its_components():
    assert dim3_components(["(dim3(NPTS/M1W))"]) == ["NPTS/M1W"]
    assert dim3_components(["dim3(nx / 16, (ny + 15) / 16)"]) == ["nx / 16", "(ny + 15) / 16"]
    assert dim3_components([" ( dim3 ( 128 ) ) "]) == ["128"]


def test_other_spellings_are_kept():
    assert dim3_components(["(n + 255) / 256"]) == ["(n + 255) / 256"]
    assert dim3_components(["dim3(a) + 1"]) == ["dim3(a) + 1"]           # not one dim3 object
    assert dim3_components(["gx", "gy"]) == ["gx", "gy"]
    assert dim3_components(["mydim3(4)"]) == ["mydim3(4)"]
