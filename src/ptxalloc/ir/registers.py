"""Virtual registers: their declared PTX types and register classes (SPEC section 2, seed 002
"Register Class Definitions").

A function's virtual registers have dense integer ids (0, 1, 2, ...) in the order they are first
referenced. Each id carries its name, its declared type (``.b32``, ``.f16``, ``.pred``, ...), its
vector arity for vector-typed registers (``.reg .v2 .u32 x;``) and its class:

    H16    one 16-bit half of a 32-bit register   (.b8 .u8 .s8 .b16 .u16 .s16 .f16 .bf16)
    GPR32  one 32-bit register                    (.b32 .u32 .s32 .f32 .f16x2 .bf16x2)
    GPR64  an even-aligned pair Ri:Ri+1           (.b64 .u64 .s64 .f64)
    B128   a 4-aligned quad                       (.b128)
    PRED   one predicate, separate file P0-P6     (.pred)

8-bit registers live in the H16 class: PTX only uses them with ld/st/cvt, and ptxas keeps them
in 16-bit halves.
"""

from __future__ import annotations

from enum import IntEnum


class RegClass(IntEnum):
    """The register classes (the table above)."""

    PRED = 0
    H16 = 1
    GPR32 = 2
    GPR64 = 3
    B128 = 4


#: Size of one register of each class in bits (PRED counts as 1).
CLASS_BITS = {RegClass.PRED: 1, RegClass.H16: 16, RegClass.GPR32: 32, RegClass.GPR64: 64,
              RegClass.B128: 128}

_TYPE_CLASS = {
    "pred": RegClass.PRED,
    "b8": RegClass.H16, "u8": RegClass.H16, "s8": RegClass.H16,
    "b16": RegClass.H16, "u16": RegClass.H16, "s16": RegClass.H16,
    "f16": RegClass.H16, "bf16": RegClass.H16,
    "b32": RegClass.GPR32, "u32": RegClass.GPR32, "s32": RegClass.GPR32, "f32": RegClass.GPR32,
    "f16x2": RegClass.GPR32, "bf16x2": RegClass.GPR32, "tf32": RegClass.GPR32,
    "b64": RegClass.GPR64, "u64": RegClass.GPR64, "s64": RegClass.GPR64, "f64": RegClass.GPR64,
    "b128": RegClass.B128,
}


def class_of_type(ptype: str) -> RegClass | None:
    """Register class of a declared PTX type, written with or without its dot; None if the type
    is not a register type."""
    return _TYPE_CLASS.get(ptype.lstrip("."))


class RegTable:
    """The virtual registers of one function, as parallel lists indexed by dense id.

    ``vec`` is the vector arity of a vector-typed register (2, 4 or 8) and 0 for a scalar.
    ``line`` is the source line of the declaration (0 for registers created by ptxalloc).
    """

    __slots__ = ("names", "types", "classes", "vec", "lines", "_by_name")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.types: list[str] = []
        self.classes: list[RegClass] = []
        self.vec: list[int] = []
        self.lines: list[int] = []
        self._by_name: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.names)

    def add(self, name: str, ptype: str, rclass: RegClass, vec: int = 0, line: int = 0) -> int:
        """Append a register; returns its id."""
        vid = len(self.names)
        self.names.append(name)
        self.types.append(ptype)
        self.classes.append(rclass)
        self.vec.append(vec)
        self.lines.append(line)
        self._by_name = None
        return vid

    def like(self, vid: int, name: str) -> int:
        """A new register of the same type, class and arity as ``vid`` (for spill temporaries
        and copies)."""
        return self.add(name, self.types[vid], self.classes[vid], self.vec[vid], 0)

    def lookup(self, name: str) -> int | None:
        """Id of the register called ``name``; with scoped declarations the first one wins."""
        if self._by_name is None:
            by_name: dict[str, int] = {}
            for vid, n in enumerate(self.names):
                by_name.setdefault(n, vid)
            self._by_name = by_name
        return self._by_name.get(name)

    def copy(self) -> "RegTable":
        """An independent copy."""
        new = RegTable()
        new.names = list(self.names)
        new.types = list(self.types)
        new.classes = list(self.classes)
        new.vec = list(self.vec)
        new.lines = list(self.lines)
        return new

    def count_by_class(self) -> dict[str, int]:
        """How many registers each class has, by class name."""
        out: dict[str, int] = {}
        for c in self.classes:
            out[c.name] = out.get(c.name, 0) + 1
        return out
