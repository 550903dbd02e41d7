"""Before optimize names a winner, memcheck runs on it (optimize/winner_check.py): a memory error rejects it and
the next best is checked; no sanitizer leaves the winner with the reason. CPU: the check itself stood in."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from mepgen.evaluate import memcheck
from mepgen.evaluate.results import EvalResult, Timed
from mepgen.optimize import winner_check
from mepgen.optimize.candidates import candidate_name
from mepgen.optimize.proposer import Attempt, Proposal


def attempt(name: str, ms: float) -> Attempt:
    r = EvalResult(name=name, key=name, backend="pycuda", stage="done", timed=Timed(median_ms=ms, spread=0.01, min_ms=ms, max_ms=ms, launches=9,
                                                                      rounds=1, decision="faster"))
    return Attempt(name, Proposal(text=f"// {name}\n", change=name, source="library"), r)


def outcome_of(*attempts):
    best = min(attempts, key=lambda a: a.result.timed.median_ms)
    return SimpleNamespace(best=best, attempts=list(attempts))


def test_a_winner_with_a_memory_error_is_rejected_and_the_next_is_named(monkeypatch, tmp_path):
    fast, next_ = attempt("c0001", 1.0), attempt("c0002", 2.0)
    assert fast.result.faster and next_.result.faster
    out = outcome_of(fast, next_)
    monkeypatch.setattr(memcheck, "executable", lambda: tmp_path / "compute-sanitizer")
    monkeypatch.setattr(winner_check, "native_backend", lambda ev: None)
    verdicts = {"c0001": memcheck.Report(False, 3.5, [{"what": "Invalid __global__ read"}],
                                          "memcheck: Invalid __global__ read of size 4 bytes: 4096 byte(s) past the "
                                          "end of x"),
                "c0002": memcheck.Report(True, 2.0)}
    monkeypatch.setattr(winner_check, "check_attempt", lambda ev, native, a, work, *rest: verdicts[a.id])
    monkeypatch.setattr(winner_check, "check_original", lambda ev, native, work: memcheck.Report(True, 1.0))
    events, journal = [], SimpleNamespace(lines=[])
    journal.append = journal.lines.append
    ev = SimpleNamespace(sets=[SimpleNamespace(index=0)])
    winner_check.check_winner(ev, out, tmp_path, lambda kind, msg: events.append((kind, msg)), journal)
    assert out.best is next_
    assert fast.result.status == "runtime_fault" and fast.result.fault.kind == "out_of_bounds" and not fast.result.faster
    assert "past the end of x" in fast.result.fault.message and fast.result.memcheck["seconds"] == 3.5
    assert next_.result.memcheck["clean"] is True and journal.lines == [fast.result]
    assert [k for k, _ in events] == ["memcheck", "memcheck"] and "rejected before it was named best" in events[0][1]


def test_every_winner_rejected_leaves_none(monkeypatch, tmp_path):
    only = attempt("c0001", 1.0)
    out = outcome_of(only)
    monkeypatch.setattr(memcheck, "executable", lambda: tmp_path / "cs")
    monkeypatch.setattr(winner_check, "native_backend", lambda ev: None)
    monkeypatch.setattr(winner_check, "check_attempt", lambda ev, native, a, work, *rest: memcheck.Report(False, 1.0, [], "x"))
    monkeypatch.setattr(winner_check, "check_original", lambda ev, native, work: memcheck.Report(True, 1.0))
    winner_check.check_winner(SimpleNamespace(sets=[SimpleNamespace(index=0)]), out, tmp_path, lambda k, m: None)
    assert out.best is None


def test_without_the_sanitizer_the_winner_stays_and_says_why(monkeypatch, tmp_path):
    best = attempt("c0001", 1.0)
    out = outcome_of(best)
    monkeypatch.setattr(memcheck, "executable", lambda: None)
    events = []
    winner_check.check_winner(SimpleNamespace(), out, tmp_path, lambda k, m: events.append(m))
    assert out.best is best and best.result.memcheck["clean"] is None and "not found" in events[0]


def test_an_original_with_the_memory_errors_too_gives_no_verdict(monkeypatch, tmp_path):
    """The MEP's buffers may be smaller than the application's: a read the original makes too is no reason to
    reject a winner; it stays, with the reason. The original is run under memcheck only then, once."""
    best, next_ = attempt("c0001", 1.0), attempt("c0002", 2.0)
    out = outcome_of(best, next_)
    monkeypatch.setattr(memcheck, "executable", lambda: tmp_path / "cs")
    monkeypatch.setattr(winner_check, "native_backend", lambda ev: None)
    originals = []
    monkeypatch.setattr(winner_check, "check_original", lambda ev, native, work: originals.append(1) or memcheck.Report(
        False, 2.0, [{}], "memcheck: read past the end of x"))
    monkeypatch.setattr(winner_check, "check_attempt", lambda ev, native, a, work, *rest: memcheck.Report(
        False, 1.5, [{}], "memcheck: read past the end of x"))
    events = []
    winner_check.check_winner(SimpleNamespace(), out, tmp_path, lambda k, m: events.append(m))
    assert out.best is best and best.result.status == "ok" and best.result.memcheck["clean"] is None
    assert best.result.memcheck["seconds"] == 3.5 and originals == [1]
    assert "original kernel has memory errors" in events[0] and len(events) == 1


def test_a_clean_winner_needs_no_run_of_the_original(monkeypatch, tmp_path):
    best = attempt("c0001", 1.0)
    out = outcome_of(best)
    monkeypatch.setattr(memcheck, "executable", lambda: tmp_path / "cs")
    monkeypatch.setattr(winner_check, "native_backend", lambda ev: None)
    monkeypatch.setattr(winner_check, "check_original", lambda *a: pytest.fail("the original is not run"))
    monkeypatch.setattr(winner_check, "check_attempt", lambda ev, native, a, work, *rest: memcheck.Report(True, 0.4))
    winner_check.check_winner(SimpleNamespace(), out, tmp_path, lambda k, m: None)
    assert out.best is best and best.result.memcheck["clean"] is True


class RecordingNative:
    """A native backend stand-in: records what it builds (kernel text, launch, flags: its build key's parts)."""

    def __init__(self):
        self.asked: list[tuple] = []

    def compile(self, kernel, launch=None, flags=()):
        self.asked.append((kernel.read_text(), launch, tuple(flags)))
        return SimpleNamespace(binary=kernel)


class RecordingPycuda:
    """The evaluator's pycuda backend stand-in: records which kernel file it is asked to compile (the cubin's cache
    key covers the file's path: the check must ask for the file the search compiled)."""

    def __init__(self):
        self.asked: list[tuple] = []

    def compile(self, kernel, launch=None, flags=()):
        self.asked.append((Path(kernel), launch, tuple(flags)))
        return SimpleNamespace(key="cubin", artifact=kernel)


class FakeSanitized:
    """memcheck_worker.SanitizedWorker's stand-in: records its start ahead and its end."""
    made: list = []

    def __init__(self, like, tool, timeout):
        self.like, self.warmed, self.closed = like, [], False
        FakeSanitized.made.append(self)

    def warm_up(self, inputs):
        self.warmed.append(inputs.index)

    def close(self):
        self.closed = True


def fake_ev(tmp_path, backend="pycuda", be=None):
    mep = tmp_path / "mep"
    mep.mkdir(exist_ok=True)
    (mep / "kernel.cu").write_text("__global__ void k() {}\n")
    return SimpleNamespace(backend_name=backend, mep_dir=mep, spec=SimpleNamespace(), sets=[SimpleNamespace(index=0)],
                           workers=[SimpleNamespace(backend=be)], opts=SimpleNamespace(run_timeout=1.0),
                           sandbox="none")


def prebuild_for(monkeypatch, tmp_path, backend="pycuda", sanitizer=True):
    """A Prebuild whose evaluator times cubins (cubin_backend stood in), with stand-in sanitized workers."""
    FakeSanitized.made = []
    monkeypatch.setattr(memcheck, "executable", lambda: tmp_path / "compute-sanitizer" if sanitizer else None)
    monkeypatch.setattr(winner_check, "SanitizedWorker", FakeSanitized)
    pycuda = RecordingPycuda()
    monkeypatch.setattr(winner_check, "cubin_backend", lambda ev: pycuda if ev.backend_name == "pycuda" else None)
    monkeypatch.setattr(winner_check, "launch_from", lambda spec, launch: None)
    ev = fake_ev(tmp_path, backend)
    return ev, winner_check.Prebuild(ev, tmp_path / "work")


def test_the_worker_that_checks_the_cubin_starts_at_the_first_win_and_serves_the_first_check(monkeypatch, tmp_path):
    """pycuda times the candidates: at the first faster result the sanitized worker starts (its input set loaded)
    beside the search, once; later wins start nothing. The check at the end gets it for its first candidate, a
    second candidate (the first rejected) gets a fresh one, and nothing is left running."""
    ev, pre = prebuild_for(monkeypatch, tmp_path)
    first, better, slower = attempt("c0001", 3.0), attempt("c0002", 1.0), attempt("c0003", 5.0)
    for a in (first, better, slower):
        pre.offer(a)
    pre.finish()
    assert len(FakeSanitized.made) == 1 and FakeSanitized.made[0].warmed == [0] and pre.seconds >= 0
    given = []
    verdicts = {"c0002": memcheck.Report(False, 0.2, [{}], "memcheck: read past the end of x"),
                "c0001": memcheck.Report(True, 0.1)}
    monkeypatch.setattr(winner_check, "check_attempt",
                        lambda e, n, a, w, work, warm: given.append((a.id, warm, work)) or verdicts[a.id])
    monkeypatch.setattr(winner_check, "check_original", lambda *a: memcheck.Report(True, 0.1))
    monkeypatch.setattr(winner_check, "native_backend", lambda ev: None)
    out = outcome_of(first, better, slower)
    winner_check.check_winner(ev, out, tmp_path / "memcheck", lambda k, m: None, prebuild=pre)
    assert out.best is first
    assert given == [("c0002", FakeSanitized.made[0], tmp_path / "work"), ("c0001", None, tmp_path / "work")]
    late = attempt("c0004", 0.5)
    pre.offer_result(late.proposal, late.result)            # a GPU thread's late result, after finish: ignored
    assert len(FakeSanitized.made) == 1


def test_a_worker_started_ahead_and_not_used_is_ended(monkeypatch, tmp_path):
    ev, pre = prebuild_for(monkeypatch, tmp_path)
    pre.offer(attempt("c0001", 1.0))
    pre.cancel()                                            # ^C during the search
    assert _ends(FakeSanitized.made[0])
    (tmp_path / "b").mkdir()
    ev, pre = prebuild_for(monkeypatch, tmp_path / "b")
    pre.offer(attempt("c0001", 1.0))
    monkeypatch.setattr(winner_check, "check_attempt", lambda *a: (_ for _ in ()).throw(RuntimeError("broken")))
    monkeypatch.setattr(winner_check, "native_backend", lambda ev: None)
    with pytest.raises(RuntimeError):
        winner_check.check_winner(ev, outcome_of(attempt("c0001", 1.0)), tmp_path, lambda k, m: None, prebuild=pre)
    assert FakeSanitized.made[0].closed


def _ends(worker, seconds: float = 5.0) -> bool:
    import time
    deadline = time.monotonic() + seconds
    while not worker.closed and time.monotonic() < deadline:
        time.sleep(0.01)
    return worker.closed


def test_nothing_starts_ahead_for_the_native_backend_without_a_sanitizer_or_without_a_win(monkeypatch, tmp_path):
    _, pre = prebuild_for(monkeypatch, tmp_path, backend="native")     # its timed harnesses are what memcheck runs
    pre.offer(attempt("c0001", 1.0))
    pre.finish()
    (tmp_path / "c").mkdir()
    _, none = prebuild_for(monkeypatch, tmp_path / "c", sanitizer=False)
    none.offer(attempt("c0001", 1.0))
    none.finish()
    (tmp_path / "b").mkdir()
    _, idle = prebuild_for(monkeypatch, tmp_path / "b")
    idle.finish()
    assert FakeSanitized.made == [] and pre.take_warm() is None and none.take_warm() is None


def test_the_check_runs_the_cubin_the_search_compiled_and_falls_back_to_the_harness(monkeypatch, tmp_path):
    """The cubin's cache key covers the kernel file's path: the check asks for the file the search wrote (in its
    work folder) with the candidate's launch and flags, so the cubin is the timed one. Where the sanitized worker
    cannot launch it, the native harness is built (the host at -O1 after the candidate's flags) and checked, and
    the record says why."""
    ev, _ = prebuild_for(monkeypatch, tmp_path)
    pycuda = winner_check.cubin_backend(ev)
    launched = {"value": True}
    monkeypatch.setattr(winner_check.memcheck_worker, "check",
                        lambda like, built, inputs, timeout, warm: (memcheck.Report(True, 0.1), True)
                        if launched["value"] else (memcheck.Report(None, message="no CUDA under the sanitizer"),
                                                    False))
    monkeypatch.setattr(memcheck, "check", lambda *a, **k: memcheck.Report(True, 0.3))
    a = attempt("c0001", 1.0)
    a.proposal.nvcc_flags = ["-Xptxas", "-O2"]
    native = RecordingNative()
    report = winner_check.check_attempt(ev, native, a, tmp_path / "memcheck", tmp_path / "work")
    kernel = tmp_path / "work" / candidate_name(a.proposal) / "kernel.cu"
    assert report.clean is True and report.how == "cubin" and native.asked == []
    assert pycuda.asked == [(kernel, None, ("-Xptxas", "-O2"))]
    launched["value"] = False
    report = winner_check.check_attempt(ev, native, a, tmp_path / "memcheck", tmp_path / "work")
    assert report.clean is True and report.how == "harness" and report.fallback == "no CUDA under the sanitizer"
    assert [f for _, _, f in native.asked] == [("-Xptxas", "-O2", memcheck.HOST_OPT)]
    assert "on the native harness: no CUDA under the sanitizer" in winner_check._how(report)


def test_memcheck_builds_take_the_quicker_host_optimization_unless_the_timed_build_is_there(monkeypatch, tmp_path):
    """A harness built for memcheck alone (the pycuda backend's fallback) takes the host's -O1 after the
    candidate's own flags (nvcc takes the last -O). The native backend's timed harness is in the build cache: the
    same flags, no build."""
    native = RecordingNative()
    ev = fake_ev(tmp_path)                        # no PycudaBackend behind it: the harness is what is checked
    monkeypatch.setattr(winner_check, "launch_from", lambda spec, launch: None)
    monkeypatch.setattr(memcheck, "check", lambda *a, **k: memcheck.Report(True, 0.1))
    a = attempt("c0001", 1.0)
    a.proposal.nvcc_flags = ["-use_fast_math"]
    assert winner_check.check_attempt(ev, native, a, tmp_path / "w").clean is True
    assert winner_check.check_original(ev, native, tmp_path / "w").clean is True
    assert [f for _, _, f in native.asked] == [("-use_fast_math", memcheck.HOST_OPT), (memcheck.HOST_OPT,)]
    assert memcheck.HOST_OPT == "-O1"
    ev.backend_name = "native"
    native.asked.clear()
    report = winner_check.check_attempt(ev, native, a, tmp_path / "w")
    winner_check.check_original(ev, native, tmp_path / "w")
    assert [f for _, _, f in native.asked] == [("-use_fast_math",), ()]
    assert report.how == "harness" and report.fallback == "" and winner_check._how(report) == ""
