"""Sandbox levels on machines without bubblewrap. The level is chosen with the GPU in mind: a level under which the driver refuses a CUDA context
(cuInit fails in a user namespace on some virtual machines) is passed over, with the reason, instead of failing
every candidate and the original. CPU only: the driver and the probes are stood in for."""
from __future__ import annotations

from pathlib import Path

import pytest

from mepgen.evaluate import confinement, gpu_probe, landlock_level, namespace_levels, sandbox


@pytest.fixture
def fresh(monkeypatch):
    sandbox.strongest.cache_clear()
    gpu_probe.usable_here.cache_clear()
    sandbox.gpu_policy.cache_clear()
    monkeypatch.setattr(landlock_level, "abi", lambda: 6)
    monkeypatch.setattr(sandbox, "bwrap_executable", lambda: None)          # as on a machine without bubblewrap
    monkeypatch.setattr(sandbox, "_works", lambda cmd, pass_fds=(): True)    # unshare runs `true`
    monkeypatch.setattr(sandbox, "landlock_works", lambda: (False, "the kernel has no Landlock"))
    yield
    landlock_level.use_gpu_policy(0, "none")
    sandbox.strongest.cache_clear()
    gpu_probe.usable_here.cache_clear()
    sandbox.gpu_policy.cache_clear()


def test_unshare_refused_when_cuda_fails_only_inside_it(fresh, monkeypatch):
    monkeypatch.setattr(gpu_probe, "driver_present", lambda: True)
    monkeypatch.setattr(gpu_probe, "cuda_works", lambda prefix, pass_fds=(): not prefix)   # fine unconfined only
    level, why = sandbox.strongest()
    assert level == "rlimits"
    assert "bwrap is not installed" in why and "cuInit fails under unshare" in why


def test_unshare_kept_when_cuda_works_inside_it(fresh, monkeypatch):
    monkeypatch.setattr(gpu_probe, "driver_present", lambda: True)
    monkeypatch.setattr(gpu_probe, "cuda_works", lambda prefix, pass_fds=(): True)
    assert sandbox.strongest()[0] == "unshare"


def test_landlock_taken_where_bubblewrap_is_missing_and_the_gpu_works_under_it(fresh, monkeypatch):
    monkeypatch.setattr(sandbox, "landlock_works", lambda: (True, ""))
    monkeypatch.setattr(gpu_probe, "driver_present", lambda: True)
    monkeypatch.setattr(gpu_probe, "cuda_works", lambda prefix, pass_fds=(): True)
    assert sandbox.strongest() == ("landlock", "bwrap is not installed")


def test_landlock_passed_over_when_the_driver_refuses_a_context_under_it(fresh, monkeypatch):
    monkeypatch.setattr(sandbox, "landlock_works", lambda: (True, ""))
    monkeypatch.setattr(gpu_probe, "driver_present", lambda: True)
    monkeypatch.setattr(gpu_probe, "cuda_works",
                        lambda prefix, pass_fds=(): not any("confine" in Path(a).name for a in prefix))
    level, why = sandbox.strongest()
    assert level == "unshare" and "refuses a CUDA context under Landlock" in why


def test_landlock_kept_at_an_older_abi_when_the_driver_refuses_only_the_newest(fresh, monkeypatch):
    """The driver refuses a context under ABI 6's rules (scoped abstract unix sockets and signals) but makes one
    under ABI 5's: candidates keep Landlock's file rules, and the reason says what was given up."""
    monkeypatch.setattr(sandbox, "landlock_works", lambda: (True, ""))
    monkeypatch.setattr(gpu_probe, "driver_present", lambda: True)
    tried = []

    def cuda_works(prefix, pass_fds=()):
        if not any("confine" in Path(a).name for a in prefix):
            return True
        cap = int(prefix[prefix.index("-A") + 1]) if "-A" in prefix else 6
        tried.append(cap)
        return cap <= 5
    monkeypatch.setattr(gpu_probe, "cuda_works", cuda_works)
    level, why = sandbox.strongest()
    assert level == "landlock" and tried == [6, 6, 6, 6, 5]   # the strict filter first at each ABI
    assert "Landlock ABI 5 of 6" in why and "no abstract unix socket" in why
    assert sandbox.resolve("auto") == "landlock"          # choosing the level hands the cap to every GPU process
    c = sandbox.Confinement("landlock", gpu=True)
    try:
        flags = c.command(["true"])
        assert flags[flags.index("-A") + 1] == "5"                       # every GPU process gets the cap
        cpu = sandbox.Confinement("landlock").command(["true"])
        assert "-A" not in cpu                                          # a compiler keeps the newest rules
    finally:
        c.close()


