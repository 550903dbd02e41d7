"""`mepgen patch KERNEL [--apply | --revert]`, `mepgen patch --all [--batch NAME] [--apply | --revert]`."""
from __future__ import annotations

import json
from pathlib import Path

import click

from ..config import load_config
from ..errors import MepgenError
from ..exitcodes import CHECK_FAILED
from ..inventory import load
from ..kernelname import find_kernel
from ..spec import load_spec
from ..workspace import Workspace, write_atomic
from .batch import winners
from .prepare import Prepared, extra_flags, prepare  # noqa: F401  (extra_flags: re-exported)
from .splice import unified_diff
from .state import applied_ids, apply, compose, decode_edits, diff_path, manifest, revert
from .validate import compile_units, validate
from ..evaluate import memcheck


@click.command("patch")
@click.argument("kernel", required=False)
@click.option("--from", "variant", type=click.Path(path_type=Path),
              help="The kernel.cu variant to patch in (default: the best of the newest `mepgen optimize` run, "
                   "else the MEP's kernel.cu).")
@click.option("--launch-from", "launch_from", type=click.Path(path_type=Path),
              help="mep.yaml with the winner's launch configuration (default: a mep.yaml beside --from).")
@click.option("--all", "all_kernels", is_flag=True,
              help="Every verified win of an `optimize --all` batch (--batch; default the newest); with --revert: "
                   "every applied patch.")
@click.option("--batch", "batch_name", default=None, help="With --all: the batch whose winners to patch.")
@click.option("--apply", "do_apply", is_flag=True, help="Change the application's file (a backup is kept).")
@click.option("--revert", "do_revert", is_flag=True, help="Restore the file from the backup of --apply.")
@click.option("--force", is_flag=True, help="With --revert: revert even if the file changed after the patch.")
@click.option("--no-validate", is_flag=True, help="Skip the compile, re-extract and validation-command checks.")
@click.option("-C", "--app", "app", type=click.Path(path_type=Path), help="The application's folder.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def patch(kernel, variant, launch_from, all_kernels, batch_name, do_apply, do_revert, force, no_validate, app,
          as_json):
    """Splice the verified variant of KERNEL back into the application's source.

    Without --apply, writes the reviewable diff .mepgen/patches/ID.diff (git apply / patch -p1 from the
    application's root) and changes nothing. --apply changes the file, keeping a backup, then validates:
    recompiles the changed translation units with their compile_commands flags, re-extracts to check the
    kernel's signature and launch sites, and runs `patch.validate_command` from the config when set.
    --revert restores the backup. Applying twice is a no-op. Several kernels of one file patch one after
    another; each reverts on its own. Everything is read and checked before a file is written, under the
    application's lock (.mepgen/lock). Exits 1 when the patched application fails validation.
    """
    if do_apply and do_revert:
        raise MepgenError("--apply and --revert exclude each other")
    if bool(kernel) == all_kernels:
        raise MepgenError("name a KERNEL or give --all, one of the two")
    if all_kernels and (variant or launch_from):
        raise MepgenError("--from and --launch-from name one kernel's variant: not with --all")
    if batch_name and not all_kernels:
        raise MepgenError("--batch goes with --all")
    ws = Workspace(app) if app else Workspace.find()
    # the configuration is read and checked before anything is written (an invalid one changes nothing)
    cfg = load_config(ws.app_root) if do_apply and not no_validate else None
    inv = load(ws.inventory_path)
    with ws.lock("patch"):
        if do_revert:
            if all_kernels:
                ids = applied_ids(ws)
            else:
                kid = find_kernel(inv, kernel)["id"]
                elsewhere = [i for i in applied_ids(ws) if i.startswith(kid + "@")]    # its launches elsewhere
                ids = ([kid] if manifest(ws, kid) is not None or not elsewhere else []) + elsewhere
            if all_kernels and not ids:
                raise MepgenError("no applied patch to revert")
            out = [{"kernel": kid, "reverted": True, "message": revert(ws, kid, force=force)} for kid in ids]
            _say(as_json, out if all_kernels else out[0], "\n".join(o["message"] for o in out))
            return
        if all_kernels:
            jobs = [(find_kernel(inv, w["kernel"]), Path(w["variant"]), None) for w in winners(ws, batch_name)]
        else:
            jobs = [(find_kernel(inv, kernel), variant, launch_from)]
        prepared = []
        for k, v, lf in jobs:           # every refusal before any write
            try:
                prepared.append(prepare(ws, inv, k, v, lf))
            except MepgenError as e:
                if not all_kernels:
                    raise
                raise MepgenError(f"{k['id']} (from {v}): {e}; nothing was patched: patch the others one by one, "
                                  f"or fix this one first", exit_code=e.exit_code) from None
        together(prepared)
        if do_apply:    # compute-sanitizer on each variant, still before any write
            for pr in prepared:
                if not pr.plan.unchanged:
                    pr.memcheck = memory_check(ws, pr.kernel, pr.variant, pr.winner_yaml, pr.mep_yaml, pr.flags)
        results = []
        for i, pr in enumerate(prepared):
            results.append(_one(ws, inv, pr.refresh(ws) if i else pr, do_apply, no_validate, cfg))
    if all_kernels:
        _say(as_json, results, "\n\n".join(r["text"] for r in results))
    else:
        _say(as_json, results[0], results[0]["text"])
    failed = [r for r in results if r.get("valid") is False]
    if failed:
        raise MepgenError("; ".join(r["error"] for r in failed), exit_code=CHECK_FAILED)
    if not all_kernels and results[0].get("refused"):
        raise MepgenError(results[0]["refused"])


