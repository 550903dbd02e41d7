"""Content hashes that name cached results and seed perturbations: the same parts give the same key."""
from __future__ import annotations

import hashlib
import json


def digest(*parts) -> str:
    """sha256 over parts (bytes, str, or anything JSON can write), 24 hex digits."""
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, bytes):
            data = p
        elif isinstance(p, str):
            data = p.encode()
        else:
            data = json.dumps(p, sort_keys=True, default=str).encode()
        h.update(hashlib.sha256(data).digest())
    return h.hexdigest()[:24]
