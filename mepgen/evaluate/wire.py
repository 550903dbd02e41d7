"""The messages between mepgen and its pycuda worker: JSON plus raw blobs, never pickle.

The worker launches candidate code on the GPU; if a candidate ever subverted it (device code writing the
worker's host memory where the GPU can address it, a driver bug), what it sends back must not be able to run
code in mepgen: a pickle can, JSON and numpy's `.npy` format (read with `allow_pickle=False`) cannot. So
every message is one JSON frame whose arrays and byte strings are replaced by `{"npy:": i}` / `{"bytes:": i}`
(keys no parameter name can spell), followed by frame i. Sizes are capped on reading (`Limit`), so a worker
cannot make mepgen allocate without end either. Input files travel as open descriptors (`send_fds`): the
worker reads its input sets without seeing the folders that hold them.
"""
from __future__ import annotations

import io
import json
import socket
from dataclasses import dataclass

import numpy as np

_NPY, _BYTES = "npy:", "bytes:"
#: descriptors per sendmsg (the kernel's SCM_MAX_FD is 253)
FDS_PER_MESSAGE = 200


class ProtocolError(Exception):
    """A message that is not what the protocol allows (too large, malformed, an unknown type)."""


@dataclass
class Limit:
    head_bytes: int = 64 << 20         # the JSON frame (timings of many launches are its largest part)
    blob_bytes: int = 1 << 30          # one array or byte string
    blobs: int = 4096                  # frames after the JSON


def encode(obj) -> list[bytes]:
    blobs: list[bytes] = []

    def walk(x):
        if isinstance(x, np.ndarray):
            buf = io.BytesIO()
            np.save(buf, np.ascontiguousarray(x), allow_pickle=False)
            blobs.append(buf.getvalue())
            return {_NPY: len(blobs) - 1}
        if isinstance(x, (bytes, bytearray, memoryview)):
            blobs.append(bytes(x))
            return {_BYTES: len(blobs) - 1}
        if isinstance(x, dict):
            if not all(isinstance(k, str) for k in x):
                raise TypeError("message dictionaries need string keys")
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(v) for v in x]
        if isinstance(x, np.generic):
            return x.item()
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        raise TypeError(f"cannot send a {type(x).__name__}")

    head = json.dumps({"body": walk(obj), "blobs": len(blobs)}).encode()
    return [head, *blobs]


def decode(head: bytes, blobs: list[bytes]):
    try:
        doc = json.loads(head)
    except (ValueError, UnicodeDecodeError) as e:
        raise ProtocolError(f"not JSON: {e}") from None

    def walk(x):
        if isinstance(x, dict):
            if len(x) == 1 and (_NPY in x or _BYTES in x):
                i = x.get(_NPY, x.get(_BYTES))
                if not isinstance(i, int) or not 0 <= i < len(blobs):
                    raise ProtocolError("a reference to a frame that was not sent")
                if _BYTES in x:
                    return blobs[i]
                try:
                    return np.load(io.BytesIO(blobs[i]), allow_pickle=False)
                except (ValueError, OSError, EOFError) as e:
                    raise ProtocolError(f"not an .npy array: {e}") from None
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    return walk(doc.get("body") if isinstance(doc, dict) else None)


def send(conn, obj) -> None:
    """Send `obj` (JSON types, numpy arrays and scalars, bytes) over a multiprocessing Connection."""
    for frame in encode(obj):
        conn.send_bytes(frame)


def recv(conn, limit: Limit | None = None):
    """The next message; ProtocolError when it breaks `limit` or the format; EOFError when the pipe closed."""
    limit = limit or Limit()
    try:
        head = conn.recv_bytes(limit.head_bytes)
        try:
            n = json.loads(head).get("blobs", 0)
        except (ValueError, AttributeError, UnicodeDecodeError):
            raise ProtocolError("the message's first frame is not a JSON object") from None
        if not isinstance(n, int) or not 0 <= n <= limit.blobs:
            raise ProtocolError(f"{n!r} frames announced (at most {limit.blobs})")
        blobs = [conn.recv_bytes(limit.blob_bytes) for _ in range(n)]
    except OSError as e:            # recv_bytes: "bad message length" beyond the cap
        raise ProtocolError(str(e)) from None
    return decode(head, blobs)


def send_fds(conn, fds: list[int]) -> None:
    """Pass open descriptors over the Connection's socket (after a message that says how many)."""
    with socket.socket(fileno=_dup(conn)) as s:
        for i in range(0, len(fds), FDS_PER_MESSAGE):
            socket.send_fds(s, [b"F"], fds[i:i + FDS_PER_MESSAGE])


def recv_fds(conn, count: int) -> list[int]:
    out: list[int] = []
    with socket.socket(fileno=_dup(conn)) as s:
        while len(out) < count:
            _, fds, _, _ = socket.recv_fds(s, 1, min(FDS_PER_MESSAGE, count - len(out)))
            if not fds:
                raise ProtocolError("descriptors announced but not sent")
            out += fds
    return out


def _dup(conn) -> int:
    import os
    return os.dup(conn.fileno())
