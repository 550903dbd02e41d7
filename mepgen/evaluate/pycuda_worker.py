"""The pycuda worker process: one CUDA context, the input sets resident on the GPU, kernels from cubins.

Started by pycuda_backend.py (`python -m mepgen.evaluate.pycuda_worker FD DEVICE`, inside the sandbox:
confined.for_worker) and driven over a socket (wire.py: JSON and .npy frames, no pickle): `setup`, `load_set`,
`load`, `unload`, `run`, `time`, `exit`. Each reply is ["ok", payload], ["cuda_error", message] or
["error", message]. The worker sees no workspace: cubins come as bytes, input files as open descriptors.
After a CUDA error the context is poisoned (errors are sticky), so the worker replies and exits; the parent
starts a fresh one. Device pointers a capture found inside arguments and buffers (mep.yaml `buffers`, `relocate`)
get the worker's own addresses for each input set, as the native harness writes its own (captured_pointers.py).

Every launch follows the harness protocol: outputs poisoned (floats 0xFF bytes = NaN, integers 0xA5),
in/out buffers reset from the input set's device copy, constants set, then optionally the L2 flushed (the
harness's read kernel, templates/harness/l2_flush.h, so the L2 holds only clean lines); timing
alternates baseline and candidate launch by launch (A B B A ...), each timed with CUDA events. With a
perturbation seed, every launch of the session sees its inputs changed in one block per perturbable buffer
(perturb.py, the same blocks as the harness's perturb.h), and after timing the candidate and the original run
once more at perturb.RECHECK_STEP: both outputs go back for the parent to compare.

Reference outputs (`load_refs`, from the parent's store) stay on the GPU masked (device_compare.py): a run or a
re-check with `check` compares the outputs with them there and sends back only those that differ, for the parent
to take the evidence from (verify.compare); the perturbation re-check likewise, when every output's reference is
there (_perturbed_on_gpu). Those comparisons live in pycuda_gpu_compare.py.
"""
from __future__ import annotations

import importlib
import os
import sys
from multiprocessing.connection import Connection

import numpy as np

from .. import perturb
from ..spec import PLACEMENT_SPAN
from . import captured_pointers, guards, l2_flush, wire
from .pycuda_gpu_compare import GpuComparison, load_npy as _load

FLOAT_POISON, INT_POISON = 0xFF, 0xA5


def same_bytes(a: np.ndarray, b: np.ndarray, chunk: int = 64 << 20) -> bool:
    """Whether two uint8 arrays of one size hold the same bytes: 64-bit words slice by slice, the tail byte-wise."""
    if a.size != b.size:
        return False
    words = a.size // 8 * 8
    for lo in range(0, words, chunk):
        hi = min(words, lo + chunk)
        if not np.array_equal(a[lo:hi].view(np.uint64), b[lo:hi].view(np.uint64)):
            return False
    return bool(np.array_equal(a[words:], b[words:]))


def _align(offset: int, align: int) -> int:
    return (offset + align - 1) // align * align


