"""after_scalar_replace remembers its answer for a kernel text (the proposer asks space, first_point and apply of
it, every round again): the inner transformation is asked once, a caller's change to the space it got does not
reach the next caller, and a refusal is given again with its reason."""
from __future__ import annotations

import types

import pytest

from mepgen.optimize.library import after_scalar_replace as asr
from mepgen.optimize.library.base import Transformation
from mepgen.optimize.library.cursors import Refused


class Counting(Transformation):
    def __init__(self, refuse: str | None = None):
        super().__init__("counting", "a stand-in", {"x": 1})
        self.refuse = refuse
        self.__class__.calls = []          # counted outside the instance: its fields are part of the memo's key

    @property
    def asked(self) -> int:
        return len(self.calls)

    def space(self, src, spec, launch):
        self.calls.append(src.text)
        if self.refuse:
            raise Refused(self.refuse)
        return {"x": [1, 2, 4]}


def test_the_inner_space_is_asked_once_per_text_and_copied_out(monkeypatch):
    monkeypatch.setattr(asr, "_SEEN", type(asr._SEEN)())
    inner, spec = Counting(), object()
    t = asr.AfterScalarReplace(inner)
    src = types.SimpleNamespace(text="__global__ void k() {}")
    first = t.space(src, spec, None)
    first["x"].append(99)                                   # a caller changing what it got
    assert t.space(src, spec, None) == {"x": [1, 2, 4]} and inner.asked == 1
    t.space(types.SimpleNamespace(text="__global__ void k() { }"), spec, None)
    assert inner.asked == 2                                 # another text is asked anew
    t.space(src, object(), None)
    assert inner.asked == 3                                 # so is another spec


def test_a_refusal_is_given_again_with_its_reason(monkeypatch):
    monkeypatch.setattr(asr, "_SEEN", type(asr._SEEN)())
    monkeypatch.setattr(asr.ScalarReplace, "apply", lambda self, *a, **k: (_ for _ in ()).throw(Refused("no sum")))
    inner, spec = Counting(refuse="no matrix product"), object()
    t = asr.AfterScalarReplace(inner)
    src = types.SimpleNamespace(text="__global__ void k() {}")
    for _ in range(2):
        with pytest.raises(Refused, match="no matrix product"):
            t.space(src, spec, None)
    assert inner.asked == 1
