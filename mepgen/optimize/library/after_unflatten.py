"""A 2D rewrite also on a 2D grid spelled as a 1D launch (`idx % W`, `idx / W`): there it applies to the
kernel after unflatten (which launches the grid as 2D), and the candidate includes both steps.

Without it the 2D rewrites (tile_stencil) only see a flattened stencil if unflatten alone wins first, and
unflatten alone is often no faster: the hill climb would never get to the tiling. The name, parameters and
defaults are the inner transformation's, so a recorded chain replays the same way (as AfterScalarReplace).
"""
from __future__ import annotations

from .base import Transformation, current_launch
from .source import KernelSource, Refused
from .unflatten import Unflatten


class AfterUnflatten(Transformation):
    def __init__(self, inner: Transformation):
        super().__init__(inner.name, inner.summary, dict(inner.defaults))
        self.inner = inner

    def _source(self, src, spec, launch):
        try:
            return self.inner.space(src, spec, launch), src, launch, None
        except Refused as first:
            try:
                rw = Unflatten().apply(src, spec, launch, dict(Unflatten().defaults))
            except Refused:
                raise first from None
            flat = KernelSource(rw.text, spec)
            launch2 = current_launch(spec, rw.launch)
            try:
                return self.inner.space(flat, spec, launch2), flat, launch2, rw
            except Refused as again:
                raise Refused(f"{first} (as written; after unflatten: {again})") from None

    def space(self, src, spec, launch):
        return self._source(src, spec, launch)[0]

    def first_point(self, src, spec, launch):
        if type(self.inner).first_point is Transformation.first_point:     # the defaults: no analysis needed
            return self.inner.defaults
        _, s, l2, _ = self._source(src, spec, launch)
        return self.inner.first_point(s, spec, l2)

    def apply(self, src, spec, launch, params):
        _, s, l2, first = self._source(src, spec, launch)
        rw = self.inner.apply(s, spec, l2, params)
        if first is not None:
            if rw.launch is None:
                rw.launch = first.launch
            rw.explanation = f"unflatten (the 1D launch as a 2D grid), then {rw.explanation}"
        return rw
