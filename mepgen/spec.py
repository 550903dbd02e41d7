"""The MEP spec (`mep.yaml`): the shared model between `mepgen mep`, `mepgen run` and later stages.

Format version 1 is documented in docs/mep-format.md. A person may edit mep.yaml; :func:`load_spec`
validates it strictly (unknown keys, wrong types and bad expressions are errors naming key and line).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from . import cexpr
from .errors import MepgenError
from .spec_checks import check_semantics, itemsize  # noqa: F401  (itemsize: imported from here by the stages)
from .strict_yaml import Doc, list_of, load_doc, mapping_of, of_type, one_of, optional, record
from .todokind import todo_kind

SPEC_VERSION = 1
# `placement` counts bytes past a boundary of this many bytes (the large-page size of CUDA's allocator): where
# a buffer starts modulo it decides which cache sets its rows fall in, and some kernels' speed with it
PLACEMENT_SPAN = 2 << 20
ROLES = ("in", "out", "inout", "scalar")

#: numpy dtype name -> C type used in the harness
DTYPES = {
    "float32": "float", "float64": "double", "float16": "__half",
    "int8": "signed char", "uint8": "unsigned char", "int16": "short", "uint16": "unsigned short",
    "int32": "int", "uint32": "unsigned int", "int64": "long long", "uint64": "unsigned long long",
    "bool": "bool",
}
INTEGER_DTYPES = tuple(k for k in DTYPES if k.startswith(("int", "uint")))
#: beside a winner's mep.yaml: what optimize proved about its launch (optimize/command.py writes it, patch reads it)
LAUNCH_FACTS = "launch_facts.json"
#: C type spellings -> numpy dtype name
C_TYPES = {
    "float": "float32", "double": "float64", "__half": "float16", "half": "float16",
    "char": "int8", "signed char": "int8", "unsigned char": "uint8", "int8_t": "int8", "uint8_t": "uint8",
    "short": "int16", "unsigned short": "uint16", "int16_t": "int16", "uint16_t": "uint16",
    "int": "int32", "unsigned int": "uint32", "unsigned": "uint32", "int32_t": "int32", "uint32_t": "uint32",
    "long long": "int64", "unsigned long long": "uint64", "int64_t": "int64", "uint64_t": "uint64",
    "long": "int64", "unsigned long": "uint64", "size_t": "uint64", "bool": "bool",
}

#: input generators: kind -> (required keys, optional keys); values may be size expressions
INIT_KINDS = {
    "uniform": ({"low", "high"}, set()),      # floats: U[low, high); integers: [low, high]
    "normal": ({"mean", "std"}, set()),
    "constant": ({"value"}, set()),
    "zeros": (set(), set()),
    "arange": (set(), {"start", "step"}),
    "index": ({"low", "high"}, {"band"}),      # integers in [low, high): indices into another array; with
                                               # band: element k within +-band of its place scaled to the range
    "csr_row_ptr": ({"rows", "nnz"}, set()),   # monotone, starts at 0, ends at nnz; count = rows + 1
    "values": ({"values"}, set()),             # an explicit list
    "file": ({"path"}, set()),                 # a .npy file relative to the MEP folder
    "chain": ({"by"}, set()),                  # computed by the chain's kernel `by` (no file in data/in)
}


@dataclass
class Init:
    kind: str
    args: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"kind": self.kind, **self.args}


@dataclass
class Param:
    name: str
    role: str                      # in | out | inout | scalar
    ctype: str                     # the C type as the kernel declares it
    dtype: str | None = None       # numpy dtype of the elements (pointers) or of the value (numeric scalars)
    count: str | None = None       # element count: an expression over sizes (pointers)
    init: Init | None = None       # how inputs are made (in/inout pointers)
    value: str | None = None       # scalars: a C++ expression over sizes and macros
    note: str | None = None        # how mepgen inferred it, for the reader
    lanes: int | None = None       # a buffer of records (float4, a struct of floats): `dtype` elements per record
    placement: int | None = None   # bytes past a PLACEMENT_SPAN boundary the buffer starts at (as captured)
    relocate: list[dict] | None = None  # device pointers inside its bytes: {at, buffer, offset} (a capture's)

    @property
    def is_buffer(self) -> bool:
        return self.role != "scalar"


@dataclass
class Constant:
    name: str                      # qualified name of the __constant__/__device__ symbol
    ctype: str
    dtype: str | None = None
    count: str | None = None
    init: Init | None = None
    value: str | None = None       # for struct-typed symbols: a C++ initializer expression
    note: str | None = None        # how mepgen inferred it, for the reader
    role: str | None = None        # inout: a `__device__` variable the kernel writes: set from its input before
                                   # every run, read back after it, and checked as an output


@dataclass
class Buffer:
    """A buffer only the chain uses (a feeder's input or output that the target does not take)."""
    name: str
    ctype: str                     # the feeder's parameter type, for the reader
    dtype: str
    count: str
    init: Init | None = None       # how its input is made; None: a feeder writes it before anything reads it
    note: str | None = None
    relocate: list[dict] | None = None  # device pointers inside its bytes: {at, buffer, offset} (a capture's)
    role: str | None = None        # inout: the kernel writes it (reached through captured pointers): reset
                                   # before every run, and checked as an output like an inout parameter


@dataclass
class ChainArg:
    """One parameter of a feeder: a buffer (a target parameter or a chain buffer) or a scalar value."""
    name: str                      # the feeder's parameter name
    role: str                      # in | out | inout | scalar, as inferred for the feeder
    ctype: str
    dtype: str | None = None
    buffer: str | None = None      # buffers: the target parameter or chain buffer passed
    value: str | None = None       # scalars: a C++ expression over sizes


@dataclass
class ChainStep:
    """A launch run before the target (in the chain's order) whose output feeds the target's inputs."""
    kernel: str                    # qualified name
    callee: str                    # instantiation as at the site: `cg::axpy<float>`
    grid: list[str]
    block: list[str]
    shared_mem: str = "0"
    args: list[ChainArg] = field(default_factory=list)
    site: str | None = None        # file:line in the application, for the reader


@dataclass
class Launch:
    grid: list[str]
    block: list[str]
    shared_mem: str = "0"
    callee: str = ""               # what the harness calls: `cg::axpy<float>`
    # the configurations the application launched the kernel with (a capture's run, CUPTI): [{grid, block,
    # shared_mem, launches, total_ms}]; written where there were several, the MEP measuring one of them
    observed: list[dict] = field(default_factory=list)
    # what a loop around the launch site changes each round ({"block": ["threads"]}: a static MEP reproduces the
    # first round; extract's `varies` of the site)
    varies: dict[str, list[str]] = field(default_factory=dict)

    def observed_blocks(self) -> list[tuple[int, int, int]]:
        """The distinct blocks the application launched the kernel with (none known: [])."""
        return sorted({tuple(o["block"]) for o in self.observed})

    def observed_grids(self) -> list[tuple[int, int, int]]:
        return sorted({tuple(o["grid"]) for o in self.observed})


@dataclass
class Build:
    arch: str = "native"
    std: str = "c++17"
    defines: list[str] = field(default_factory=list)
    nvcc_flags: list[str] = field(default_factory=list)


@dataclass
class Tolerance:
    rtol: float
    atol: float


@dataclass
class Verify:
    input_sets: int = 3
    seed: int = 1
    tolerance: dict[str, Tolerance] = field(default_factory=dict)


@dataclass
class Timing:
    warmup: int = 5
    reps: int = 50
    flush_l2: bool = True


@dataclass
class Work:
    bytes: str | None = None       # bytes a launch must move at least (expression over sizes)
    flops: str | None = None       # floating-point operations per launch


@dataclass
class KernelRef:
    name: str                      # qualified name
    id: str
    source: str                    # file in the application, relative to its root
    source_sha256: str
    start_byte: int
    end_byte: int
    template_args: list[str] = field(default_factory=list)


@dataclass
class Todo:
    field: str
    reason: str
    kind: str | None = None        # what it takes to complete (mepgen/todokind.py); None in older records

    def __post_init__(self):
        if self.kind is None:
            self.kind = todo_kind(self.field, self.reason)


@dataclass
class Spec:
    kernel: KernelRef
    sizes: dict[str, int]
    params: list[Param]
    launch: Launch
    constants: list[Constant] = field(default_factory=list)
    build: Build = field(default_factory=Build)
    verify: Verify = field(default_factory=Verify)
    timing: Timing = field(default_factory=Timing)
    work: Work = field(default_factory=Work)
    todo: list[Todo] = field(default_factory=list)
    chain: list[ChainStep] = field(default_factory=list)
    buffers: list[Buffer] = field(default_factory=list)
    version: int = SPEC_VERSION

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def outputs(self) -> list[Param | Buffer]:
        """What the evaluator checks: out/inout parameters, buffers the kernel writes through captured pointers
        (`buffers` with role inout), and `__device__` variables it writes (`constants` with role inout)."""
        return [p for p in self.params if p.role in ("out", "inout")] + \
            [b for b in self.buffers if b.role == "inout"] + [c for c in self.constants if c.role == "inout"]

    @property
    def inputs(self) -> list[Param]:
        """Inputs read from `data/in` (parameters the chain computes are not)."""
        return [p for p in self.params if p.role in ("in", "inout") and not is_fed(p)]

    @property
    def fed(self) -> list[Param]:
        """Inputs the chain computes (`init: {kind: chain}`)."""
        return [p for p in self.params if is_fed(p)]

    @property
    def chain_inputs(self) -> list[Buffer]:
        """Chain buffers with an input file in `data/in`."""
        return [b for b in self.buffers if b.init is not None]

    def size(self, expr: str | int | None) -> int | None:
        """Value of an expression over the size symbols."""
        return cexpr.evaluate(expr, self.sizes)

    def count(self, p: Param | Constant) -> int:
        n = self.size(p.count)
        if n is None or n < 0:
            raise MepgenError(f"cannot evaluate the element count '{p.count}' of {p.name} from sizes "
                              f"{self.sizes}")
        return n

    def to_dict(self) -> dict:
        def clean(obj):
            if isinstance(obj, dict):
                return {k: clean(v) for k, v in obj.items() if v is not None and v != [] and v != {}}
            if isinstance(obj, list):
                return [clean(x) for x in obj]
            return obj
        d = asdict(self)
        for step in d.get("chain", []):
            step["launch"] = {"grid": step.pop("grid"), "block": step.pop("block"),
                              "shared_mem": step.pop("shared_mem")}
            step["args"] = step.pop("args")
        for group in ("params", "constants", "buffers"):
            for item, obj in zip(d[group], getattr(self, group)):
                if obj.init is not None:
                    item["init"] = obj.init.to_dict()
        out = clean(d)
        if "sizes" not in out:          # none (a captured MEP's literals): the key stays, mep.yaml requires it
            items = list(out.items())
            at = next(i for i, (k, _) in enumerate(items) if k == "kernel") + 1
            out = dict(items[:at] + [("sizes", {})] + items[at:])
        return out


def integer_scalar(p: Param) -> bool:
    """A scalar parameter of an integer type (a size a launch's grid can follow)."""
    return p.role == "scalar" and str(p.dtype) in INTEGER_DTYPES


def is_fed(p: Param) -> bool:
    return p.init is not None and p.init.kind == "chain"


# --- loading and validation ---------------------------------------------------------------------------

_scalar = of_type(str, int, float)
_expr = of_type(str, int)


def _init(doc: Doc, kp: tuple, v) -> Init:
    of_type(dict)(doc, kp, v)
    kind = v.get("kind")
    if kind not in INIT_KINDS:
        raise doc.error(kp + ("kind",), f"{kind!r} is not one of {', '.join(INIT_KINDS)}")
    required, opt = INIT_KINDS[kind]
    for k in v:
        if k != "kind" and k not in required | opt:
            raise doc.error(kp + (k,), f"unknown key '{k}' for init kind '{kind}' "
                                       f"(known: {', '.join(sorted(required | opt)) or 'none'})")
    for k in required - set(v):
        raise doc.error(kp, f"init kind '{kind}' needs '{k}'")
    if kind == "values":
        list_of(of_type(int, float))(doc, kp + ("values",), v["values"])
    if kind == "file":
        of_type(str)(doc, kp + ("path",), v["path"])
    return Init(kind, {k: x for k, x in v.items() if k != "kind"})


def _dtype(doc: Doc, kp: tuple, v):
    return one_of(*DTYPES)(doc, kp, v)


def _lanes(doc: Doc, kp: tuple, v):
    of_type(int)(doc, kp, v)
    if isinstance(v, bool) or v < 1:
        raise doc.error(kp, f"lanes must be a positive integer, not {v!r}")
    return v


def _placement(doc: Doc, kp: tuple, v):
    of_type(int)(doc, kp, v)
    if isinstance(v, bool) or not 0 <= v < PLACEMENT_SPAN:
        raise doc.error(kp, f"placement must be a byte offset in [0, {PLACEMENT_SPAN}), not {v!r}")
    return v


# a device pointer inside a struct argument's bytes or a buffer's contents (recorded by `mepgen capture`): the
# harness writes there the address of its own buffer `buffer` plus `offset` bytes, at byte `at`
_RELOCATE = list_of(record({"at": (of_type(int), True), "buffer": (of_type(str), True),
                            "offset": (of_type(int), True)}))
_PARAM = record({
    "name": (of_type(str), True), "role": (one_of(*ROLES), True), "ctype": (of_type(str), True),
    "dtype": (optional(_dtype), False), "count": (optional(_expr), False), "init": (optional(_init), False),
    "value": (optional(_scalar), False), "note": (optional(of_type(str)), False),
    "lanes": (optional(_lanes), False), "placement": (optional(_placement), False),
    "relocate": (_RELOCATE, False),
})
_CONSTANT = record({
    "name": (of_type(str), True), "ctype": (of_type(str), True), "dtype": (optional(_dtype), False),
    "count": (optional(_expr), False), "init": (optional(_init), False), "value": (optional(_scalar), False),
    "note": (optional(of_type(str)), False), "role": (optional(one_of("inout")), False),
})
_BUFFER = record({
    "name": (of_type(str), True), "ctype": (of_type(str), True), "dtype": (_dtype, True),
    "count": (_expr, True), "init": (optional(_init), False), "note": (optional(of_type(str)), False),
    "relocate": (_RELOCATE, False), "role": (optional(one_of("inout")), False),
})
_CHAIN_ARG = record({
    "name": (of_type(str), True), "role": (one_of(*ROLES), True), "ctype": (of_type(str), True),
    "dtype": (optional(_dtype), False), "buffer": (optional(of_type(str)), False),
    "value": (optional(_scalar), False),
})
_OBSERVED = record({
    "grid": (list_of(of_type(int)), True), "block": (list_of(of_type(int)), True),
    "shared_mem": (of_type(int), False), "launches": (of_type(int), False), "total_ms": (of_type(float, int), False),
})
_dims = lambda d, kp, v: [str(x) for x in list_of(_expr)(d, kp, v if isinstance(v, list) else [v])]
_SCHEMA = record({
    "version": (one_of(SPEC_VERSION), True),
    "kernel": (record({
        "name": (of_type(str), True), "id": (of_type(str), True), "source": (of_type(str), True),
        "source_sha256": (of_type(str), True), "start_byte": (of_type(int), True), "end_byte": (of_type(int), True),
        "template_args": (list_of(of_type(str, int)), False)}), True),
    "sizes": (mapping_of(of_type(int)), True),
    "params": (list_of(_PARAM), True),
    "constants": (list_of(_CONSTANT), False),
    "launch": (record({"grid": (_dims, True), "block": (_dims, True), "shared_mem": (_expr, False),
                       "callee": (of_type(str), False), "observed": (list_of(_OBSERVED), False),
                       "varies": (mapping_of(list_of(of_type(str))), False)}), True),
    "build": (record({"arch": (of_type(str), False), "std": (of_type(str), False),
                      "defines": (list_of(of_type(str)), False),
                      "nvcc_flags": (list_of(of_type(str)), False)}), False),
    "verify": (record({"input_sets": (of_type(int), False), "seed": (of_type(int), False),
                       "tolerance": (mapping_of(record({"rtol": (of_type(float), True),
                                                        "atol": (of_type(float), True)})), False)}), False),
    "timing": (record({"warmup": (of_type(int), False), "reps": (of_type(int), False),
                       "flush_l2": (of_type(bool), False)}), False),
    "work": (record({"bytes": (optional(_expr), False), "flops": (optional(_expr), False)}), False),
    "todo": (list_of(record({"field": (of_type(str), True), "reason": (of_type(str), True),
                             "kind": (of_type(str), False)})), False),
    "chain": (list_of(record({
        "kernel": (of_type(str), True), "callee": (of_type(str), True), "site": (optional(of_type(str)), False),
        "launch": (record({"grid": (_dims, True), "block": (_dims, True), "shared_mem": (_expr, False)}), True),
        "args": (list_of(_CHAIN_ARG), True)})), False),
    "buffers": (list_of(_BUFFER), False),
})


def spec_from_dict(d: dict) -> Spec:
    def init(x):
        return _init_from(x.get("init"))
    params = [Param(**{**p, "init": init(p), "count": None if p.get("count") is None else str(p["count"]),
                       "value": None if p.get("value") is None else str(p["value"])}) for p in d["params"]]
    consts = [Constant(**{**c, "init": init(c), "count": None if c.get("count") is None else str(c["count"]),
                          "value": None if c.get("value") is None else str(c["value"])})
              for c in d.get("constants", [])]
    launch = d["launch"]
    return Spec(
        version=d["version"],
        kernel=KernelRef(**d["kernel"]),
        sizes=dict(d["sizes"]),
        params=params,
        constants=consts,
        launch=Launch(grid=[str(x) for x in launch["grid"]], block=[str(x) for x in launch["block"]],
                      shared_mem=str(launch.get("shared_mem", "0")), callee=launch.get("callee", ""),
                      observed=[dict(o) for o in launch.get("observed") or []],
                      varies={k: list(v) for k, v in (launch.get("varies") or {}).items()}),
        build=Build(**d.get("build", {})),
        verify=Verify(**{**d.get("verify", {}), "tolerance": {k: Tolerance(**v) for k, v in
                                                               d.get("verify", {}).get("tolerance", {}).items()}}),
        timing=Timing(**d.get("timing", {})),
        work=Work(**{k: None if v is None else str(v) for k, v in d.get("work", {}).items()}),
        todo=[Todo(**t) for t in d.get("todo", [])],
        chain=[ChainStep(kernel=c["kernel"], callee=c["callee"], site=c.get("site"),
                         grid=[str(x) for x in c["launch"]["grid"]], block=[str(x) for x in c["launch"]["block"]],
                         shared_mem=str(c["launch"].get("shared_mem", "0")),
                         args=[ChainArg(**{**a, "value": None if a.get("value") is None else str(a["value"])})
                               for a in c["args"]]) for c in d.get("chain", [])],
        buffers=[Buffer(**{**b, "count": str(b["count"]), "init": _init_from(b.get("init"))})
                 for b in d.get("buffers", [])],
    )


def _init_from(x) -> Init | None:
    if x is None:
        return None
    if isinstance(x, Init):
        return x
    return Init(x["kind"], {k: v for k, v in x.items() if k != "kind"})


def load_spec(path: Path | str, text: str | None = None) -> Spec:
    """Read and validate mep.yaml."""
    doc = load_doc(path, text)
    d = _SCHEMA(doc, (), doc.data)
    check_semantics(doc, d)
    return spec_from_dict(d)


def validate_dict(d: dict, path: str = "mep.yaml") -> Spec:
    """Validate a spec built in memory (e.g. proposed by an LLM) exactly like a file a person wrote."""
    return load_spec(path, yaml.safe_dump(d, sort_keys=False))
