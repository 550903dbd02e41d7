"""Where the evaluator keeps its files in an MEP folder, and the cached input sets and reference outputs.

    <mep>/eval/inputs/<key>/set<k>/   input set k (seed = verify.seed + k), made once by datagen
    <mep>/eval/ref/<key>/set<k>/      the original kernel's outputs on that set, computed once
    <mep>/eval/build/<key>/           one build per distinct kernel file and flags
    <mep>/eval/work/                  candidates' outputs (scratch: overwritten run after run)
    <mep>/eval/results/<key>.json     the result cache, by content hash

Reference outputs live apart from the inputs: the candidate's process is given only the input folder,
and its outputs are compared with the references in Python after it exits.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import datagen
from ..contenthash import digest  # noqa: F401  (the evaluator's and optimizer's cache keys)
from ..spec import Spec
from ..workspace import write_json

EVAL_DIR = "eval"


class Store:
    def __init__(self, mep_dir: Path, spec: Spec):
        self.mep_dir = Path(mep_dir).resolve()
        self.spec = spec
        self.root = self.mep_dir / EVAL_DIR

    @property
    def build_dir(self) -> Path:
        return self.root / "build"

    @property
    def work_dir(self) -> Path:
        return self.root / "work"

    @property
    def results_dir(self) -> Path:
        return self.root / "results"

    def _file_inputs(self) -> list[bytes]:
        """Contents of `init: {kind: file}` sources: they are part of what an input set is."""
        out = []
        for item in [*self.spec.inputs, *self.spec.chain_inputs, *self.spec.constants]:
            if item.init is not None and item.init.kind == "file":
                f = self.mep_dir / str(item.init.args["path"])
                out.append(f.read_bytes() if f.is_file() else b"missing")
        return out

    def inputs_key(self) -> str:
        return digest("inputs-v1", self.spec.to_dict(), *self._file_inputs())

    def has_input_set(self, k: int) -> bool:
        return (self.root / "inputs" / self.inputs_key() / f"set{k}" / ".complete").is_file()

    def set_bytes(self) -> int:
        """Bytes of one input set and the outputs it gives (what each run moves and each check reads)."""
        items = {p.name: p for p in [*self.spec.inputs, *self.spec.chain_inputs, *self.spec.outputs] if p.dtype}
        return sum(self.spec.count(p) * np.dtype(p.dtype).itemsize for p in items.values())

    def input_set(self, k: int) -> Path:
        """The folder of input set k, generated on first use."""
        folder = self.root / "inputs" / self.inputs_key() / f"set{k}"
        done = folder / ".complete"
        if not done.is_file():
            datagen.make_inputs(self.spec, self.mep_dir, self.spec.verify.seed + k, folder)
            done.write_text("")
        return folder

    def load_inputs(self, k: int) -> dict[str, np.ndarray]:
        folder = self.input_set(k)
        return {p.name: np.load(folder / f"{p.name}.npy", allow_pickle=False) for p in self.spec.inputs}

    def ref_dir(self, original_key: str, k: int) -> Path:
        """References of input set k for the original kernel with build key `original_key`."""
        return self.root / "ref" / digest("ref-v1", original_key, self.inputs_key()) / f"set{k}"

    def load_ref(self, original_key: str, k: int) -> dict[str, np.ndarray] | None:
        folder = self.ref_dir(original_key, k)
        if not (folder / "meta.json").is_file():
            return None
        return {p.name: np.load(folder / f"{p.name}.npy", allow_pickle=False) for p in self.spec.outputs}

    def save_ref(self, original_key: str, k: int, outputs: dict[str, np.ndarray], meta: dict) -> None:
        folder = self.ref_dir(original_key, k)
        folder.mkdir(parents=True, exist_ok=True)
        for name, arr in outputs.items():
            np.save(folder / f"{name}.npy", arr, allow_pickle=False)
        write_json(folder / "meta.json", meta)   # written last: its presence means the set is complete
