"""Every read of a block index or grid size along one axis, for the rewrites that give the grid another shape
along it (coarsen_blocks: fewer blocks, each doing several; spread_iterations: more blocks, sharing a thread's
loops). Such a rewrite replaces each read by what the new grid means, so it must see all of them: none hidden in a
macro, none in a function the kernel calls."""
from __future__ import annotations

import re

from .analysis import squash
from .replicas import _functions
from .source import Refused, kind, walk


def axis_refs(src, axis: str, names=("blockIdx",)) -> list:
    """The kernel's reads of `NAME.<axis>` for NAME in `names` (cursors); Refused where one is spelled through a
    macro: the kernel's tokens (comments and strings are none) name more of them than its syntax tree shows as
    such reads."""
    spelled_as = {f"{n}.{axis}" for n in names}
    refs = [c for c in walk(src.body) if kind(c) == "MEMBER_REF_EXPR" and squash(src.src(c)) in spelled_as]
    toks = [t.spelling for t in src.body.get_tokens()]
    spelled = sum(1 for i in range(len(toks) - 2) if toks[i] in names and toks[i + 1:i + 3] == [".", axis])
    if spelled != len(refs) or any(src.src(c).replace(" ", "") not in spelled_as for c in refs):
        raise Refused(f"{' or '.join(f'{n}.{axis}' for n in names)} is used through a macro")
    return refs


def callees_read(src, axis: str) -> None:
    """Refused where a function the kernel calls (at any depth) reads blockIdx or gridDim along `axis`."""
    for fn in _functions(src)[1:]:
        if re.search(rf"\b(blockIdx|gridDim)\s*\.\s*{axis}\b", " ".join(t.spelling for t in fn.get_tokens())):
            raise Refused(f"{fn.spelling}, which the kernel calls, reads blockIdx.{axis} or gridDim.{axis}")
