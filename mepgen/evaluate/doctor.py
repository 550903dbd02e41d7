"""`mepgen doctor`: what this machine allows to confine candidates and check their memory, and how to get more.

Each sandbox level (sandbox.py, docs/sandbox.md) is probed as `auto` probes it: whether it runs a program and,
where a GPU driver is present, whether a CUDA context can be made under it. Then what the level `auto` takes
here, what each missing piece would add, what the landlock level costs per process, and whether
compute-sanitizer (the memory check of a winner) is found.
"""
from __future__ import annotations

import json
import os

from pathlib import Path

import click

from . import gpu_probe, landlock_level, memcheck, namespace_levels, probe_memo, sandbox, seccomp_filter
from ..config import load_config
from ..errors import MepgenError
from ..workspace import Workspace


def landlock_features(abi: int) -> str:
    if abi < 1:
        return "none"
    parts = ["files"]
    if abi >= 4:
        parts.append("no TCP")
    if abi >= 5:
        parts.append("device ioctl rights")
    if abi >= 6:
        parts.append("abstract unix sockets and signals scoped")
    return f"ABI {abi}: " + ", ".join(parts)


def report() -> dict:
    """What the machine allows, as data (the command prints it, or emits it as JSON). Probes afresh: what the
    optimizer remembered of the GPU's probe for this boot (probe_memo) is asked again and replaced."""
    probe_memo.ask_again = True
    try:
        return _report()
    finally:
        probe_memo.ask_again = False


def _report() -> dict:
    level, why = sandbox.strongest()
    abi = landlock_level.abi()
    gpu = gpu_probe.usable_here()
    levels = {}
    for name in sandbox.LEVELS[:-1]:
        reason = sandbox._unusable(name)
        levels[name] = {"works": not reason, "why_not": reason}
    hints = []
    if not levels["bwrap"]["works"]:
        hints.append("bubblewrap (the strongest level: no network at all, own PID namespace, a file system "
                     "of its own): apt-get install bubblewrap, or pip install mepgen[sandbox]; it needs "
                     "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                     "user.max_user_namespaces > 0; on Ubuntu >= 23.10 an AppArmor profile for bwrap)")
    if abi < 1:
        hints.append("Landlock (files confined without namespaces): Linux >= 5.13 with the LSM enabled "
                     "(CONFIG_SECURITY_LANDLOCK=y, `lsm=...,landlock` on the kernel command line)")
    elif abi < 4:
        hints.append("a kernel with Landlock ABI >= 4 (Linux >= 6.7) adds a TCP rule under the seccomp filter")
    if seccomp_filter.compiled(strict=True) is None:
        hints.append("libseccomp (apt-get install libseccomp2): without it no seccomp filter, and under landlock "
                     "network sockets are not refused")
    if landlock_level.launcher_binary() is None and abi >= 1:
        hints.append("a C compiler (cc): the landlock launcher then costs ~1 ms per process instead of ~50 ms")
    sanitizer = memcheck.executable()
    if sanitizer is None:
        hints.append("compute-sanitizer (ships with the CUDA toolkit, in its bin/): without it out-of-bounds reads "
                     "of a winner are not checked")
    cost = None
    if levels["landlock"]["works"]:
        base, confined = sandbox.setup_seconds(repeat=9)
        cost = {"rlimits_ms": round(base * 1e3, 2), "landlock_ms": round(confined * 1e3, 2)}
    return {"kernel": os.uname().release, "landlock": landlock_features(abi), "seccomp": seccomp_filter.compiled()
            is not None, "bwrap": namespace_levels.bwrap_executable(), "gpu_driver_usable": gpu, "levels": levels,
            "auto": level, "auto_why_not_stronger": why, "landlock_process_cost": cost,
            "compute_sanitizer": str(sanitizer) if sanitizer else None, "hints": hints,
            "landlock_gpu": landlock_level.gpu_note(*(sandbox.gpu_policy() or (0, "none")))
            if levels["landlock"]["works"] else "",
            "gpu_probe_memo": str(probe_memo.path()) if probe_memo.enabled() else None}


def render(r: dict) -> str:
    lines = [f"kernel {r['kernel']}; Landlock: {r['landlock']}; libseccomp: {'yes' if r['seccomp'] else 'no'}; "
             f"bubblewrap: {r['bwrap'] or 'not installed'}; GPU: {'usable' if r['gpu_driver_usable'] else 'none'}",
             "sandbox levels (strongest first):"]
    for name, v in r["levels"].items():
        lines.append(f"  {name:9} {'works' if v['works'] else 'no: ' + v['why_not']}")
    lines.append(f"evaluate.sandbox auto takes: {r['auto']} -- {sandbox.DESCRIPTIONS[r['auto']]}")
    if r.get("landlock_gpu"):
        lines.append(f"  {r['landlock_gpu']}")
        if r.get("gpu_probe_memo"):
            lines.append(f"  (probed now; `mepgen optimize` reuses this answer until the next boot or driver: "
                         f"{r['gpu_probe_memo']})")
    if r["landlock_process_cost"]:
        c = r["landlock_process_cost"]
        lines.append(f"landlock costs {c['landlock_ms'] - c['rlimits_ms']:.1f} ms per process here "
                     f"({c['landlock_ms']:.1f} ms to start `true` confined, {c['rlimits_ms']:.1f} ms with limits only)")
    lines.append(f"memory check of winners: compute-sanitizer {r['compute_sanitizer'] or 'NOT found'}")
    if r["hints"]:
        lines.append("to get more:")
        lines += [f"  - {h}" for h in r["hints"]]
    return "\n".join(lines)


@click.command()
@click.option("-C", "--app", "app", type=click.Path(path_type=Path), default=None,
              help="Also say what this application's config asks for (evaluate.sandbox); default: the application "
                   "found from the current folder upwards, if any.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor(app, as_json):
    """What this machine allows to confine candidates (sandbox levels) and check memory, and how to get more."""
    if app is not None and not Path(app).is_dir():
        raise MepgenError(f"{app}: no such directory")
    if app is None:
        try:
            app = Workspace.find().app_root
        except MepgenError:
            app = None
    r = report()
    r["configured"] = {"app": str(Path(app).resolve()) if app else None,
                       "evaluate.sandbox": load_config(app)["evaluate"]["sandbox"]}
    if as_json:
        click.echo(json.dumps(r, indent=1))
        return
    c = r["configured"]
    click.echo(render(r) + f"\nconfigured evaluate.sandbox: {c['evaluate.sandbox']} "
               f"({'config of ' + c['app'] if c['app'] else 'no application here: the user config and defaults'})")


