"""Before optimize names a winner, memcheck runs on it (optimize/winner_check.py): a memory error rejects it and
the next best is checked; no sanitizer leaves the winner with the reason. CPU: the check itself stood in."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from mepgen.evaluate import memcheck
from mepgen.evaluate.results import EvalResult, Timed
from mepgen.optimize import winner_check
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
    monkeypatch.setattr(winner_check, "check_attempt", lambda ev, native, a, work: verdicts[a.id])
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
    monkeypatch.setattr(winner_check, "check_attempt", lambda ev, native, a, work: memcheck.Report(False, 1.0, [], "x"))
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
    monkeypatch.setattr(winner_check, "check_attempt", lambda ev, native, a, work: memcheck.Report(
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
    monkeypatch.setattr(winner_check, "check_attempt", lambda ev, native, a, work: memcheck.Report(True, 0.4))
    winner_check.check_winner(SimpleNamespace(), out, tmp_path, lambda k, m: None)
    assert out.best is best and best.result.memcheck["clean"] is True


class RecordingNative:
    """A native backend stand-in: records what it builds; the build of `held` starts, says so, and waits for the
    gate to open."""

    def __init__(self, held=None):
        import threading
        self.built, self.lock = [], threading.Lock()
        self.asked: list[tuple] = []            # (kernel text, launch, flags) of every compile: its build key's parts
        self.held, self.started, self.gate = held, threading.Event(), threading.Event()

    def compile(self, kernel, launch=None, flags=()):
        text = kernel.read_text()
        name = "original" if "//" not in text else text.split()[1]
        if name == self.held:
            self.started.set()
            self.gate.wait(10)
        with self.lock:
            self.built.append(name)
            self.asked.append((text, launch, tuple(flags)))
        return SimpleNamespace(binary=kernel)


def prebuild_for(monkeypatch, tmp_path, native, backend="pycuda", cores=4):
    monkeypatch.setattr(winner_check.os, "cpu_count", lambda: cores)      # 1 build thread below 16 cores
    mep = tmp_path / "mep"
    mep.mkdir()
    (mep / "kernel.cu").write_text("__global__ void k() {}\n")
    monkeypatch.setattr(memcheck, "executable", lambda: tmp_path / "compute-sanitizer")
    monkeypatch.setattr(winner_check, "native_backend", lambda ev: native)
    ev = SimpleNamespace(backend_name=backend, mep_dir=mep, spec=SimpleNamespace(), sets=[SimpleNamespace(index=0)])
    monkeypatch.setattr(winner_check, "launch_from", lambda spec, launch: None)
    return ev, winner_check.Prebuild(ev, tmp_path / "memcheck")


def test_the_winner_s_harness_is_built_during_the_search(monkeypatch, tmp_path):
    """pycuda times the candidates; memcheck needs native harnesses. Each new best is queued, replacing one still
    waiting; a slower win builds nothing; the check at the end uses that backend (its builds cached by content)
    and waits for the best's build."""
    native = RecordingNative(held="c0001")
    ev, pre = prebuild_for(monkeypatch, tmp_path, native)
    first, second, better, slower = (attempt("c0001", 3.0), attempt("c0002", 2.0), attempt("c0003", 1.0),
                                     attempt("c0004", 5.0))
    pre.offer(first)
    assert native.started.wait(10)               # c0001's build holds the one thread: the next bests wait
    for a in (second, better, slower):
        pre.offer(a)
    native.gate.set()
    seen = []
    monkeypatch.setattr(winner_check, "check_original", lambda *a: pytest.fail("the original is not run"))
    monkeypatch.setattr(winner_check, "check_attempt", lambda e, n, a, w: seen.append(n) or memcheck.Report(True, 0.1))
    out = outcome_of(first, second, better, slower)
    winner_check.check_winner(ev, out, tmp_path, lambda k, m: None, prebuild=pre)
    assert native.built == ["c0001", "c0003"] and out.best is better and seen == [native]
    assert pre.seconds > 0


def test_with_many_cores_a_new_best_builds_beside_an_earlier_one(monkeypatch, tmp_path):
    native = RecordingNative(held="c0001")
    _, pre = prebuild_for(monkeypatch, tmp_path, native, cores=16)
    pre.offer(attempt("c0001", 2.0))
    assert native.started.wait(10)
    pre.offer(attempt("c0002", 1.0))
    pre.waiting.result(timeout=10)          # built while c0001's build still waits at the gate
    assert native.built == ["c0002"]
    native.gate.set()
    pre.finish()                            # the best's build only; the earlier one ends on its own
    assert native.built[0] == "c0002"


