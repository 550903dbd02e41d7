"""`mepgen mep`: from the inventory to `.mepgen/meps/<kernel id>/`, for one kernel or all of them."""
from __future__ import annotations

import gc
import re
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from ..progress import progress
from .. import datagen
from ..budget import time_budget
from ..errors import MepgenError, os_error_message
from ..inventory import load
from ..kernelname import find_kernel
from ..spec import Spec, Todo, load_spec
from ..workspace import Workspace
from . import components, writer
from . import chain as chains
from .ask_llm import Outcome, launch_site
from .assemble import assemble, choose_launch
from ..config import load_config
from .buildcfg import arch_source, configured_arch
from .kernelsrc import render_kernel_file
from .project import Project
from ..harness import render_harness, render_makefile
from .render import render_yaml

#: kernel features an MEP cannot reproduce yet, with what to tell the user
UNSUPPORTED = {"texture": "texture or surface objects", "dynamic_parallelism": "dynamic parallelism (launches "
               "from device code)"}


@dataclass
class MepResult:
    kernel: str
    path: Path
    spec: Spec
    notes: list[str] = field(default_factory=list)
    backup: str | None = None
    llm: Outcome | None = None          # what the LLM proposed for the todos (`--ask-llm`)
    kernel_dict: dict | None = field(default=None, repr=False, compare=False)   # the inventory's entry


def check_fresh(ws: Workspace, inv: dict) -> None:
    """Refuse to work from an inventory older than the sources it describes."""
    changed = []
    for rel, digest in inv.get("files", {}).items():
        path = ws.app_root / rel
        if not path.is_file() or writer.sha256(path.read_bytes()) != digest:
            changed.append(rel)
    if changed:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        raise MepgenError(f"the inventory is stale: {shown} changed since `mepgen extract`; rerun "
                          f"`mepgen extract {ws.app_root}`")


def unsupported(kernel: dict) -> list[str]:
    found = [UNSUPPORTED[f] for f in kernel.get("features", []) if f in UNSUPPORTED]
    if kernel["launch_sites"] and all(s["kind"] == "cudaLaunchCooperativeKernel" for s in kernel["launch_sites"]):
        found.append("cooperative launches (cudaLaunchCooperativeKernel)")
    return found


def select(inv: dict, names: list[str], every: bool) -> list[dict]:
    if every:
        return list(inv["kernels"])
    if not names:
        raise MepgenError("name a kernel (`mepgen list` shows them) or pass --all")
    return [find_kernel(inv, n) for n in names]


@dataclass
class Failed:
    """A kernel of `--all` that got no MEP, and why: mepgen cannot make one (`internal` False: a templated
    launch it cannot read, a feature an MEP cannot reproduce), or mepgen itself failed on it (`internal`)."""
    kernel: str
    reason: str
    internal: bool = False


def generate(ws: Workspace, names: list[str], every: bool = False, force: bool = False,
             sizes: dict[str, int] | None = None, detect_gpu: bool = True, log=lambda m: None,
             keep_edits: bool = False, chain: bool = False, ask=None,
             failed: list[Failed] | None = None, host_report: dict | None = None) -> list[MepResult]:
    """Write the MEP of each selected kernel. With `failed` (a list to fill), a kernel that cannot have an MEP
    is recorded there and the others are still written (`--all`: one bad kernel must not sink the rest);
    without it, the first such kernel raises. With `keep_edits`, a kernel whose mep.yaml a person edited is
    refreshed from that file instead. Launches that feed the target's inputs are named in the notes; with
    `chain` the MEP runs them first. `ask` (ask_llm.TodoAsker) proposes the todo fields of each MEP that has
    some, before it is written. `host_report` (a dict to fill): its `host` is what became of the plain C/C++
    sources read for value tracing (mep/hostsrc.py)."""
    inv = load(ws.inventory_path)
    check_fresh(ws, inv)
    kernels = select(inv, names, every)
    ok = []
    for k in kernels:
        bad = unsupported(k)
        if k.get("not_built"):          # a leftover definition the build does not compile (extract/definitions.py)
            why = f"no MEP of {k['id']}: {k['not_built']}"
            if failed is None:
                raise MepgenError(why)
            failed.append(Failed(k["id"], why))
        elif k.get("unreadable"):       # a parse error inside it (extract/run.py): nothing static to complete from
            why = (f"extract could not read {k['qualified_name']} ({k['unreadable']}): no MEP from static completion; "
                   f"`mepgen capture {k['qualified_name']} -- ./app ARGS` can still record its launches")
            if failed is None:
                raise MepgenError(why)
            failed.append(Failed(k["id"], why))
        elif bad:
            why = f"{k['qualified_name']} uses {', '.join(bad)}, which an MEP cannot reproduce yet"
            if failed is None:
                raise MepgenError(why)
            failed.append(Failed(k["qualified_name"], why))
        else:
            ok.append(k)
    arch = configured_arch(load_config(ws.app_root))
    results = []
    order = {id(k): i for i, k in enumerate(ok)}
    # one group of translation units at a time, dropped before the next: memory follows the largest group
    host = None      # the plain C/C++ sources read for value tracing (mep/hostsrc.py): one for every group
    with progress(f"completing {len(ok)} MEP(s)", total=len(ok) if len(ok) > 1 else None) as bar:
        for units, group in components.groups(inv, ok):
            project = Project(ws.app_root, inv["translation_units"], only=units,
                              host_sources=inv.get("host_sources"))
            if host is None:
                host = project.host
            project.host = host
            if host_report is not None:   # filled as the kernels are completed
                host_report["host"] = host
            for k in group:
                bar.note(f"completing {k['qualified_name']}")
                results += _guarded(ws, inv, project, arch, k, force, sizes, detect_gpu, log, keep_edits, chain,
                                    ask, failed)
                bar.advance()
            del project
            gc.collect()
    return sorted(results, key=lambda r: order.get(id(r.kernel_dict), 0)) if len(results) > 1 else results


