"""Size symbols: the names that stand for host values mepgen could not follow, shared by the resolver and the
chain (one symbol per expression, with the reason shown to the user)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .readers import kind_of


@dataclass
class Symbols:
    """Size symbols that stand for host values mepgen could not follow, keyed by the expression they
    replace (so `n = A.nrows` in two functions is one symbol), with the reason shown to the user."""
    by_key: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    preferred: dict[str, str] = field(default_factory=dict)   # var usr -> name to use if it needs a symbol
    defaults: dict[str, int] = field(default_factory=dict)    # symbol -> the application's own default (argv)
    from_run: dict[str, int] = field(default_factory=dict)    # symbol -> value of the app's run command (argv)
    kinds: dict[str, str] = field(default_factory=dict)       # symbol -> its todo's kind, where the reason knows it

    def get(self, key: str, name: str, reason: str, taken: set[str]) -> str:
        if key in self.by_key:
            return self.by_key[key]
        base = re.sub(r"\W", "_", name).upper() or "SIZE"
        out, i = base, 2
        while out in taken or out in self.reasons:
            out, i = f"{base}_{i}", i + 1
        self.by_key[key] = out
        self.reasons[out] = reason
        if kind_of(reason) is not None:
            self.kinds[out] = kind_of(reason)
        return out