def test_a_build_that_fails_ahead_is_left_to_the_check(monkeypatch, tmp_path):
    """A harness that does not build during the search raises nothing there: the check builds it again and says."""
    class Failing(RecordingNative):
        def compile(self, kernel, launch=None, flags=()):
            raise RuntimeError("nvcc was killed")
    _, pre = prebuild_for(monkeypatch, tmp_path, Failing())
    pre.offer(attempt("c0001", 1.0))
    pre.finish()
    assert isinstance(pre.waiting.exception(), RuntimeError) and pre.seconds >= 0


def test_nothing_is_built_ahead_for_the_native_backend_or_a_search_without_a_win(monkeypatch, tmp_path):
    native = RecordingNative()
    _, pre = prebuild_for(monkeypatch, tmp_path, native, backend="native")   # its own builds are the harnesses
    pre.offer(attempt("c0001", 1.0))
    pre.finish()
    assert pre.native is None and native.built == []
    (tmp_path / "c").mkdir()
    _, pre = prebuild_for(monkeypatch, tmp_path / "c", native)

    def broken(ev):
        raise RuntimeError("no native harness here")
    monkeypatch.setattr(winner_check, "native_backend", broken)     # the check at the end says it; no build ahead
    pre.offer(attempt("c0001", 1.0))
    pre.finish()
    assert pre.native is None and native.built == []
    (tmp_path / "b").mkdir()
    _, pre = prebuild_for(monkeypatch, tmp_path / "b", native)
    pre.finish()
    assert native.built == []


def test_memcheck_builds_take_the_quicker_host_optimization_unless_the_timed_build_is_there(monkeypatch, tmp_path):
    """pycuda timed cubins: the harness is built for memcheck alone, with the host's -O1 after the candidate's own
    flags (nvcc takes the last -O). The native backend's timed harness is in the build cache: the same flags, no
    build."""
    native = RecordingNative()
    ev, _ = prebuild_for(monkeypatch, tmp_path, native)
    ev.opts, ev.sandbox = SimpleNamespace(run_timeout=1.0), "none"
    monkeypatch.setattr(memcheck, "check", lambda *a, **k: memcheck.Report(True, 0.1))
    a = attempt("c0001", 1.0)
    a.proposal.nvcc_flags = ["-use_fast_math"]
    assert winner_check.check_attempt(ev, native, a, tmp_path / "w").clean is True
    assert winner_check.check_original(ev, native, tmp_path / "w").clean is True
    assert [f for _, _, f in native.asked] == [("-use_fast_math", memcheck.HOST_OPT), (memcheck.HOST_OPT,)]
    assert memcheck.HOST_OPT == "-O1"
    ev.backend_name = "native"
    native.asked.clear()
    winner_check.check_attempt(ev, native, a, tmp_path / "w")
    winner_check.check_original(ev, native, tmp_path / "w")
    assert [f for _, _, f in native.asked] == [("-use_fast_math",), ()]


def test_the_check_builds_exactly_what_prebuild_built(monkeypatch, tmp_path):
    """The check at the end asks for the harness Prebuild built during the search (kernel text, launch and flags:
    its build key), so it finds it in the cache."""
    native = RecordingNative()
    ev, pre = prebuild_for(monkeypatch, tmp_path, native)
    best = attempt("c0001", 1.0)
    best.proposal.nvcc_flags = ["-Xptxas", "-O2"]
    pre.offer(best)
    pre.finish()
    assert len(native.asked) == 1
    monkeypatch.setattr(memcheck, "check", lambda *a, **k: memcheck.Report(True, 0.1))
    ev.opts, ev.sandbox = SimpleNamespace(run_timeout=1.0), "none"
    winner_check.check_winner(ev, outcome_of(best), tmp_path / "memcheck", lambda k, m: None, prebuild=pre)
    assert best.result.memcheck["clean"] is True and len(native.asked) == 2
    assert native.asked[0] == native.asked[1] and native.asked[1][2] == ("-Xptxas", "-O2", memcheck.HOST_OPT)


def test_a_result_offered_as_it_arrives_is_not_built_again_at_the_round_s_end(monkeypatch, tmp_path):
    """Search's on_faster offers (proposal, result) from the GPU thread; the round's on_win offers the same attempt:
    nothing new. Only a strictly better best replaces it; nothing is taken after finish."""
    native = RecordingNative()
    ev, pre = prebuild_for(monkeypatch, tmp_path, native)
    first, better = attempt("c0001", 2.0), attempt("c0002", 1.0)
    pre.offer_result(first.proposal, first.result)
    pre.offer(first)
    pre.waiting.result(timeout=10)
    pre.offer_result(better.proposal, better.result)
    pre.offer(better)
    pre.offer(first)
    pre.finish()
    late = attempt("c0003", 0.5)
    pre.offer_result(late.proposal, late.result)           # a GPU thread's late result, after finish: ignored
    assert native.built == ["c0001", "c0002"] and pre.best_ms == 1.0
