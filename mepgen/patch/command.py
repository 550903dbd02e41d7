"""`mepgen patch KERNEL [--apply | --revert]`."""
from __future__ import annotations

import json
from pathlib import Path

import click

from ..config import load_config
from ..errors import MepgenError
from ..exitcodes import CHECK_FAILED
from ..inventory import load
from ..kernelname import find_kernel
from ..workspace import Workspace, write_atomic
from ..spec import load_spec
from .launch import launch_change, read_launch
from .splice import plan, sha256, unified_diff
from .state import apply, diff_path, revert, status
from .validate import compile_units, validate
from .variant import read_variant


def default_variant(ws: Workspace, kernel: dict) -> Path:
    """The best variant of the newest `mepgen optimize` run of the kernel; without one, the MEP's kernel.cu
    (a person may have edited and verified it with `mepgen run`)."""
    runs = sorted((ws.root / "runs" / kernel["id"]).glob("*/best/kernel.cu"), key=lambda p: p.stat().st_mtime)
    if runs:
        return runs[-1]
    path = ws.mep_dir(kernel["id"]) / "kernel.cu"
    if not path.is_file():
        raise MepgenError(f"no MEP for {kernel['qualified_name']} ({path}): run `mepgen mep {kernel['id']}` "
                          f"first, or give the variant with --from")
    return path


@click.command("patch")
@click.argument("kernel")
@click.option("--from", "variant", type=click.Path(path_type=Path),
              help="The kernel.cu variant to patch in (default: the best of the newest `mepgen optimize` run, "
                   "else the MEP's kernel.cu).")
@click.option("--launch-from", "launch_from", type=click.Path(path_type=Path),
              help="mep.yaml with the winner's launch configuration (default: a mep.yaml beside --from).")
