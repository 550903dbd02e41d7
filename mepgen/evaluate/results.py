"""Typed results of evaluating one candidate `kernel.cu`: what stage it reached and the evidence.

Every failure is a value, never an exception: the optimizer's repair loop feeds `feedback()` (the
compiler's or the runtime's own message, the mismatch numbers) back to the next attempt, and the
append-only results file stores `to_dict()`. `from_dict()` reads those records back on resume.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

#: how far a candidate got; "done" means it passed everything and was timed
STAGES = ("lint", "compile", "run", "verify", "time", "done")
#: the verdict; only "ok" candidates may be compared for speed
#: "not_timed": verified on every input set, but the time limit left no room to time it (no verdict on speed, and
#: no fault: the same candidate under a longer limit is timed)
STATUSES = ("ok", "rejected_by_rules", "compile_failed", "runtime_fault", "wrong_result", "impossible", "mep_error",
            "not_timed")
FAULT_KINDS = ("crash", "timeout", "cuda_error", "illegal_address", "harness_error", "time_limit", "out_of_bounds")
DECISIONS = ("faster", "same", "slower", "baseline")


@dataclass
class RuleViolation:
    """A source construct a variant may not add (see rules.py): it would let the variant cheat the timer."""
    rule: str
    line: int
    text: str


@dataclass
class CompileInfo:
    """Compile time and ptxas's resource report for the kernel (cheap: captured on every compile)."""
    seconds: float = 0.0
    registers: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    stack_bytes: int | None = None
    shared_bytes: int | None = None
    cached: bool = False


@dataclass
class CompileFailed:
    message: str          # the first error lines, for a prompt
    log: str              # nvcc's whole output


@dataclass
class RuntimeFault:
    kind: str             # one of FAULT_KINDS
    message: str
    input_set: int | None = None
    log: str = ""


@dataclass
class Mismatch:
    """How one output differs from the reference on one input set ("run" or the post-timing "after")."""
    output: str
    input_set: int
    phase: str
    total: int
    bad: int
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    first_bad_index: int | None = None
    expected: float | None = None      # at first_bad_index
    got: float | None = None
    nan: int = 0
    inf: int = 0
    unwritten: int = 0
    rtol: float | None = None
    atol: float | None = None
    note: str = ""

    def describe(self) -> str:
        phase = {"after": ", after timing",
                 "perturbed": ", after timing, inputs changed in place: not what the original kernel computes from the "
                              "same changed inputs, as a result reused instead of computed would not be"}
        where = f"{self.output} (input set {self.input_set}{phase.get(self.phase, '')})"
        if self.note:
            return f"{where}: {self.note}"
        parts = [f"{self.bad} of {self.total} elements wrong"]
        if self.unwritten:
            parts.append(f"{self.unwritten} never written")
        if self.nan:
            parts.append(f"{self.nan} NaN")
        if self.inf:
            parts.append(f"{self.inf} Inf")
        if self.first_bad_index is not None:
            parts.append(f"first at [{self.first_bad_index}]: expected {self.expected!r}, got {self.got!r}")
        if self.max_abs_err is not None:
            parts.append(f"max abs err {self.max_abs_err:.3g}, max rel err {self.max_rel_err:.3g} "
                         f"(rtol {self.rtol:g}, atol {self.atol:g})")
        return f"{where}: " + "; ".join(parts)


@dataclass
class WrongResult:
    mismatches: list[Mismatch] = field(default_factory=list)
    inputs_changed: list[str] = field(default_factory=list)   # `in` buffers the candidate modified

    def describe(self) -> str:
        lines = [m.describe() for m in self.mismatches]
        lines += [f"{name}: the kernel modified this input buffer" for name in self.inputs_changed]
        return "\n".join(lines)


@dataclass
class Timed:
    """Median of many launches, interleaved with the baseline in the same session, and the decision."""
    median_ms: float
    spread: float                     # interquartile range / median, over all launches
    min_ms: float
    max_ms: float
    launches: int
    rounds: int
    round_medians_ms: list[float] = field(default_factory=list)
    baseline_median_ms: float | None = None
    baseline_round_medians_ms: list[float] = field(default_factory=list)
    speedup: float | None = None      # baseline median / candidate median
    noise: float | None = None        # relative noise the gain must exceed
    decision: str = "baseline"        # one of DECISIONS
    why: str = ""
    gbps: float | None = None
    gflops: float | None = None
    pct_peak_bw: float | None = None
    pct_peak_flops: float | None = None
    pct_stream: float | None = None   # % of a perfect streaming kernel of the same bytes, timed the same way
    plan: str = ""                    # how many launches were timed and why (evaluate/plan.py)


@dataclass
class Impossible:
    reason: str


@dataclass
class EvalResult:
    """The record of one candidate: everything the repair loop, the report and a resumed run need."""
    name: str
    key: str                          # content hash of (kernel.cu, flags, spec, device, backend)
    backend: str
    status: str = "ok"
    stage: str = "lint"
    kernel_sha256: str = ""
    device: str = ""
    seconds: float = 0.0              # wall time of the whole evaluation
    phases: dict = field(default_factory=dict)   # seconds per phase: lint (the rules), compile (nvcc, or the build cache), load (cubin and inputs onto the GPU: pycuda), verify (runs and comparisons on every input set), time (the timing session and its re-checks), checks (the rest of check(): verdict, peaks)
    rules: list[RuleViolation] = field(default_factory=list)
    compile: CompileInfo | None = None
    compile_failed: CompileFailed | None = None
    fault: RuntimeFault | None = None
    wrong: WrongResult | None = None
    timed: Timed | None = None
    impossible: Impossible | None = None
    mep_error: str | None = None
    input_sets: int = 0
    sandbox: str = ""                 # the confinement it ran under (evaluate/sandbox.py LEVELS)
    profile: dict | None = None
    memcheck: dict | None = None      # compute-sanitizer's check before it was named best (memcheck.Report)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def faster(self) -> bool:
        return self.ok and self.timed is not None and self.timed.decision == "faster"

    def feedback(self) -> str:
        """What went wrong, in the words of the tool that found it: the text a repair prompt quotes."""
        if self.status == "rejected_by_rules":
            return "\n".join(f"line {v.line}: {v.rule}: {v.text}" for v in self.rules)
        if self.compile_failed:
            return self.compile_failed.message
        if self.fault:
            where = f" on input set {self.fault.input_set}" if self.fault.input_set is not None else ""
            return f"{self.fault.kind}{where}: {self.fault.message}"
        if self.wrong:
            return self.wrong.describe()
        if self.impossible:
            return f"impossible timing: {self.impossible.reason}"
        if self.mep_error:
            return self.mep_error
        if self.timed:
            return self.timed.why
        return ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "EvalResult":
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        nested = {"compile": CompileInfo, "compile_failed": CompileFailed, "fault": RuntimeFault,
                  "timed": Timed, "impossible": Impossible}
        for key, typ in nested.items():
            if d.get(key) is not None:
                d[key] = typ(**d[key])
        if d.get("wrong") is not None:
            w = d["wrong"]
            d["wrong"] = WrongResult([Mismatch(**m) for m in w.get("mismatches", [])], w.get("inputs_changed", []))
        d["rules"] = [RuleViolation(**v) for v in d.get("rules", [])]
        return cls(**d)
