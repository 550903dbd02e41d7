"""wire.py, the pycuda worker's messages: JSON and .npy frames, capped, never pickle."""
from __future__ import annotations

import io
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


def test_arrays_of_every_shape_cross_without_copies_and_as_connection_frames():
    """Empty, 0-d, Fortran-ordered, structured and multi-megabyte arrays come back equal (the large one from a
    thread: a socket holds less than a frame); the frames are multiprocessing.Connection's, so a plain
    Connection reads what wire sends and the other way round; a frame whose length disagrees with its .npy
    header is a protocol error."""
    import threading
    a, b = Pipe()
    big = np.arange(3 << 20, dtype=np.float32)
    arrays = {"empty": np.zeros((0, 3), np.float64), "scalar": np.array(2.5), "fortran": np.asfortranarray(
        np.arange(6, dtype=np.int16).reshape(2, 3)), "rec": np.array([(1, 2.0)], dtype=[("i", "<i4"), ("x", "<f8")]),
        "big": big}
    sender = threading.Thread(target=wire.send, args=(a, ["ok", arrays]))
    sender.start()
    got = wire.recv(b, wire.Limit(blob_bytes=big.nbytes + 1024))
    sender.join()
    for name, arr in arrays.items():
        assert got[1][name].shape == arr.shape and got[1][name].dtype == arr.dtype, name
        assert np.array_equal(got[1][name], arr), name
    assert got[1]["big"].flags.writeable
    a.send_bytes(b'{"body": ["ok"], "blobs": 0}')                    # a plain Connection's frame
    assert wire.recv(b) == ["ok"]
    wire.send(a, ["ok", b"raw"])
    assert b.recv_bytes() == b'{"body": ["ok", {"bytes:": 0}], "blobs": 1}' and b.recv_bytes() == b"raw"
    a.send_bytes(b'{"body": {"npy:": 0}, "blobs": 1}')
    buf = io.BytesIO()
    np.save(buf, np.arange(4, dtype=np.int32))
    a.send_bytes(buf.getvalue()[:-4])                                  # one element short
    with pytest.raises(wire.ProtocolError, match="length does not match"):
        wire.recv(b)
    a.close()
    with pytest.raises(EOFError):
        wire.recv(b)