class State(GpuComparison):
    buffers: list = []          # mep.yaml `buffers` (op_setup): allocations reached only through captured pointers

    def __init__(self, cuda, device: int, exact: bool = False):
        self.cuda = cuda
        self.ctx = cuda.Device(device).make_context()
        self.stream = cuda.Stream()
        self.params: list[dict] = []
        self.outputs: dict = {}                 # name -> (device address, nbytes, poison byte)
        self.guards = guards.ExactAllocations(cuda) if exact else guards.DeviceGuards(cuda)  # guard zones (guards.py)
        self.sets: dict[int, dict] = {}
        self.modules: dict[str, dict] = {}
        attr = getattr(cuda.device_attribute, "L2_CACHE_SIZE", None)
        l2 = cuda.Context.get_device().get_attribute(attr) if attr is not None else 64 << 20
        self.flush_bytes = l2_flush.flush_bytes(l2)
        self.flush_buf = cuda.mem_alloc(self.flush_bytes)
        cuda.memset_d8(self.flush_buf, 0, self.flush_bytes)
        self.flush_sink = cuda.mem_alloc(4)
        self.flush_fn = None                    # the flush kernel, loaded by setup
        sms = cuda.Context.get_device().get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
        self.flush_grid = l2_flush.BLOCKS_PER_SM * sms
        self.device_name = cuda.Context.get_device().name()
        self.l2_bytes = l2
        self.touched: list = []                 # (set, name, pos, m): blocks changed by _perturb, undone next
        self.keep: list = []                    # host arrays of async copies in flight

    # --- state --------------------------------------------------------------------------------------

    def op_setup(self, params: list[dict], flush_cubin: bytes, compare_cubin: bytes | None = None,
                 buffers: list[dict] | None = None, symbols: list[dict] | None = None) -> dict:
        """params: name, role, dtype, count, relocate (in kernel order); flush_cubin: the L2 flush kernel
        (l2_flush.py), its bytes (the worker sees no build folder); compare_cubin: device_compare.py's kernels (None:
        outputs are compared in the parent); buffers: mep.yaml `buffers` (name, dtype, count, role, relocate), the
        allocations captured pointers reach: each input set holds its own copy (from its file, zeros without one),
        and one with role inout is an output as well, reset from that copy before every run; symbols: the
        `__device__` variables the kernel writes (name, dtype, count), outputs read back from each module's symbol
        after a kept run (_harvest)."""
        self.params = params
        self.buffers = list(buffers or [])
        self.symbols = list(symbols or [])
        self.refs: dict[int, dict] = {}
        self.compare = None
        if compare_cubin:
            self.op_compare(compare_cubin)
        self.perturbed = sorted((p for p in params if p.get("perturb") is not None), key=lambda p: p["perturb"])
        self.perturbed = [p["name"] for p in self.perturbed]
        self.flush_module = self.cuda.module_from_buffer(flush_cubin)
        self.flush_fn = self.flush_module.get_function(l2_flush.KERNEL)
        for p in [*params, *self.buffers, *self.symbols]:
            if p.get("role") in ("out", "inout"):
                dt = np.dtype(p["dtype"])
                nbytes = max(1, dt.itemsize * p["count"])
                poison = FLOAT_POISON if dt.kind == "f" else INT_POISON
                self.outputs[p["name"]] = (self._alloc(nbytes, p.get("placement"), p["name"]), nbytes, poison)
        return {"device": self.device_name, "l2_bytes": self.l2_bytes}

    def _alloc(self, nbytes: int, placement: int | None, name: str) -> int:
        """Device memory for a buffer, placed as the harness places it (mep_alloc): `placement` bytes past a
        PLACEMENT_SPAN boundary; without one, a buffer of PLACEMENT_SPAN bytes or more on a boundary (as cudaMalloc
        places an application's large buffers), a smaller one where mem_alloc puts it; inside guard zones
        (guards.DeviceGuards: the allocation is kept alive there)."""
        return self.guards.allocate(nbytes, placement, PLACEMENT_SPAN, name)

    def op_load_set(self, k: int, inputs: dict, consts: dict) -> None:
        """inputs: name -> .npy file; consts: file stem -> .npy file (input set k's files: open files passed
        as descriptors, as the worker sees no workspace; or paths)."""
        cuda = self.cuda
        inputs = {name: _load(f) for name, f in inputs.items()}
        consts = {stem: _load(f) for stem, f in consts.items()}
        for b in self.buffers:        # a buffer without an input file starts as zeros (the harness's memset)
            if b["name"] not in inputs:
                inputs[b["name"]] = np.zeros(b["count"], np.dtype(b["dtype"]))
        s = {"host": inputs, "dev": {}, "const": {}}
        placement = {p["name"]: p.get("placement") for p in self.params}
        for name, arr in inputs.items():
            s["dev"][name] = self._alloc(max(1, arr.nbytes), placement.get(name), name)
        # captured pointers inside the data: this set's addresses (an input's own copy, or an output buffer), in the
        # host copy as well, which is what an input is checked against and restored from
        for h in [*self.params, *self.buffers]:
            if h.get("relocate") and h.get("role") != "out" and h["name"] in inputs:
                inputs[h["name"]] = captured_pointers.patch_array(inputs[h["name"]], h["relocate"],
                                                                  lambda n: self._address(s, n), h["name"])
        for name, arr in inputs.items():
            cuda.memcpy_htod(s["dev"][name], np.ascontiguousarray(arr))
        for stem, arr in consts.items():
            buf = cuda.mem_alloc(max(1, arr.nbytes))
            cuda.memcpy_htod(buf, np.ascontiguousarray(arr))
            s["const"][stem] = (buf, arr.nbytes)
        self.sets[k] = s

    def _address(self, s: dict, name: str) -> int:
        """The device address the kernel sees for buffer `name` with input set `s` loaded: an output's (out/inout
        parameters, inout buffers) or the set's own copy (in parameters, other buffers)."""
        if name in self.outputs:
            return int(self.outputs[name][0])
        if name in s["dev"]:
            return int(s["dev"][name])
        raise KeyError(f"a captured pointer points into {name}, which is no buffer of the MEP")

    def _outs(self) -> list[dict]:
        """The outputs in the order they come back: out/inout parameters, inout buffers, written symbols."""
        return [x for x in [*self.params, *self.buffers, *self.symbols] if x["name"] in self.outputs]

    def op_load(self, key: str, cubin: bytes, desc: dict) -> None:
        """cubin: the module's bytes (the worker sees no build folder)."""
        cuda = self.cuda
        module = cuda.module_from_buffer(cubin)
        consts, harvest = [], []
        for c in desc["constants"]:
            ptr, size = module.get_global(c["symbol"])
            if c.get("output"):
                harvest.append((ptr, size, c["name"]))
            if "bytes" in c:
                data = bytes.fromhex(c["bytes"])
                src = cuda.mem_alloc(max(1, len(data)))
                cuda.memcpy_htod(src, data)
                consts.append((ptr, min(size, len(data)), src, None))
            else:
                consts.append((ptr, size, None, c["file"]))
        func = module.get_function(desc["entry"])
        if desc["shared"] > 48 * 1024:   # dynamic shared memory beyond 48 KiB must be opted into
            func.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, desc["shared"])
        self.modules[key] = {"module": module, "func": func, "desc": desc, "consts": consts, "harvest": harvest,
                             "args": {}}

    def op_unload(self, key: str) -> None:
        self.modules.pop(key, None)

    # --- launching ----------------------------------------------------------------------------------

    def _args(self, m: dict, k: int) -> bytes:
        """The kernel's parameter buffer for input set k, laid out with each parameter's alignment."""
        if k in m["args"]:
            return m["args"][k]
        buf = bytearray()
        for p, spec in zip(m["desc"]["params"], self.params):
            off = _align(len(buf), p["align"])
            buf.extend(bytes(off - len(buf)))
            if p["role"] == "scalar":
                value = bytes.fromhex(p["bytes"])
                if spec.get("relocate"):      # a struct holding device pointers: this set's addresses written in
                    value = captured_pointers.patch_bytes(value, spec["relocate"],
                                                          lambda n: self._address(self.sets[k], n), p["name"])
            elif p["role"] == "in":
                value = int(self.sets[k]["dev"][p["name"]]).to_bytes(8, "little")
            else:
                value = int(self.outputs[p["name"]][0]).to_bytes(8, "little")
            buf.extend(value[:p["size"]].ljust(p["size"], b"\0"))
        m["args"][k] = bytes(buf)
        return m["args"][k]

    def _prepare(self, m: dict, k: int, flush: bool) -> None:
        cuda, st, s = self.cuda, self.stream, self.sets[k]
        for name, (buf, nbytes, poison) in self.outputs.items():
            if name in s["dev"]:
                cuda.memcpy_dtod_async(buf, s["dev"][name], nbytes, st)
            else:
                cuda.memset_d8_async(buf, poison, nbytes, st)
        for ptr, size, src, stem in m["consts"]:
            if stem is not None:
                src, n = s["const"][stem]
                size = min(size, n)
            cuda.memcpy_dtod_async(ptr, src, size, st)
        if flush:        # last, so that the resets' dirty lines are written back before the timed launch
            self.flush_fn(self.flush_buf, np.uint64(self.flush_bytes // 16), self.flush_sink,
                          block=(l2_flush.BLOCK, 1, 1), grid=(self.flush_grid, 1), stream=st)

    def _launch(self, m: dict, k: int) -> None:
        d = m["desc"]
        m["func"]._launch_kernel(tuple(d["grid"]), tuple(d["block"]), self._args(m, k), d["shared"], self.stream)

    def _harvest(self, m: dict) -> None:
        """After a run whose outputs are kept: the `__device__` variables the kernel writes (this module's) into
        their output buffers, as the harness's harvest() does."""
        for ptr, size, name in m["harvest"]:
            buf, nbytes, _ = self.outputs[name]
            self.cuda.memcpy_dtod_async(buf, ptr, min(size, nbytes), self.stream)

    def _outputs(self, skip=()) -> dict:
        out = {}
        for p in self._outs():
            if p["name"] not in skip:
                arr = np.empty(p["count"], dtype=np.dtype(p["dtype"]))
                self.cuda.memcpy_dtoh(arr, self.outputs[p["name"]][0])
                out[p["name"]] = arr
        return out

    def _inputs_changed(self, k: int) -> list[str]:
        """`in` buffers the kernel wrote to (restored, so later candidates see the true inputs). Each is copied back
        into one scratch buffer kept between runs (a GB input is not allocated again per run) and compared bit for
        bit in slices of 64-bit words (no mask of a byte per byte of input). Buffers reached through captured
        pointers that are not outputs are restored the same way but not named: the native harness does not check
        them (each of its runs is a fresh process), and a later candidate must not see what this one wrote."""
        changed, s = [], self.sets[k]
        checked = [(p["name"], True) for p in self.params if p["role"] == "in"] + \
            [(b["name"], False) for b in self.buffers if b.get("role") != "inout"]
        for name, named in checked:
            host = np.ascontiguousarray(s["host"][name])
            if getattr(self, "compare", None) is not None and host.nbytes:   # on the GPU, against a masked copy
                if not self._differs(k, name, host):
                    continue
                s["pristine"].pop(name)     # confirmed below on the host: the copy itself may have been hit
            raw = host.reshape(-1).view(np.uint8)
            if getattr(self, "_scratch", None) is None or self._scratch.size < raw.size:
                self._scratch = np.empty(raw.size, np.uint8)
            now = self._scratch[:raw.size]
            self.cuda.memcpy_dtoh(now, s["dev"][name])
            if not same_bytes(now, raw):
                if named:
                    changed.append(name)
                self.cuda.memcpy_htod(s["dev"][name], host)
        return changed

    def op_run(self, key: str, k: int, check: bool = False) -> dict:
        """One launch on input set k; with `check`, the outputs equal to the references on the GPU (`matched`) do
        not come back."""
        m = self.modules[key]
        start, end = self.cuda.Event(), self.cuda.Event()
        self._prepare(m, k, flush=False)
        start.record(self.stream)
        self._launch(m, k)
        end.record(self.stream)
        self._harvest(m)
        self.stream.synchronize()
        self.cuda.Context.synchronize()
        matched = self._matched(k) if check else []
        return {"outputs": self._outputs(matched), "matched": matched, "inputs_changed": self._inputs_changed(k),
                "device": self.device_name, "run_ms": start.time_till(end), "guard": self.guards.check("the run")}

    def op_launch(self, key: str, k: int) -> dict:
        """One launch on input set k, nothing sent back (memcheck_worker.py: the sanitizer's output is the verdict)."""
        m = self.modules[key]
        self._prepare(m, k, flush=False)
        self._launch(m, k)
        self.cuda.Context.synchronize()
        return {"device": self.device_name}

    # --- perturbation (perturb.py) ------------------------------------------------------------------

    def _unperturb(self) -> None:
        for k, name, pos, m in self.touched:
            host = self.sets[k]["host"][name]
            item = host.dtype.itemsize
            self.cuda.memcpy_htod_async(int(self.sets[k]["dev"][name]) + pos * item, host[pos:pos + m], self.stream)
        self.touched = []

    def _perturb(self, k: int, seed: int | None, step: int) -> None:
        if seed is None:
            return
        self._unperturb()
        self.keep = []
        for b, name in enumerate(self.perturbed):
            host = self.sets[k]["host"][name]
            pos, src, m = perturb.block(seed, step, b, host.size)
            if m == 0:
                continue
            vals = np.ascontiguousarray(perturb.values(host, src, m))
            self.keep.append(vals)
            self.cuda.memcpy_htod_async(int(self.sets[k]["dev"][name]) + pos * host.dtype.itemsize, vals, self.stream)
            self.touched.append((k, name, pos, m))

    def op_time(self, base: str, cand: str | None, k: int, warmup: int, reps: int, rounds: int, flush: bool,
                recheck: int | None, seed: int | None = None, control: int | None = None, finish: bool = True,
                step: int = 0, check: bool = False) -> dict:
        """Time `rounds` rounds, then (with `finish`) the re-checks. Without `control` both sides launch `reps`
        times a round, alternating A B B A; with it (a candidate timed against the original's stored timing) the
        candidate launches `reps` times a round and the original `control` times, spread among them. A session
        in several calls (sequential timing: the parent decides after each round whether to go on) passes on
        `step`, the perturbation step, which the reply returns; only the last call has `finish`."""
        cuda = self.cuda
        sides = [self.modules[base]] + ([self.modules[cand]] if cand else [])
        counts = [reps] * len(sides)
        if cand and control is not None:
            counts[0] = control
        for _ in range(warmup):
            for j, m in enumerate(sides):
                if j == 0 and cand and control is not None and _ >= max(1, control):
                    continue                 # the original's warm-up is no longer than its control launches
                self._perturb(k, seed, step)
                step += 1
                self._prepare(m, k, flush)
                self._launch(m, k)
        self.stream.synchronize()
        events = [[(cuda.Event(), cuda.Event()) for _ in range(n)] for n in counts]
        per_side: list[list[list[float]]] = [[] for _ in sides]
        for _ in range(rounds):
            for i, j in _order(counts):
                self._perturb(k, seed, step)
                step += 1
                self._prepare(sides[j], k, flush)
                start, end = events[j][i]
                start.record(self.stream)
                self._launch(sides[j], k)
                end.record(self.stream)
            self.stream.synchronize()
            for j in range(len(sides)):
                per_side[j].append([start.time_till(end) for start, end in events[j]])
        cuda.Context.synchronize()
        out = {"baseline_rounds": per_side[0], "candidate_rounds": per_side[-1] if cand else [],
               "device": self.device_name, "l2_bytes": self.l2_bytes, "step": step}
        if not finish:
            return out
        perturbed, perturbed_ref, summary = {}, {}, None
        if seed is not None and cand and self.perturbed:
            # the candidate first, then the original: each from poisoned outputs and the same changed inputs
            self._perturb(k, seed, perturb.RECHECK_STEP)
            on_gpu = check and set(self.refs.get(k, {})) == set(self.outputs)
            for m, into in ((sides[-1], "cand"), (sides[0], "ref")):
                self._prepare(m, k, flush=False)
                self._launch(m, k)
                self._harvest(m)
                self.stream.synchronize()
                if into == "cand" and on_gpu:
                    self._keep_outputs()
                elif into == "cand":
                    perturbed = self._outputs()
                elif on_gpu:
                    summary = self._perturbed_on_gpu(k)
                    if summary is None:          # a mismatch, or the original broke: the parent takes the evidence
                        perturbed, perturbed_ref = self._kept(), self._outputs()
                else:
                    perturbed_ref = self._outputs()
        self._unperturb()
        self.stream.synchronize()
        cuda.Context.synchronize()
        changed = self._inputs_changed(k)
        rk = k if recheck is None else recheck
        self._prepare(sides[-1], rk, flush=False)
        self._launch(sides[-1], rk)
        self._harvest(sides[-1])
        self.stream.synchronize()
        cuda.Context.synchronize()
        matched = self._matched(rk) if check else []
        changed += [n for n in self._inputs_changed(rk) if n not in changed]
        out.update({"after": self._outputs(matched), "after_matched": matched, "after_input_set": rk,
                    "inputs_changed": changed,
                    "perturbed": perturbed, "perturbed_ref": perturbed_ref, "perturbed_summary": summary,
                    "perturbed_buffers": len(self.perturbed) if seed is not None else 0,
                    "guard": self.guards.check("timing and the re-check")})
        return out


def _order(counts: list[int]) -> list[tuple[int, int]]:
    """(launch index, side) in the order a round launches them. Two sides of equal counts alternate A B B A ...;
    otherwise the side with fewer launches (the original's controls) is spread evenly among the other's."""
    if len(counts) == 1:
        return [(i, 0) for i in range(counts[0])]
    if counts[0] == counts[1]:
        return [(i, j) for i in range(counts[0]) for j in ((0, 1) if i % 2 == 0 else (1, 0))]
    few, many = (0, 1) if counts[0] < counts[1] else (1, 0)
    n, m = counts[few], counts[many]
    at = {(q * m) // max(1, n) + (m // max(1, n)) // 2: q for q in range(n)}     # a control in the middle of its share
    order = []
    for i in range(m):
        if i in at:
            order.append((at[i], few))
        order.append((i, many))
    return order


def _receive_files(conn, msg: list) -> list:
    """load_set's files come as descriptors after the message (wire.send_fds): name -> open file."""
    if msg[0] == "load_refs":              # load_refs' files likewise: name -> open file
        _, k, names, rules = msg
        files = [os.fdopen(fd, "rb") for fd in wire.recv_fds(conn, len(names))]
        return ["load_refs", k, dict(zip(names, files)), rules]
    _, k, inputs, consts = msg
    fds = wire.recv_fds(conn, len(inputs) + len(consts))
    files = [os.fdopen(fd, "rb") for fd in fds]
    return ["load_set", k, dict(zip(inputs, files[:len(inputs)])), dict(zip(consts, files[len(inputs):]))]


def exact_main(conn, device: int) -> None:
    """`main` with exact allocations (guards.ExactAllocations): the worker compute-sanitizer runs (memcheck_worker.py)."""
    main(conn, device, exact=True)


def main(conn, device: int, exact: bool = False) -> None:
    """Serve requests until `exit`, a closed pipe, or a CUDA error (after which the context is unusable)."""
    # `device` is nvidia-smi's index (devices.list_gpus), as the native harness gets it: this process sees
    # that GPU alone, as device 0, whatever CUDA_VISIBLE_DEVICES the parent had
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    os.environ["CUDA_VISIBLE_DEVICES"] = str(device)
    try:
        import pycuda.driver as cuda     # optional (mepgen[gpu]): its absence is reported to the parent
        cuda.init()
        state = State(cuda, 0, exact)
    except Exception as e:  # no pycuda, no driver, no device: the parent reports it in one line
        wire.send(conn, ["error", f"cannot start the pycuda worker: {type(e).__name__}: {e}"])
        return
    wire.send(conn, ["ok", {"device": state.device_name}])
    while True:
        try:
            msg = wire.recv(conn)
        except EOFError:
            break
        if msg[0] == "exit":
            break
        try:
            if msg[0] in ("load_set", "load_refs"):
                msg = _receive_files(conn, msg)
            wire.send(conn, ["ok", getattr(state, "op_" + msg[0])(*msg[1:])])
        except cuda.Error as e:
            wire.send(conn, ["cuda_error", str(e)])
            sys.stdout.flush()
            os._exit(3)     # the context is poisoned; skip destructors that would touch it
        except Exception as e:  # a request the worker cannot serve: say why, keep serving
            wire.send(conn, ["error", f"{type(e).__name__}: {e}"])
    try:
        state.ctx.pop()
    except Exception:
        pass


def serve(argv: list[str]) -> None:
    """`python -m mepgen.evaluate.pycuda_worker FD DEVICE [MODULE:FUNCTION]`: serve the socket FD (a
    multiprocessing Connection's end, passed by pycuda_backend) with `main`, or with another entry (tests)."""
    fd, device = int(argv[0]), int(argv[1])
    entry = main
    if len(argv) > 2:
        module, _, function = argv[2].partition(":")
        entry = getattr(importlib.import_module(module), function)
    conn = Connection(fd)
    try:
        entry(conn, device)
    finally:
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1:])