def together(prepared: list[Prepared]) -> None:
    """The patches of one batch that share a file must not change the same bytes: refused before any write."""
    by_file: dict[str, list[Prepared]] = {}
    for pr in prepared:
        if not pr.plan.unchanged:
            by_file.setdefault(pr.plan.file, []).append(pr)
    for group in by_file.values():
        ids = {pr.plan.kernel_id for pr in group}
        others = [(m["id"], decode_edits(m["edits"])) for m in group[0].state.applied if m["id"] not in ids]
        compose(group[0].state.original, others + [(pr.plan.kernel_id, pr.plan.edits) for pr in group])


def _one(ws: Workspace, inv: dict, pr: Prepared, do_apply: bool, no_validate: bool, cfg: dict | None) -> dict:
    k, p, flags = pr.kernel, pr.plan, pr.flags
    if p.unchanged and flags:
        return {"kernel": k["qualified_name"], "unchanged": True, "nvcc_flags": flags, "text": flags_note(flags)}
    if p.unchanged:
        raise MepgenError(f"the variant's {k['qualified_name']} is the original kernel, byte for byte: nothing to "
                          f"patch")
    before, after = pr.before_after()
    diff = unified_diff(k["file"], before, after)
    for c in pr.companions:                 # the launches in other files: one diff, one review
        diff += unified_diff(c.plan.file, *c.before_after())
    write_atomic(diff_path(ws, k["id"]), diff)
    result = {"kernel": k["qualified_name"], "file": k["file"], "variant": str(pr.variant),
              "diff": str(diff_path(ws, k["id"])), "new_helpers": p.new_helpers, "launch": p.launch_notes,
              "helpers_changed": p.helper_notes,
              "state": pr.status, "nvcc_flags": flags}
    if not do_apply:
        if result["state"] == "changed":
            result["refused"] = f"{k['file']} changed since `mepgen extract`: rerun `mepgen extract` first"
        result["text"] = f"{diff}\nwrote {result['diff']} (review it; --apply changes {k['file']})" + \
            (f"\n{flags_note(flags)}" if flags else "")
        return result
    if pr.memcheck is not None:
        result["memcheck"] = pr.memcheck
    files = [k["file"]] + [c.plan.file for c in pr.companions]
    original = None if no_validate or result["state"] == "applied" else \
        [c for f in files for c in compile_units(ws.app_root, inv, f)]
    msgs = [apply(ws, p, pr.variant)] if p.edits else []
    done = []
    try:
        for c in pr.companions:
            msgs.append(apply(ws, c.plan, pr.variant))
            done.append(c.plan.kernel_id)
    except BaseException:
        for kid in reversed(done):
            revert(ws, kid)
        if p.edits:
            revert(ws, p.kernel_id)
        raise
    msg = result["message"] = "; ".join(msgs)
    result["files"] = files
    if not no_validate:
        v = validate(ws.app_root, inv, k, k["file"], cfg["patch"]["validate_command"], bool(p.launch_notes),
                     original=original, also=files[1:])
        result["validation"] = [{"check": c.name, "ok": c.ok, "detail": c.detail, "pre_existing": c.pre_existing}
                                for c in v.checks]
        result["valid"] = v.ok
    mark = (lambda c: "ok " if c["ok"] else "WAS " if c.get("pre_existing") else "FAIL")
    lines = [msg] + ([flags_note(flags)] if flags else []) + [
        f"  {mark(c)} {c['check']}: {c['detail']}".rstrip(": ") for c in result.get("validation", [])]
    result["text"] = "\n".join(lines)
    if result.get("valid") is False:
        failed = "; ".join(f"{c['check']}: {c['detail']}".rstrip(": ") for c in result["validation"]
                           if not c["ok"] and not c.get("pre_existing"))
        result["error"] = (f"the patched application failed validation ({failed}); `mepgen patch {k['id']} --revert` "
                           f"restores {k['file']}")
    return result


def memory_check(ws, k, variant: Path, winner_yaml: Path, mep_yaml: Path, flags: list[str]) -> dict:
    """Before --apply: compute-sanitizer's memcheck on a variant it has not found clean yet (evaluate/memcheck.py);
    a memory error refuses the patch (exit 3), no verdict (no sanitizer, no GPU) is said and recorded."""
    launch = load_spec(winner_yaml).launch if winner_yaml.is_file() and winner_yaml.resolve() != mep_yaml.resolve() \
        else None
    report = memcheck.check_variant(ws.mep_dir(k["id"]), variant, launch, flags,
                                    load_config(ws.app_root)["evaluate"]["sandbox"])
    if report.clean is False:
        raise MepgenError(f"{variant} has a memory error, not patched: {report.message}", exit_code=3)
    if report.clean is None:
        click.echo(f"mepgen: {report.message}", err=True)
    return report.to_dict()


def flags_note(flags: list[str]) -> str:
    return (f"the winner is built with extra nvcc flags: {' '.join(flags)} -- mepgen patch does not write build "
            f"flags back; add them to the application's build system (Makefile/CMake) for this file")


def _say(as_json: bool, obj, text: str) -> None:
    if as_json:
        strip = (lambda o: {k: v for k, v in o.items() if k != "text"})
        obj = [strip(o) for o in obj] if isinstance(obj, list) else strip(obj)
    click.echo(json.dumps(obj, indent=1) if as_json else text)
