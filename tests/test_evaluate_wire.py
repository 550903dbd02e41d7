"""wire.py, the pycuda worker's messages: JSON and .npy frames, capped, never pickle."""
from __future__ import annotations

import os
import pickle
from multiprocessing import Pipe

import numpy as np
import pytest

from mepgen.evaluate import wire


def test_a_reply_comes_back_as_it_was_sent():
    a, b = Pipe()
    reply = ["ok", {"outputs": {"y": np.arange(5, dtype=np.float32), "n": np.array([[1, 2]], np.int64)},
                    "rounds": [[0.5, 0.25]], "changed": [], "seed": np.int64(7), "cubin": b"\x7fELF", "none": None}]
    wire.send(a, reply)
    got = wire.recv(b)
    assert got[0] == "ok" and got[1]["rounds"] == [[0.5, 0.25]] and got[1]["seed"] == 7 and got[1]["none"] is None
    assert got[1]["cubin"] == b"\x7fELF"
    for name, arr in reply[1]["outputs"].items():
        assert got[1]["outputs"][name].dtype == arr.dtype and np.array_equal(got[1]["outputs"][name], arr)


def test_a_pickle_is_refused_not_run(tmp_path):
    class Payload:
        def __reduce__(self):
            return (open, (str(tmp_path / "ran"), "w"))
    a, b = Pipe()
    a.send_bytes(pickle.dumps(["ok", Payload()]))
    with pytest.raises(wire.ProtocolError):
        wire.recv(b)
    a.send_bytes(b'{"body": {"npy:": 0}, "blobs": 1}')     # an object array inside .npy needs pickle too
    obj = np.empty(1, dtype=object)
    obj[0] = Payload()
    import io
    buf = io.BytesIO()
    np.save(buf, obj, allow_pickle=True)
    a.send_bytes(buf.getvalue())
    with pytest.raises(wire.ProtocolError):
        wire.recv(b)
    assert not (tmp_path / "ran").exists()


def test_sizes_are_capped():
    a, b = Pipe()
    wire.send(a, ["ok", np.zeros(1 << 16, np.uint8)])
    with pytest.raises(wire.ProtocolError):
        wire.recv(b, wire.Limit(blob_bytes=1 << 10))
    a, b = Pipe()
    a.send_bytes(b'{"body": null, "blobs": 100000}')
    with pytest.raises(wire.ProtocolError):
        wire.recv(b)


def test_descriptors_pass_after_a_message(tmp_path):
    a, b = Pipe()
    files = []
    for i in range(3):
        (tmp_path / f"f{i}").write_bytes(bytes([i]) * 3)
        files.append(os.open(tmp_path / f"f{i}", os.O_RDONLY))
    wire.send(a, ["load_set", 0, ["f0", "f1"], ["f2"]])
    wire.send_fds(a, files)
    wire.send(a, ["next"])
    msg = wire.recv(b)
    got = wire.recv_fds(b, len(msg[2]) + len(msg[3]))
    assert [os.read(fd, 3) for fd in got] == [b"\0\0\0", b"\1\1\1", b"\2\2\2"]
    assert wire.recv(b) == ["next"]
    for fd in files + got:
        os.close(fd)