@pytest.mark.parametrize("connects", [True, False])
def test_a_driver_that_needs_a_unix_socket_gets_one_and_nothing_more(fresh, monkeypatch, connects):
    """Seen on an H200 host: cuInit fails under the strict seccomp filter (no socket at all) and works without it.
    GPU processes then get AF_UNIX sockets alone, the newest ABI kept; compilers keep the strict filter. A driver
    that only makes its sockets gets them without connect or addressed sends (no named socket reached); one that
    connects (the MPS control socket) gets connect too."""
    from mepgen.evaluate import seccomp_filter
    monkeypatch.setattr(sandbox, "landlock_works", lambda: (True, ""))
    monkeypatch.setattr(gpu_probe, "driver_present", lambda: True)
    asked = []
    monkeypatch.setattr(seccomp_filter, "open_fd", lambda strict=False, families=None, local=False: asked.append(
        (strict, families, local)))
    needs = ((True, ()),) + (((True, (1,), True),) if connects else ())
    monkeypatch.setattr(gpu_probe, "cuda_works", lambda prefix, pass_fds=(): not any(
        "confine" in Path(a).name for a in prefix) or asked[-1][:2 if asked[-1][1] == () else 3] not in needs)
    level, why = sandbox.strongest()
    rule = "unix" if connects else "unix-local"
    assert level == "landlock" and sandbox.gpu_policy() == (0, rule)
    assert "unix sockets allowed" in why and f"ABI 6 of 6, {rule} sockets" in why
    assert ("none reached by name" in why) is not connects
    asked.clear()
    assert sandbox.resolve("auto") == "landlock"
    sandbox.Confinement("landlock", gpu=True).command(["true"])
    sandbox.Confinement("landlock").command(["nvcc"])
    assert asked == [(True, (1,), not connects), (True, (), False)]


def test_no_driver_no_gpu_reason_to_refuse(fresh, monkeypatch):
    monkeypatch.setattr(gpu_probe, "driver_present", lambda: False)
    seen = []
    monkeypatch.setattr(gpu_probe, "cuda_works", lambda prefix, pass_fds=(): seen.append(prefix) or False)
    assert sandbox.strongest()[0] == "unshare" and seen == []               # no probe at all without a driver


def test_the_probe_really_runs_python_behind_the_prefix():
    # a prefix that fails stands for a level the driver refuses; a transparent prefix (`env`) answers as no prefix
    # does: True on a machine with a usable GPU, False here without one
    assert gpu_probe.cuda_works(["false"]) is False
    assert gpu_probe.cuda_works(["env"]) == gpu_probe.cuda_works([]) == gpu_probe.usable_here()


@pytest.mark.skipif(namespace_levels.unshare_prefix()[0] is None or not sandbox._works(namespace_levels.unshare_prefix() + ["--", "true"]),
                    reason="unshare cannot create user namespaces on this machine")
def test_a_candidate_that_signals_itself_under_unshare_dies_of_it():
    # as its namespace's PID 1 it would survive its own SIGSEGV (the kernel drops it); a shell is init instead
    import sys

    from mepgen.evaluate import process
    code = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV); print('survived')"
    done = process.run([sys.executable, "-c", code], timeout=30, confine=confinement.Confinement("unshare"))
    assert done.signal_name == "SIGSEGV" and "survived" not in done.stdout
