"""Read the symbol table and initialized data of a cubin (an ELF64 file), with no CUDA tool needed.

The pycuda backend learns from the cubin itself what it must know to launch a kernel without the
harness: the mangled name of the entry (functions flagged STO_CUDA_ENTRY), and the bytes nvcc computed
for each scalar argument and struct constant (`__device__` variables the entry file initializes).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

STO_CUDA_ENTRY = 0x10
STT_OBJECT, STT_FUNC = 1, 2
SHT_NOBITS = 8


@dataclass
class Symbol:
    name: str
    value: int
    size: int
    kind: int          # STT_*
    other: int
    shndx: int


class Cubin:
    def __init__(self, data: bytes):
        if data[:4] != b"\x7fELF" or data[4] != 2:
            raise ValueError("not an ELF64 file")
        self.data = data
        (self._shoff,) = struct.unpack_from("<Q", data, 0x28)
        self._shentsize, self._shnum, self._shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        self.sections = [self._section(i) for i in range(self._shnum)]
        names = self.sections[self._shstrndx]
        self.section_names = [self._cstr(names["offset"] + s["name"]) for s in self.sections]
        self.symbols = self._symbols()

    @classmethod
    def load(cls, path: Path) -> "Cubin":
        return cls(Path(path).read_bytes())

    def _section(self, i: int) -> dict:
        off = self._shoff + i * self._shentsize
        name, typ, _flags, _addr, offset, size, link, _info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", self.data, off)
        return {"name": name, "type": typ, "offset": offset, "size": size, "link": link, "entsize": entsize}

    def _cstr(self, off: int) -> str:
        end = self.data.index(b"\0", off)
        return self.data[off:end].decode("utf-8", errors="replace")

    def _symbols(self) -> list[Symbol]:
        out = []
        for i, sec in enumerate(self.sections):
            if self.section_names[i] != ".symtab":
                continue
            strtab = self.sections[sec["link"]]
            for k in range(sec["size"] // 24):
                name, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", self.data, sec["offset"] + 24 * k)
                out.append(Symbol(self._cstr(strtab["offset"] + name), value, size, info & 0xF, other, shndx))
        return out

    def entries(self) -> list[str]:
        """Mangled names of the kernels (entry functions) in the cubin."""
        return [s.name for s in self.symbols if s.kind == STT_FUNC and s.other & STO_CUDA_ENTRY]

    def symbol(self, name: str) -> Symbol | None:
        for s in self.symbols:
            if s.name == name and s.kind == STT_OBJECT:
                return s
        return None

    def initial_bytes(self, name: str) -> bytes:
        """The bytes a `__device__`/`__constant__` variable starts with (zeros when uninitialized)."""
        s = self.symbol(name)
        if s is None:
            raise KeyError(name)
        sec = self.sections[s.shndx]
        if sec["type"] == SHT_NOBITS:
            return bytes(s.size)
        start = sec["offset"] + s.value
        return self.data[start:start + s.size]


def mangle_variable(qualified: str) -> list[str]:
    """Itanium names a namespace-scope variable may carry: `a::b::v` -> `_ZN1a1b1vE` (and `v` for `::v`)."""
    parts = [p for p in qualified.split("::") if p]
    if len(parts) <= 1:
        return [parts[0]] if parts else []
    return ["_ZN" + "".join(f"{len(p)}{p}" for p in parts) + "E"]
