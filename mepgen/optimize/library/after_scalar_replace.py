"""A transformation applied, where it refuses the kernel as written, to the kernel after scalar replacement
(the naive `y[i] = 0; for (...) y[i] += ...` spelling of a sum); the name and parameters are the inner one's, so
a recorded chain replays the same way."""
from __future__ import annotations

from .base import Transformation
from .scalar_replace import ScalarReplace
from .source import KernelSource, Refused


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
