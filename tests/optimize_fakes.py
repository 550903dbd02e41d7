"""Stand-ins for the optimize tests: an evaluation function that scores a kernel.cu by a marker in its text,
and a deterministic proposer. Markers (in a comment of the kernel text):
  MARK:speed=1.5[,roof=95]   verified, 1.5x faster than the original (decision by the 2% rule), 95% of peak
  MARK:compile               fails to compile with a compiler message
  MARK:wrong                 computes wrong results (a mismatch on input set 1)
  MARK:fault                 an illegal memory access
No marker: verified, the original's speed ("same").
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

from mepgen.evaluate.results import (CompileFailed, EvalResult, Mismatch, RuntimeFault, Timed, WrongResult)
from mepgen.optimize.proposer import Proposal

BASE_MS = 1.0
COMPILER_MESSAGE = 'kernel.cu(12): error: identifier "fmaa" is undefined'
_MARK = re.compile(r"MARK:(\w+)(?:=([\d.]+))?(?:,roof=([\d.]+))?")


def score(text: str, name: str = "cand") -> EvalResult:
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    res = EvalResult(name=name, key=key, backend="fake", kernel_sha256=key, input_sets=3)
    m = None
    for m in _MARK.finditer(text):
        pass                                    # the last marker wins (repairs append a new one)
    kind = m.group(1) if m else "speed"
    if kind == "compile":
        res.status, res.stage = "compile_failed", "compile"
        res.compile_failed = CompileFailed(COMPILER_MESSAGE, COMPILER_MESSAGE + "\n1 error detected")
        return res
    if kind == "wrong":
        res.status, res.stage = "wrong_result", "verify"
        res.wrong = WrongResult([Mismatch("p", 1, "run", 4096, 17, 0.5, 0.25, 3, 1.0, 1.5, rtol=1e-5, atol=1e-6)])
        return res
    if kind == "fault":
        res.status, res.stage = "runtime_fault", "run"
        res.fault = RuntimeFault("illegal_address", "an illegal memory access was encountered", 0)
        return res
    sp = float(m.group(2)) if m and m.group(2) else 1.0
    roof = float(m.group(3)) if m and m.group(3) else 40.0 * sp
    decision = "faster" if sp > 1.02 else ("slower" if sp < 0.98 else "same")
    res.status, res.stage = "ok", "done"
    res.timed = Timed(median_ms=BASE_MS / sp, spread=0.01, min_ms=BASE_MS / sp, max_ms=BASE_MS / sp, launches=150,
                      rounds=3, baseline_median_ms=BASE_MS, speedup=sp, noise=0.02, decision=decision,
                      why=f"{sp:.2f}x, noise 2%", gbps=100.0 * sp, pct_peak_bw=roof, pct_stream=roof * 1.2)
    return res


class FakeEvaluate:
    """evaluate(proposals, workdir) -> results; counts calls and what it saw."""

    def __init__(self):
        self.seen: list[str] = []

    def __call__(self, proposals: list[Proposal], workdir: Path) -> list[EvalResult]:
        self.seen += [p.text for p in proposals]
        return [score(p.text, f"cand{len(self.seen)}") for p in proposals]


def baseline() -> EvalResult:
    return score("original MARK:speed=1.0,roof=40", "baseline")


class MarkerProposer:
    """Deterministic: from a parent, propose the next speeds of `ladder` (each child a little faster),
    plus whatever `extra` (a list of (marker, change)) says for the original. Repairs turn a failed
    candidate into a verified one (`repair_to` marker) or give up (None)."""

    def __init__(self, name: str = "library", ladder=(1.1, 1.2, 1.3), extra=(), repair_to: str | None = "speed=1.05",
                 source: str = "library"):
        self.name, self.ladder, self.extra, self.repair_to, self.source = name, ladder, list(extra), repair_to, source
        self.repairs: list[str] = []
        self.calls = 0

    def propose(self, ctx, parent, budget):
        self.calls += 1
        base = parent.proposal.text if parent is not None else ctx.original
        level = base.count("step")
        out = [Proposal(text=f"{base}// step {level + 1}.{i} MARK:{mark}\n", change=change, source=self.source,
                        transformations=[{"name": change.split()[0], "params": {"i": i}}])
               for i, (mark, change) in enumerate(self.extra if parent is None else [])]
        for i, sp in enumerate(self.ladder):
            speed = round(sp * (1 + 0.1 * level), 3)
            out.append(Proposal(text=f"{base}// step {level + 1}.{i + len(out)} MARK:speed={speed}\n",
                                change=f"unroll x{2 ** (i + 1)}", source=self.source,
                                transformations=[{"name": "unroll", "params": {"factor": 2 ** (i + 1)}}]))
        return out[:budget]

    def repair(self, ctx, failed):
        self.repairs.append(failed.id)
        if self.repair_to is None:
            return None
        return Proposal(text=failed.proposal.text + f"// fixed MARK:{self.repair_to}\n", change="repair: fixed",
                        source=self.source)


XPAY = """namespace cg {
__global__ void xpay(int n, const float* x, float beta, float* p)
{
    const int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        p[i] = x[i] + beta * p[i];
    }
}
}  // namespace cg
"""


def xpay_spec():
    from mepgen.spec import KernelRef, Launch, Param, Spec, Tolerance, Verify, Work
    return Spec(kernel=KernelRef("cg::xpay", "cg.xpay", "src/cg.cu", "0" * 64, 0, 10),
                sizes={"N": 4096, "BLOCK_SIZE": 256},
                params=[Param("n", "scalar", "int", "int32", value="N"),
                        Param("x", "in", "const float *", "float32", count="N"),
                        Param("beta", "scalar", "float", "float32", value="0.5f"),
                        Param("p", "inout", "float *", "float32", count="N")],
                launch=Launch(["(N + BLOCK_SIZE - 1) / BLOCK_SIZE"], ["BLOCK_SIZE"], "0", "cg::xpay"),
                verify=Verify(3, 1, {"p": Tolerance(1e-5, 1e-6)}), work=Work(bytes="12 * N"))


def make_ctx(tmp_path: Path, original: str = XPAY):
    from mepgen.optimize.proposer import Context
    mep = tmp_path / "mep"
    mep.mkdir(parents=True, exist_ok=True)
    (mep / "kernel.cu").write_text(original)
    return Context(spec=xpay_spec(), mep_dir=mep, original=original,
                   gpu={"name": "NVIDIA H200", "cc": "9.0", "peak_gbps": 4800.0, "peak_gflops": 60000.0})
