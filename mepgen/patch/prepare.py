"""Everything a patch needs, read and checked before any file is touched: the variant, the winner's launch, the
original the edits apply to, and the plan."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MepgenError
from ..spec import load_spec
from ..workspace import Workspace
from . import site_launches
from .launch import launch_change, read_launch
from .splice import Plan, companion_plan, plan, sha256
from .state import FileState, file_state, status
from .variant import read_variant


@dataclass
class Prepared:
    kernel: dict
    variant: Path
    plan: Plan
    state: FileState
    current: bytes
    flags: list[str] = field(default_factory=list)
    winner_yaml: Path | None = None     # the winner's mep.yaml (its launch), when it has one
    mep_yaml: Path | None = None        # the MEP's own
    memcheck: dict | None = None        # compute-sanitizer's verdict on the variant (command.memory_check)
    companions: list["Prepared"] = field(default_factory=list)   # launch edits of other files (ID@file patches)

    @property
    def status(self) -> str:
        """'applied', 'pristine' or 'changed' (state.status), over the kernel's file and its launches elsewhere."""
        parts = ([status(self.state, self.plan.kernel_id, self.plan.edits, self.current)] if self.plan.edits else []) \
            + [c.status for c in self.companions]
        for st in ("changed", "pristine"):
            if st in parts:
                return st
        return "applied" if parts else status(self.state, self.plan.kernel_id, self.plan.edits, self.current)

    def refresh(self, ws: Workspace) -> "Prepared":
        """The same plan against the file as it is now (an earlier patch of the batch may have changed it)."""
        self.current = (ws.app_root / self.plan.file).read_bytes()
        self.state = file_state(ws, self.plan.file, self.plan.recorded_sha, self.current)
        if self.state.original is None:
            raise MepgenError(f"{self.plan.file} changed while patching: rerun `mepgen extract`")
        for c in self.companions:
            c.refresh(ws)
        return self

    def before_after(self) -> tuple[bytes, bytes]:
        """The file with the other applied patches, and with this one too: what the diff shows."""
        before = self.state.content(exclude=self.plan.kernel_id)
        return before, self.state.content(exclude=self.plan.kernel_id, extra=(self.plan.kernel_id, self.plan.edits))


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


def extra_flags(mep, winner) -> list[str]:
    """The nvcc flags the winner was built with beyond the MEP's own (an optimizer's flag proposal)."""
    own = list(mep.build.nvcc_flags)
    return list(winner.build.nvcc_flags[len(own):]) if winner.build.nvcc_flags[:len(own)] == own else \
        [f for f in winner.build.nvcc_flags if f not in own]


def prepare(ws: Workspace, inv: dict, k: dict, variant: Path | None, launch_from: Path | None) -> Prepared:
    """The patch of kernel `k`, against the file as extracted, with the file's other applied patches known."""
    variant = (variant or default_variant(ws, k)).resolve()
    tus = [t for t in inv["translation_units"] if t["file"] == k["file"]] or inv["translation_units"]
    defs = read_variant(variant, tus[0]["include_dirs"] if tus else [])
    target = ws.app_root / k["file"]
    try:
        current = target.read_bytes()
    except OSError as e:
        raise MepgenError(f"cannot read {target} ({e.strerror or e}): the kernel's file is gone or unreadable; "
                          f"rerun `mepgen extract`") from None
    recorded_sha = inv["files"][k["file"]]
    state = file_state(ws, k["file"], recorded_sha, current)
    if state.original is None:
        raise MepgenError(f"{k['file']} changed since `mepgen extract` and the patches mepgen applied (sha256 "
                          f"{sha256(current)[:12]}, extracted {recorded_sha[:12]}): rerun `mepgen extract` and "
                          f"check the MEP before patching")
    recorded = state.original   # the patch is always computed against the file as extracted

    def source(file: str) -> bytes:
        data = (ws.app_root / file).read_bytes()
        if file in inv["files"] and sha256(data) != inv["files"][file]:
            data = file_state(ws, file, inv["files"][file], data).original or data
        return data

    change, flags, winner_block = None, [], None
    winner_yaml = launch_from or (variant.parent / "mep.yaml")
    mep_yaml = ws.mep_dir(k["id"]) / "mep.yaml"
    mep_spec = load_spec(mep_yaml) if mep_yaml.is_file() else None
    if winner_yaml.is_file() and winner_yaml.resolve() != mep_yaml.resolve():
        if mep_spec is None:
            raise MepgenError(f"{winner_yaml} changes the launch, but the MEP's {mep_yaml} to compare with is missing")
        new_launch = read_launch(winner_yaml)
        change = launch_change(inv, k, mep_spec, new_launch, recorded, source)
        flags = extra_flags(mep_spec, load_spec(winner_yaml))
        winner_block = (new_launch or {}).get("block")
    elif launch_from is not None:
        raise MepgenError(f"{launch_from} not found")
    variant_text, original_text = variant.read_text(errors="replace"), recorded.decode(errors="replace")
    launch = mep_spec.launch if mep_spec is not None else None
    if launch is not None:      # the configurations a capture saw first: its refusals name them by number
        site_launches.check_observed(k["qualified_name"], launch, winner_block, variant_text, original_text, k,
                                     inv.get("macros", {}))
    site_launches.check(k, change is not None and bool(change.edits or change.prelude or change.others),
                        variant_text, original_text, inv.get("macros", {}), bool(launch and launch.observed))
    p = plan(ws.app_root, inv, k, defs, recorded, change, source)
    prepared = Prepared(k, variant, p, state, current, flags, winner_yaml, mep_yaml)
    for f, edits in sorted((change.others if change else {}).items()):
        prepared.companions.append(_companion(ws, inv, k, f, edits))
    if not p.unchanged:
        prepared.before_after()   # edits that overlap another applied patch are refused here, before any write
    return prepared


def _companion(ws: Workspace, inv: dict, k: dict, file: str, edits) -> "Prepared":
    """The launch edits of another file that launches the kernel: a patch of its own (`ID@file`), applied and
    reverted with the kernel's."""
    if file not in inv["files"]:
        raise MepgenError(f"{file} launches {k['qualified_name']} but `mepgen extract` did not read it: rerun it")
    current = (ws.app_root / file).read_bytes()
    state = file_state(ws, file, inv["files"][file], current)
    if state.original is None:
        raise MepgenError(f"{file} changed since `mepgen extract` and the patches mepgen applied: rerun "
                          f"`mepgen extract` and check the MEP before patching")
    p = companion_plan(k, companion_id(k["id"], file), file, inv["files"][file], state.original, edits)
    return Prepared(k, Path(file), p, state, current)


def companion_id(kernel_id: str, file: str) -> str:
    return f"{kernel_id}@{file.replace('/', '_')}"