@click.option("--apply", "do_apply", is_flag=True, help="Change the application's file (a backup is kept).")
@click.option("--revert", "do_revert", is_flag=True, help="Restore the file from the backup of --apply.")
@click.option("--force", is_flag=True, help="With --revert: revert even if the file changed after the patch.")
@click.option("--no-validate", is_flag=True, help="Skip the compile, re-extract and validation-command checks.")
@click.option("-C", "--app", "app", type=click.Path(path_type=Path), help="The application's folder.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def patch(kernel, variant, launch_from, do_apply, do_revert, force, no_validate, app, as_json):
    """Splice the verified variant of KERNEL back into the application's source.

    Without --apply, writes the reviewable diff .mepgen/patches/ID.diff (git apply / patch -p1 from the
    application's root) and changes nothing. --apply changes the file, keeping a backup, then validates:
    recompiles the changed translation units with their compile_commands flags, re-extracts to check the
    kernel's signature and launch sites, and runs `patch.validate_command` from the config when set.
    --revert restores the backup. Applying twice is a no-op. Exits 1 when the patched application fails
    validation.
    """
    if do_apply and do_revert:
        raise MepgenError("--apply and --revert exclude each other")
    ws = Workspace(app) if app else Workspace.find()
    inv = load(ws.inventory_path)
    k = find_kernel(inv, kernel)
    if do_revert:
        msg = revert(ws, k["id"], force=force)
        _say(as_json, {"kernel": k["qualified_name"], "reverted": True, "message": msg}, msg)
        return
    variant = (variant or default_variant(ws, k)).resolve()
    tus = [t for t in inv["translation_units"] if t["file"] == k["file"]] or inv["translation_units"]
    defs = read_variant(variant, tus[0]["include_dirs"] if tus else [])
    target = ws.app_root / k["file"]
    current = target.read_bytes()
    backup = ws.root / "patches" / k["id"] / "backup" / k["file"]
    # the patch is always computed against the file as extracted: the current one, or the backup once applied
    recorded = current if sha256(current) == inv["files"][k["file"]] else (
        backup.read_bytes() if backup.is_file() else current)
    change, flags = None, []
    winner_yaml = launch_from or (variant.parent / "mep.yaml")
    mep_yaml = ws.mep_dir(k["id"]) / "mep.yaml"
    if winner_yaml.is_file() and winner_yaml.resolve() != mep_yaml.resolve():
        if not mep_yaml.is_file():
            raise MepgenError(f"{winner_yaml} changes the launch, but the MEP's {mep_yaml} to compare with is missing")
        change = launch_change(inv, k, load_spec(mep_yaml), read_launch(winner_yaml), recorded)
        flags = extra_flags(load_spec(mep_yaml), load_spec(winner_yaml))
    elif launch_from is not None:
        raise MepgenError(f"{launch_from} not found")
    p = plan(ws.app_root, inv, k, defs, recorded, change)
    if p.unchanged and flags:
        _say(as_json, {"kernel": k["qualified_name"], "unchanged": True, "nvcc_flags": flags}, flags_note(flags))
        return
    if p.unchanged:
        raise MepgenError(f"the variant's {k['qualified_name']} is the original kernel, byte for byte: nothing to patch")
    diff = unified_diff(k["file"], p.original, p.patched)
    write_atomic(diff_path(ws, k["id"]), diff)
    result = {"kernel": k["qualified_name"], "file": k["file"], "variant": str(variant),
              "diff": str(diff_path(ws, k["id"])), "new_helpers": p.new_helpers, "launch": p.launch_notes,
              "state": status(ws, p, current), "nvcc_flags": flags}
    if not do_apply:
        if result["state"] == "changed":
            raise MepgenError(f"{k['file']} changed since `mepgen extract`: rerun `mepgen extract` first")
        _say(as_json, result, f"{diff}\nwrote {result['diff']} (review it; --apply changes {k['file']})" +
             (f"\n{flags_note(flags)}" if flags else ""))
        return
    result["memcheck"] = memory_check(ws, k, variant, winner_yaml, mep_yaml, flags)
    original = None if no_validate else compile_units(ws.app_root, inv, k["file"])   # before the patch
    msg = apply(ws, p, variant)
    result["message"] = msg
    if not no_validate:
        cfg = load_config(ws.app_root)
        v = validate(ws.app_root, inv, k, k["file"], cfg["patch"]["validate_command"], bool(p.launch_notes),
                     original=original)
        result["validation"] = [{"check": c.name, "ok": c.ok, "detail": c.detail, "pre_existing": c.pre_existing}
                                for c in v.checks]
        result["valid"] = v.ok
    lines = [msg] + ([flags_note(flags)] if flags else []) + [
        f"  {'ok ' if c['ok'] else 'WAS ' if c.get('pre_existing') else 'FAIL'} {c['check']}: {c['detail']}".rstrip(": ")
        for c in result.get("validation", [])]
    _say(as_json, result, "\n".join(lines))
    if result.get("valid") is False:
        failed = "; ".join(f"{c['check']}: {c['detail']}".rstrip(": ") for c in result["validation"]
                           if not c["ok"] and not c.get("pre_existing"))
        raise MepgenError(f"the patched application failed validation ({failed}); `mepgen patch {k['id']} --revert` "
                          f"restores {k['file']}", exit_code=CHECK_FAILED)


def memory_check(ws, k, variant: Path, winner_yaml: Path, mep_yaml: Path, flags: list[str]) -> dict:
    """Before --apply: compute-sanitizer's memcheck on a variant it has not found clean yet (evaluate/memcheck.py);
    a memory error refuses the patch (exit 3), no verdict (no sanitizer, no GPU) is said and recorded."""
    from ..evaluate import memcheck
    launch = load_spec(winner_yaml).launch if winner_yaml.is_file() and winner_yaml.resolve() != mep_yaml.resolve() \
        else None
    report = memcheck.check_variant(ws.mep_dir(k["id"]), variant, launch, flags,
                                    load_config(ws.app_root)["evaluate"]["sandbox"])
    if report.clean is False:
        raise MepgenError(f"{variant} has a memory error, not patched: {report.message}", exit_code=3)
    if report.clean is None:
        click.echo(f"mepgen: {report.message}", err=True)
    return report.to_dict()


def extra_flags(mep, winner) -> list[str]:
    """The nvcc flags the winner was built with beyond the MEP's own (an optimizer's flag proposal)."""
    own = list(mep.build.nvcc_flags)
    return list(winner.build.nvcc_flags[len(own):]) if winner.build.nvcc_flags[:len(own)] == own else \
        [f for f in winner.build.nvcc_flags if f not in own]


def flags_note(flags: list[str]) -> str:
    return (f"the winner is built with extra nvcc flags: {' '.join(flags)} -- mepgen patch does not write build "
            f"flags back; add them to the application's build system (Makefile/CMake) for this file")


def _say(as_json: bool, obj: dict, text: str) -> None:
    click.echo(json.dumps(obj, indent=1) if as_json else text)
