"""The pycuda worker's comparisons on the GPU (a part of pycuda_worker.State): reference outputs held there masked
(device_compare.py's kernels, the key never in device memory), outputs compared with them where they lie, inputs
checked bit for bit against a masked copy, and the perturbation re-check's outputs kept and compared on the GPU.
Only what differs goes back to the parent, which takes the evidence from it (verify.compare)."""
from __future__ import annotations

import os

import numpy as np


def load_npy(f):
    """An .npy file (a path, or an open file the parent passed as a descriptor: closed after)."""
    try:
        return np.load(f, allow_pickle=False)
    finally:
        if hasattr(f, "close"):
            f.close()


class GpuComparison:
    """Mixed into pycuda_worker.State: uses its cuda, stream, sets, outputs and _outs()."""

    def op_compare(self, cubin: bytes) -> None:
        """device_compare.py's kernels, and the key that masks the references (never in device memory)."""
        self.compare = self.cuda.module_from_buffer(cubin)
        self.key = int.from_bytes(os.urandom(8), "little")
        self.counts = self.cuda.mem_alloc(16)
        self.refs = {}
        for s in self.sets.values():
            s.pop("pristine", None)          # masked with the key of before

    def op_load_refs(self, k: int, refs: dict, rules: dict) -> list[str]:
        """Input set k's reference outputs onto the GPU, masked (device_compare.py); refs: name -> .npy file (an open
        file passed as a descriptor); rules: name -> [kernel, rtol, atol, poisoned]. The names held, those whose
        dtype and size are the output buffer's."""
        held = {}
        for name, f in refs.items():
            arr = np.ascontiguousarray(load_npy(f)).reshape(-1)
            p = next((q for q in self._outs() if q["name"] == name), None)
            if self.compare is None or name not in rules or p is None or name not in self.outputs \
                    or arr.dtype != np.dtype(p["dtype"]) or arr.size != p["count"] or not arr.size:
                continue
            buf = self.cuda.mem_alloc(arr.nbytes)
            self.cuda.memcpy_htod(buf, arr)
            mask = self.compare.get_function(f"mepgen_mask{arr.itemsize}")
            mask(np.uintp(int(buf)), np.uint64(arr.size), np.uint64(self.key), block=(256, 1, 1),
                 grid=(_blocks(arr.size), 1))
            held[name] = (buf, arr.size, *rules[name])
        self.cuda.Context.synchronize()
        self.refs[k] = held
        return sorted(held)

    def _matched(self, k: int) -> list[str]:
        """Outputs equal to input set k's references by verify.compare's rule, compared on the GPU."""
        out = []
        for name, (ref, n, kernel, rtol, atol, poisoned) in self.refs.get(k, {}).items():
            self.cuda.memcpy_htod(self.counts, np.array([0, 2**64 - 1], np.uint64))
            fn = self.compare.get_function(kernel)
            got = self.outputs[name][0]
            args = (np.uintp(int(got)), np.uintp(int(ref)), np.uint64(n), np.uint64(self.key))
            if kernel.startswith("mepgen_close"):
                args += (np.float64(rtol), np.float64(atol), np.int32(1 if poisoned else 0))
            fn(*args, np.uintp(int(self.counts)), block=(256, 1, 1), grid=(_blocks(n), 1))
            counts = np.empty(2, np.uint64)
            self.cuda.memcpy_dtoh(counts, self.counts)
            if int(counts[0]) == 0:
                out.append(name)
        return out

    def _differs(self, k: int, name: str, host: np.ndarray) -> bool:
        """Whether input `name` of set k on the GPU differs bit for bit from the input set, compared there with a
        masked copy made on first use (device_compare's kernels, in words as wide as size and address allow)."""
        s, dev = self.sets[k], self.sets[k]["dev"][name]
        width = next(w for w in (8, 4, 2, 1) if host.nbytes % w == 0 and int(dev) % w == 0)
        n = host.nbytes // width
        pristine = s.setdefault("pristine", {})
        if name not in pristine:
            buf = self.cuda.mem_alloc(host.nbytes)
            self.cuda.memcpy_htod(buf, host)
            self.compare.get_function(f"mepgen_mask{width}")(np.uintp(int(buf)), np.uint64(n), np.uint64(self.key),
                                                               block=(256, 1, 1), grid=(_blocks(n), 1))
            pristine[name] = buf
        self.cuda.memcpy_htod(self.counts, np.array([0, 2**64 - 1], np.uint64))
        self.compare.get_function(f"mepgen_same{width}")(np.uintp(int(dev)), np.uintp(int(pristine[name])),
                                                         np.uint64(n), np.uint64(self.key), np.uintp(int(self.counts)),
                                                         block=(256, 1, 1), grid=(_blocks(n), 1))
        counts = np.empty(2, np.uint64)
        self.cuda.memcpy_dtoh(counts, self.counts)
        return int(counts[0]) != 0

    def _keep_outputs(self) -> None:
        """The outputs into scratch buffers on the GPU (kept between sessions), for _perturbed_on_gpu."""
        self.scratch = getattr(self, "scratch", {})
        for name, (buf, nbytes, _) in self.outputs.items():
            if name not in self.scratch:
                self.scratch[name] = self.cuda.mem_alloc(nbytes)
            self.cuda.memcpy_dtod_async(self.scratch[name], buf, nbytes, self.stream)
        self.stream.synchronize()

    def _kept(self) -> dict:
        out = {}
        for p in self._outs():
            arr = np.empty(p["count"], dtype=np.dtype(p["dtype"]))
            self.cuda.memcpy_dtoh(arr, self.scratch[p["name"]])
            out[p["name"]] = arr
        return out

    def _count(self, kernel: str, *args, n: int) -> int:
        self.cuda.memcpy_htod(self.counts, np.array([0, 2**64 - 1], np.uint64))
        self.compare.get_function(kernel)(*args, np.uintp(int(self.counts)), block=(256, 1, 1), grid=(_blocks(n), 1))
        counts = np.empty(2, np.uint64)
        self.cuda.memcpy_dtoh(counts, self.counts)
        return int(counts[0])

    def _perturbed_on_gpu(self, k: int) -> dict | None:
        """perturb.recheck on the GPU: the candidate's kept outputs against the original's (in the output buffers,
        masked in place for the comparison and unmasked after), `followed` and `broken` against set k's
        references. {"followed": n, "outputs": names} when every output matches and none broke, else None."""
        followed = 0
        for name, (ref, n, kernel, rtol, atol, poisoned) in self.refs[k].items():
            now = self.outputs[name][0]
            size = int(kernel[-1])
            key = np.uint64(self.key)
            if kernel.startswith("mepgen_close") and self._count(
                    f"mepgen_broken{size}", np.uintp(int(now)), np.uintp(int(ref)), np.uint64(n), key, n=n):
                return None
            followed += self._count(f"mepgen_same{size}", np.uintp(int(now)), np.uintp(int(ref)), np.uint64(n), key,
                                    n=n)
            mask = self.compare.get_function(f"mepgen_mask{size}")
            mask(np.uintp(int(now)), np.uint64(n), key, block=(256, 1, 1), grid=(_blocks(n), 1))
            args = (np.uintp(int(self.scratch[name])), np.uintp(int(now)), np.uint64(n), key)
            if kernel.startswith("mepgen_close"):
                args += (np.float64(rtol), np.float64(atol), np.int32(1 if poisoned else 0))
            bad = self._count(kernel, *args, n=n)
            mask(np.uintp(int(now)), np.uint64(n), key, block=(256, 1, 1), grid=(_blocks(n), 1))
            if bad:
                return None
        return {"followed": followed, "outputs": sorted(self.refs[k])}


def _blocks(n: int) -> int:
    """Blocks of 256 threads for a grid-stride loop over n elements (a few waves, not one thread per element)."""
    return max(1, min((n + 255) // 256, 4096))
