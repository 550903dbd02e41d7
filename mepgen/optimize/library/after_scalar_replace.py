"""A transformation applied, where it refuses the kernel as written, to the kernel after scalar replacement
(the naive `y[i] = 0; for (...) y[i] += ...` spelling of a sum); the name and parameters are the inner one's, so
a recorded chain replays the same way."""
from __future__ import annotations

import copy
import threading
from collections import OrderedDict

from .base import Transformation
from .scalar_replace import ScalarReplace
from .source import KernelSource, Refused


#: _source's answers for the last few (kernel text, spec, launch): scalar replacement and its parse cost tens of
#: milliseconds, and the proposer asked for the same ones some 7 times a round (bench/search_pipeline.py's profile)
_SEEN: OrderedDict = OrderedDict()
_SEEN_KEEP = 16
_LOCK = threading.Lock()


def _remember(key, spec, answer) -> None:
    with _LOCK:
        _SEEN[key] = (spec, answer)        # the spec is held so its id is not reused while the entry lives
        while len(_SEEN) > _SEEN_KEEP:
            _SEEN.popitem(last=False)


def _recall(key, spec):
    with _LOCK:
        seen = _SEEN.get(key)
        if seen is None or seen[0] is not spec:
            return None
        _SEEN.move_to_end(key)
        return seen[1]


class AfterScalarReplace(Transformation):
    """`inner`, also where the kernel accumulates into global memory (`y[i] = 0; for (...) y[i] += ...`, the
    naive spelling of a sum): there it applies to the kernel after scalar replacement, which it then includes.
    The name, parameters and defaults are inner's: a chain replays the same way."""

    def __init__(self, inner: Transformation, start: str = "exact"):
        """`start`: "exact" starts the register at the target's value (the same float sum); "zero" sums the loop
        alone and adds the start after it (for rewrites that split the loop and reorder the sum anyway)."""
        super().__init__(inner.name, inner.summary, dict(inner.defaults))
        self.inner = inner
        self.start = start

    def _source(self, src, spec, launch):
        """(inner's space, the source it applies to, the scalar replacement or None); the same kernel text asked
        again (space, first_point and apply each ask, every proposal round again) is answered from _SEEN."""
        key = (type(self.inner).__name__, repr(getattr(self.inner, "__dict__", {})), self.start, src.text,
               id(spec), repr(launch))
        seen = _recall(key, spec)
        if isinstance(seen, str):
            raise Refused(seen)
        if seen is not None:
            space, replaced, rw = seen
            return copy.deepcopy(space), replaced, rw          # a caller may change its space
        try:
            out = self._uncached(src, spec, launch)
        except Refused as e:
            _remember(key, spec, str(e))
            raise
        _remember(key, spec, out)
        return copy.deepcopy(out[0]), out[1], out[2]

    def _uncached(self, src, spec, launch):
        try:
            return self.inner.space(src, spec, launch), src, None
        except Refused as first:
            try:
                rw = ScalarReplace().apply(src, spec, launch, {"start": self.start})
            except Refused:
                raise first from None
            replaced = KernelSource(rw.text, spec)
            try:
                return self.inner.space(replaced, spec, launch), replaced, rw
            except Refused as again:
                if str(again) == str(first):
                    raise first from None
                raise Refused(f"{again} (after scalar replacement; as written: {first})") from None

    def space(self, src, spec, launch):
        return self._source(src, spec, launch)[0]

    def first_point(self, src, spec, launch):
        if type(self.inner).first_point is Transformation.first_point:     # the defaults: no analysis needed
            return self.inner.defaults
        return self.inner.first_point(self._source(src, spec, launch)[1], spec, launch)

    def apply(self, src, spec, launch, params):
        _, s, first = self._source(src, spec, launch)
        rw = self.inner.apply(s, spec, launch, params)
        if first is not None:
            rw.explanation = f"{first.explanation.split(':')[0]} of the global sum, then {rw.explanation}"
        return rw