def _guarded(ws, inv, project, arch, k, force, sizes, detect_gpu, log, keep_edits, chain, ask,
             failed) -> list[MepResult]:
    if failed is None:
        out = _one(ws, inv, project, arch, k, force, sizes, detect_gpu, log, keep_edits, chain, ask)
    else:
        try:
            out = _one(ws, inv, project, arch, k, force, sizes, detect_gpu, log, keep_edits, chain, ask)
        except MepgenError as e:
            failed.append(Failed(k["qualified_name"], str(e)))
            return []
        except OSError as e:        # the file system said no (space, permissions): the user's to fix, not a bug
            failed.append(Failed(k["qualified_name"], os_error_message(e)))
            return []
        except Exception as e:      # noqa: BLE001 -- a bug of mepgen's on one kernel: said, the others written
            log(traceback.format_exc())
            failed.append(Failed(k["qualified_name"], f"{type(e).__name__}: {e}", internal=True))
            return []
    for r in out:
        r.kernel_dict = k
    return out


def _one(ws, inv, project, arch, k, force, sizes, detect_gpu, log, keep_edits, chain, ask) -> list[MepResult]:
    """The MEP of one kernel (a list: `--keep-edits` refreshes instead)."""
    mep_dir = ws.mep_dir(k["id"])
    if writer.restore_interrupted(mep_dir):
        log(f"restored {mep_dir}: a run killed while replacing it had left the old folder aside")
    if keep_edits and (mep_dir / "mep.yaml").is_file() and writer.captured(mep_dir):
        log(f"kept {mep_dir / 'mep.yaml'}: written by `mepgen capture` from a recorded launch")
        return [MepResult(k["qualified_name"], mep_dir, load_spec(mep_dir / "mep.yaml"),
                          ["written by `mepgen capture` from a recorded launch: kept"])]
    if keep_edits and mep_dir.exists() and writer.yaml_edited(mep_dir):
        log(f"kept the edited {mep_dir / 'mep.yaml'}")
        return refresh(ws, [k["qualified_name"]])
    if not sizes and not force and mep_dir.exists():
        given = writer.origin(mep_dir)["sizes"]      # sizes a person gave with --size stay until --force
        if given:
            shown = ", ".join(f"{n}={v}" for n, v in given.items())
            log(f"{k['qualified_name']}: the sizes given before stay ({shown})")
            sizes = given
    backup = writer.guard_overwrite(mep_dir, force) if mep_dir.exists() else None
    symbols = chains.Symbols()
    with time_budget(f"mep: completing {k['qualified_name']}"):
        spec, notes = assemble(project, inv, k, dict(sizes or {}), detect_gpu, symbols=symbols)
    if arch:
        spec.build.arch = arch
    site, _ = choose_launch(project, k)
    found = chains.detect(project, inv, k, spec, site, symbols, dict(sizes or {}))
    notes += found.notes
    feeders = []
    if chain and found.feeders:
        notes += chains.apply(spec, found, site)
        feeders = [f.kernel for f in found.feeders]
    else:
        notes += chains.describe(found)
        if chain:
            notes.append("--chain: no earlier launch feeds this kernel's inputs; the MEP has no chain")
    managed = [p.name for p in spec.params if p.note and "cudaMallocManaged" in p.note]
    if managed:
        notes.append(f"{', '.join(managed)} is managed memory in the application; the MEP uses device memory")
    header = [f"MEP of {k['qualified_name']} (mepgen, format 1: docs/mep-format.md). Edit freely; then run",
              f"`mepgen mep {k['qualified_name']} --refresh` to render harness.cu, Makefile and data/in again.",
              f"build.arch: {arch_source(inv, k, spec.build.arch, detect_gpu, configured=arch)}"] + notes
    yaml_text = render_yaml(spec, header)
    big = _too_big(spec) if not spec.todo else None     # placeholder sizes say nothing about memory
    if big is not None:
        spec.todo.insert(0, big)
        yaml_text = render_yaml(spec, header)
    assembled, spec = spec, load_spec(mep_dir / "mep.yaml", yaml_text)   # validated as a person's file is
    kernel_text = render_kernel_file(ws.app_root, k, spec, feeders)
    outcome = None
    if ask is not None and spec.todo:
        outcome = ask(assembled, kernel_text, yaml_text, launch_site(ws.app_root, k))   # with its notes
        if outcome.changed:
            yaml_text = render_yaml(outcome.spec, header + outcome.header(), outcome.marks(assembled))
            spec = load_spec(mep_dir / "mep.yaml", yaml_text)
            kernel_text = render_kernel_file(ws.app_root, k, spec, feeders)
    files = {"mep.yaml": yaml_text, "kernel.cu": kernel_text,
             "harness.cu": render_harness(spec), "Makefile": render_makefile(spec),
             writer.ORIGIN_FILE: writer.origin_text("mep", sizes)}
    writer.write_folder(mep_dir, files, _fill_inputs(spec), yaml_hash=writer.sha256(yaml_text.encode()))
    log(f"wrote {mep_dir}")
    return [MepResult(k["qualified_name"], mep_dir, spec, notes, backup, outcome)]


