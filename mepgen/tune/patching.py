"""tune's step 4: every verified win patched into the application, then its build. A patch that `mepgen patch`
refuses (a launch the application's site cannot spell, a helper it shares) or that changes nothing there (build
flags alone) gives way to the run's fastest verified variant that changes only the kernel's text; one that breaks
the application's build is found alone and reverted. `run` is the stage runner (stages.mepgen)."""
from __future__ import annotations

from pathlib import Path

from ..errors import MepgenError
from ..workspace import read_jsonl
from . import appruns
from .stages import say


def patch_wins(run, app_root: Path, rows: dict, min_gain: float, build_cmd: str, logs: Path, timeout) -> dict:
    """Apply every verified win; a patch mepgen refuses, or one that breaks the application's build, is reverted
    and kept out with the reason. Returns {kernel id: {state, why, speedup, ...}}."""
    out: dict[str, dict] = {}
    for kid, row in rows.items():
        sp = row.get("speedup")
        if row.get("status") != "done" or not sp or sp < 1 + min_gain or not row.get("run"):
            continue
        variant = Path(row["run"]) / "best" / "kernel.cu"
        say(f"patching {kid} ({sp:.2f}x in its MEP)")
        r = apply_variant(run, app_root, kid, variant, logs)
        why = ""
        refused = r.last_error if r.code != 0 else _flags_only(r)
        if refused:
            say(f"  {kid}: not patched: {refused}")
            alt = _next_best(Path(row["run"]), variant, min_gain)
            if alt is None:
                out[kid] = {"state": "refused", "why": refused, "speedup": sp,
                            "nvcc_flags": (r.doc or {}).get("nvcc_flags") or []}
                continue
            variant, alt_sp = alt
            why = f"the best ({sp:.2f}x) was refused ({refused}); its fastest variant that changes only the " \
                  f"kernel's text ({alt_sp:.2f}x) is patched instead"
            say(f"  {kid}: patching its fastest variant that changes only the kernel's text ({alt_sp:.2f}x)")
            r, sp = apply_variant(run, app_root, kid, variant, logs), alt_sp
            if r.code != 0 or _flags_only(r):
                again = r.last_error if r.code != 0 else _flags_only(r)
                out[kid] = {"state": "refused", "why": f"{why}, and was refused too: {again}", "speedup": sp}
                say(f"  {kid}: not patched either: {again}")
                continue
        out[kid] = {"state": "applied", "why": why, "speedup": sp, "file": (r.doc or {}).get("file"),
                    "nvcc_flags": (r.doc or {}).get("nvcc_flags") or [], "variant": str(variant)}
    applied = [k for k, v in out.items() if v["state"] == "applied"]
    if not applied:
        return out
    say(f"rebuilding the application with {len(applied)} patch(es): {build_cmd}")
    b = appruns.run_step(build_cmd, app_root, logs / "build-patched.log", timeout)
    if b.ok:
        return out
    # one of them breaks the application's build: find which, each on its own
    say("the patched application does not build: trying each patch alone")
    for k in reversed(applied):
        revert(run, app_root, k, logs)
    for k in applied:
        apply_variant(run, app_root, k, variant_of(out[k], rows[k]), logs)
        alone = appruns.run_step(build_cmd, app_root, logs / f"build-{k}.log", timeout)
        if not alone.ok:
            revert(run, app_root, k, logs)
            out[k].update(state="reverted", why=f"breaks the application's build: {alone.tail.splitlines()[-1:] or ''}")
            say(f"  {k}: breaks the build, reverted")
    return out


def _flags_only(r) -> str:
    """Why a patch that `mepgen patch` accepted changed nothing in the application: the winner differs from the
    original only in nvcc flags, which patch does not write into the application's build (its note says so);
    "" for a patch that changed the kernel's source."""
    doc = r.doc or {}
    if not doc.get("unchanged"):
        return ""
    flags = " ".join(doc.get("nvcc_flags") or [])
    return f"the win is build flags only ({flags}): mepgen patch does not write them into the application's build"


def apply_variant(run, app_root: Path, kid: str, variant: Path, logs: Path):
    return run(["patch", kid, "-C", str(app_root), "--from", str(variant), "--apply", "--no-validate", "--json"],
                  logs / "patch.log", echo=False)


def variant_of(patch: dict, row: dict) -> Path:
    """The kernel.cu a kept patch applied: its own record's, else (a state of an older tune) the run's best."""
    return Path(patch.get("variant") or Path(row["run"]) / "best" / "kernel.cu")


def _next_best(run: Path, best: Path, min_gain: float) -> tuple[Path, float] | None:
    """Where patch refuses the best (a launch the application's site cannot spell, a helper it shares), the run's
    fastest verified candidate that changes only the kernel's text (no launch, no nvcc flags: nothing patch could
    not write) and differs from the best, copied to RUN/fallback/kernel.cu; patch --apply memchecks it (optimize
    checked only the best). None: no such candidate."""
    try:
        best_text = best.read_text()
    except OSError:
        return None
    found, best_moves = [], False
    for a in read_jsonl(run / "trajectory.jsonl"):
        text_file = run / "candidates" / f"{a.get('id')}.cu"
        if a.get("kind") != "attempt" or not a.get("faster") or (a.get("speedup") or 0) < 1 + min_gain or \
                not text_file.is_file():
            continue
        if a.get("launch") or a.get("nvcc_flags"):
            # the best's own text at the original launch is another variant (a grid change patch cannot write
            # on top of a text change it can: seen on a grid-stride sum, 261x from the text alone)
            best_moves = best_moves or text_file.read_text() == best_text
            continue
        found.append((a["speedup"], text_file))
    for speedup, text_file in sorted(found, key=lambda f: -f[0]):
        text = text_file.read_text()
        if text != best_text or best_moves:
            (run / "fallback").mkdir(exist_ok=True)
            (run / "fallback" / "kernel.cu").write_text(text)
            return run / "fallback" / "kernel.cu", speedup
    return None


def revert(run, app_root: Path, kid: str, logs: Path) -> None:
    r = run(["patch", kid, "-C", str(app_root), "--revert", "--json"], logs / "patch.log", echo=False)
    if r.code != 0:
        raise MepgenError(f"reverting the patch of {kid} failed: {r.last_error} -- the application's sources are "
                          f"as `mepgen patch` left them; see {logs / 'patch.log'}", exit_code=2)
