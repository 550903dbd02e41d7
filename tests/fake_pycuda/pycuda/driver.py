"""The part of pycuda.driver that mepgen's worker calls, over host memory: allocations are byte arrays, copies
copy, a kernel launch does nothing. Enough for the worker to start, load input sets and answer `run` (an
in/out buffer then comes back as its input set's values), so a test sees the whole protocol without a GPU."""
import numpy as np

_memory: dict[int, bytearray] = {}
_next = [1 << 20]


class Error(Exception):
    pass


class device_attribute:
    L2_CACHE_SIZE, MULTIPROCESSOR_COUNT = "l2", "sms"


class function_attribute:
    MAX_DYNAMIC_SHARED_SIZE_BYTES = "smem"


def init():
    pass


def _at(address: int, n: int) -> memoryview:
    address = int(address)
    for base, block in _memory.items():
        if base <= address and address + n <= base + len(block):
            return memoryview(block)[address - base:address - base + n]
    raise Error(f"fake driver: no allocation holds [{address:#x}, +{n})")


def mem_alloc(n):
    base = _next[0]
    _next[0] += (n + 511) // 256 * 256
    _memory[base] = bytearray(n)
    return base


def memset_d8(dst, value, n, stream=None):
    _at(dst, n)[:] = bytes([value]) * n


def memcpy_htod(dst, src, stream=None):
    data = bytes(src) if isinstance(src, (bytes, bytearray)) else np.ascontiguousarray(src).tobytes()
    _at(dst, len(data))[:] = data


def memcpy_dtod_async(dst, src, n, stream=None):
    _at(dst, n)[:] = bytes(_at(src, n))


def memcpy_dtoh(dst, src):
    view = dst.view(np.uint8).reshape(-1)
    view[:] = np.frombuffer(bytes(_at(src, view.size)), np.uint8)


memset_d8_async, memcpy_htod_async = memset_d8, memcpy_htod


class Stream:
    def synchronize(self):
        pass


class Event:
    def record(self, stream=None):
        pass

    def time_till(self, other):
        return 0.0


class Device:
    def __init__(self, index=0):
        pass

    def make_context(self):
        return Context()

    def get_attribute(self, what):
        return {"l2": 1 << 20, "sms": 2}[what]

    def name(self):
        return "FAKE PYCUDA"


class Context:
    @staticmethod
    def get_device():
        return Device()

    @staticmethod
    def synchronize():
        pass

    def pop(self):
        pass


class Function:
    def __call__(self, *args, **kwargs):
        pass

    def _launch_kernel(self, grid, block, args, shared, stream):
        pass

    def set_attribute(self, what, value):
        pass


class Module:
    def get_function(self, name):
        return Function()

    def get_global(self, name):
        return mem_alloc(8), 8


def module_from_buffer(data):
    if not isinstance(data, bytes) or not data:
        raise Error("fake driver: a module needs its bytes")
    return Module()