def refresh(ws: Workspace, names: list[str], every: bool = False) -> list[MepResult]:
    """Validate each (hand-edited) mep.yaml and render harness.cu, Makefile and data/in from it again;
    mep.yaml and kernel.cu stay as they are."""
    inv = load(ws.inventory_path)
    out = []
    for k in select(inv, names, every):
        mep_dir = ws.mep_dir(k["id"])
        writer.restore_interrupted(mep_dir)
        if not (mep_dir / "mep.yaml").is_file():
            raise MepgenError(f"{mep_dir / 'mep.yaml'} does not exist: run `mepgen mep {k['qualified_name']}` first")
        spec = load_spec(mep_dir / "mep.yaml")
        _check_chain_kernels(spec, mep_dir)
        datagen.check_fits(spec, mep_dir)          # before the folder is rendered, naming the real mep.yaml
        hash_file = mep_dir / writer.HASH_FILE
        old_hash = hash_file.read_text().strip() if hash_file.exists() else None
        files = {"harness.cu": render_harness(spec), "Makefile": render_makefile(spec)}
        writer.write_folder(mep_dir, files, _fill_inputs(spec), yaml_hash=old_hash)
        out.append(MepResult(k["qualified_name"], mep_dir, spec))
    return out


def _check_chain_kernels(spec: Spec, mep_dir: Path) -> None:
    """A hand-written `chain` runs kernels that kernel.cu must define (refresh keeps kernel.cu as it is)."""
    text = (mep_dir / "kernel.cu").read_text(errors="replace") if (mep_dir / "kernel.cu").is_file() else ""
    for i, step in enumerate(spec.chain):
        short = step.kernel.split("::")[-1]
        if not re.search(rf"__global__[^;{{}}]*\b{re.escape(short)}\s*\(", text):
            raise MepgenError(f"{mep_dir / 'mep.yaml'}: chain[{i}].kernel: kernel.cu defines no kernel {step.kernel}; "
                              f"copy its definition in, or regenerate with `mepgen mep {spec.kernel.name} --chain "
                              "--force`")


def _fill_inputs(spec: Spec):
    """data/in, once the spec is complete: sizes or counts mepgen did not derive never allocate (a placeholder
    size can ask for terabytes); `mepgen mep KERNEL --refresh` generates them after the todos are settled."""
    if spec.todo:
        return None

    def fill(folder: Path) -> None:
        datagen.make_inputs(spec, folder, spec.verify.seed, folder / "data" / "in", keep=False)
    return fill


def _too_big(spec: Spec) -> Todo | None:
    """A todo when the derived sizes ask for more memory than an MEP may allocate (datagen.MAX_MEP_BYTES)."""
    try:
        why = datagen.check_footprint(spec)
    except MepgenError as e:
        return Todo("sizes", str(e))
    return Todo("sizes", f"the sizes as derived are too large for an MEP: {why}") if why else None
