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
import os
import socket
import struct
from dataclasses import dataclass

import numpy as np
import numpy.lib.format as npy_format

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


def _npy_parts(x: np.ndarray) -> list:
    """An array as an .npy frame in two parts: its header, then its memory as it is (no copy)."""
    a = np.require(x, requirements="C")            # C order; unlike ascontiguousarray, keeps a 0-d array 0-d
    if a.dtype.hasobject:
        raise TypeError("cannot send an array of Python objects")
    head = io.BytesIO()
    header = npy_format.header_data_from_array_1_0(a)
    try:
        npy_format.write_array_header_1_0(head, header)
    except ValueError:                       # a header over 64 KiB (a very long structured dtype)
        head = io.BytesIO()
        npy_format.write_array_header_2_0(head, header)
    return [head.getvalue(), a.reshape(-1).view(np.uint8).data]


def encode(obj) -> list:
    """[the JSON frame, then one frame per array or byte string]; a frame is a list of buffers sent back to back."""
    blobs: list[list] = []

    def walk(x):
        if isinstance(x, np.ndarray):
            blobs.append(_npy_parts(x))
            return {_NPY: len(blobs) - 1}
        if isinstance(x, (bytes, bytearray, memoryview)):
            blobs.append([bytes(x)])
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
    return [[head], *blobs]


def _npy_array(blob: bytearray) -> np.ndarray:
    """The array an .npy frame holds, over the frame's own memory (no copy); never an object array."""
    view = memoryview(blob)
    f = io.BytesIO(bytes(view[:min(len(blob), (64 << 10) + 16)]))      # magic + header (v2 allows 4 GiB, v1 64 KiB)
    version = npy_format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = npy_format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran, dtype = npy_format.read_array_header_2_0(f)
    else:
        raise ValueError(f"unsupported .npy version {version}")
    if dtype.hasobject:
        raise ValueError("an array of Python objects needs pickle")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if f.tell() + count * dtype.itemsize != len(blob):
        raise ValueError("the frame's length does not match the array's header")
    arr = np.frombuffer(blob, dtype=dtype, count=count, offset=f.tell())
    return arr.reshape(shape[::-1]).transpose() if fortran else arr.reshape(shape)


def decode(head: bytes, blobs: list):
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
                    return bytes(blobs[i])
                try:
                    return _npy_array(blobs[i])
                except (ValueError, OSError, EOFError) as e:
                    raise ProtocolError(f"not an .npy array: {e}") from None
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    return walk(doc.get("body") if isinstance(doc, dict) else None)


# Frames as multiprocessing.Connection frames them (a 4-byte big-endian length, or -1 and an 8-byte length above
# 2 GiB - 1), so either side may be a plain Connection; written and read here without the copies Connection makes
# (it joins a frame in a BytesIO from reads of at most a pipe's buffer): arrays of GBs cross at memory speed.

def _write_all(fd: int, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _send_frame(conn, parts: list) -> None:
    n = sum(memoryview(p).nbytes for p in parts)
    fd = conn.fileno()
    _write_all(fd, struct.pack("!i", n) if n <= 0x7FFFFFFF else struct.pack("!iQ", -1, n))
    for p in parts:
        _write_all(fd, p)


def _read_into(fd: int, view: memoryview) -> None:
    while view:
        n = os.readv(fd, [view])
        if n == 0:
            raise EOFError("the other side closed the pipe")
        view = view[n:]


def _recv_frame(conn, maxsize: int) -> bytearray:
    fd = conn.fileno()
    head = bytearray(4)
    _read_into(fd, memoryview(head))
    size, = struct.unpack("!i", head)
    if size == -1:
        wide = bytearray(8)
        _read_into(fd, memoryview(wide))
        size, = struct.unpack("!Q", wide)
    if size < 0 or size > maxsize:
        raise ProtocolError(f"a frame of {size} bytes (at most {maxsize})")
    out = bytearray(size)
    _read_into(fd, memoryview(out))
    return out


def send(conn, obj) -> None:
    """Send `obj` (JSON types, numpy arrays and scalars, bytes) over a multiprocessing Connection."""
    for frame in encode(obj):
        _send_frame(conn, frame)


def recv(conn, limit: Limit | None = None):
    """The next message; ProtocolError when it breaks `limit` or the format; EOFError when the pipe closed."""
    limit = limit or Limit()
    head = bytes(_recv_frame(conn, limit.head_bytes))
    try:
        n = json.loads(head).get("blobs", 0)
    except (ValueError, AttributeError, UnicodeDecodeError):
        raise ProtocolError("the message's first frame is not a JSON object") from None
    if not isinstance(n, int) or not 0 <= n <= limit.blobs:
        raise ProtocolError(f"{n!r} frames announced (at most {limit.blobs})")
    return decode(head, [_recv_frame(conn, limit.blob_bytes) for _ in range(n)])


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
    return os.dup(conn.fileno())
