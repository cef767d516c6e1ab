"""Where values can live in an allocated function, decoded by the checker itself (SPEC sections
2 and 9, issue 5; the naming is docs/allocated-ptx.md's "Physical register names").

The checker shares no code with the allocators: it reads physical register names with its own
decoder and models aliasing with its own unit arithmetic. A *location* is

* a GPR placement: a run of 16-bit units (unit 2n and 2n+1 are the halves of Rn) —
  ``%R<n>`` (2 units at 2n), ``%RD<n>`` (4 units at 2n, n even), ``%RQ<n>`` (8 units at 2n, n a
  multiple of 4), ``%H<u>`` (the unit u), ``%V<a>x<b>_<u>`` (a vector register of a members of b
  bits starting at unit u, aligned to its size rounded up to a power of two);
* a predicate ``%P<n>``, 0 <= n <= 6 (a file of its own);
* a uniform register (files of their own, sm_75 and later): ``%UR<n>`` (0 <= n <= 62),
  ``%URD<n>`` (the pair URn:URn+1, n even), ``%UP<n>`` (0 <= n <= 6) — whether the value in
  one is uniform is :mod:`.uniform`'s check;
* a spill slot: a byte range ``[off, off + size)`` of the function's ``.local`` spill array;
* a pinned register: an old-ABI ``.reg`` parameter, which keeps its own name;
* an operand snapshot, named by no instruction: the value a register operand of a predicate's
  removed ``setp`` held there (:mod:`.matching`, a predicate recomputed from registers).

Two locations *overlap* when they share a unit (or a byte, for slots): writing one destroys
whatever the other held. Units, not names, decide: writing ``%R4`` destroys what ``%RD4`` (R4:R5)
or ``%H9`` (the high half of R4) held.
"""

from __future__ import annotations

import re
from functools import cached_property

GPR, PRED, SLOT, PIN, UGPR, UPRED, SNAPSHOT = 0, 1, 2, 3, 4, 5, 6
SPACE_NAMES = {GPR: "GPR", PRED: "predicate", SLOT: "spill slot", PIN: "pinned register",
               UGPR: "uniform register", UPRED: "uniform predicate",
               SNAPSHOT: "operand snapshot"}

#: Uniform registers the model has: UR0-UR62 and UP0-UP6 (URZ and UPT are architectural).
UNIFORM_REGS = 63
UNIFORM_PRED_REGS = 7

#: Predicate registers the model has (PT is architectural and never allocated).
PRED_REGS = 7

#: Each family's PTX declaration type and its register class in the original function.
FAMILY_TYPE = {"R": ".b32", "RD": ".b64", "RQ": ".b128", "H": ".b16", "P": ".pred",
               "UR": ".b32", "URD": ".b64", "UP": ".pred"}
CLASS_FAMILY = {"H16": "H", "GPR32": "R", "GPR64": "RD", "B128": "RQ", "PRED": "P"}
#: The uniform family a class may live in instead.
CLASS_UNIFORM_FAMILY = {"GPR32": "UR", "GPR64": "URD", "PRED": "UP"}
CLASS_BITS = {"H16": 16, "GPR32": 32, "GPR64": 64, "B128": 128, "PRED": 1}


def pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p <<= 1
    return p


class Placement:
    """A decoded physical register name."""

    __slots__ = ("family", "index", "space", "start", "size", "vec", "bits")

    def __init__(self, family: str, index: int, space: int, start: int, size: int,
                 vec: int = 0, bits: int = 0):
        self.family = family      # R RD RQ H P V, or "" for a pinned register
        self.index = index        # the number in the name (the unit for H and V)
        self.space = space
        self.start = start        # first unit (GPR), predicate number (PRED)
        self.size = size          # units (GPR), 1 (PRED)
        self.vec = vec            # V: members
        self.bits = bits          # V: member bits


class NameDecoder:
    """Physical register names of one allocated function (its header's stem and budget K)."""

    def __init__(self, stem: str, budget: int):
        self.stem = stem
        self.k = budget
        self._scalar = re.compile(r"%" + re.escape(stem) + r"(RD|RQ|R|H|P)(0|[1-9]\d*)$")

    # the uniform and vector names' patterns are compiled on first use: most functions have
    # neither, and compiling them cost every checker's start-up 0.25 ms (issue 16)
    @cached_property
    def _uniform(self) -> re.Pattern:
        return re.compile(r"%" + re.escape(self.stem) + r"(URD|UR|UP)(0|[1-9]\d*)$")

    @cached_property
    def _vector(self) -> re.Pattern:
        return re.compile(r"%" + re.escape(self.stem) + r"V([248])x(8|16|32|64|128)_(0|[1-9]\d*)$")

    def decode(self, name: str) -> Placement | str | None:
        """The placement a name denotes; a string saying why a physical-looking name is not a
        legal placement; None when the name is not a physical register name at all."""
        m = self._scalar.match(name)
        k = self.k
        if m is not None:
            fam, n = m.group(1), int(m.group(2))
            if fam == "P":
                if n >= PRED_REGS:
                    return f"{name} is not a predicate register (only P0-P{PRED_REGS - 1} exist)"
                return Placement("P", n, PRED, n, 1)
            if fam == "H":
                if n >= 2 * k:
                    return (f"{name} (half of R{n // 2}) is outside the budget of {k} registers "
                            f"(R0-R{k - 1})")
                return Placement("H", n, GPR, n, 1)
            width = {"R": 1, "RD": 2, "RQ": 4}[fam]
            if n % width:
                what = "an even-aligned pair" if width == 2 else "a 4-aligned quad"
                return f"{name} is not {what} (R{n}:R{n + width - 1})"
            if n + width > k:
                regs = f"R{n}" if width == 1 else f"R{n}:R{n + width - 1}"
                return f"{name} ({regs}) is outside the budget of {k} registers (R0-R{k - 1})"
            return Placement(fam, n, GPR, 2 * n, 2 * width)
        m = self._uniform.match(name)
        if m is not None:
            fam, n = m.group(1), int(m.group(2))
            if fam == "UP":
                if n >= UNIFORM_PRED_REGS:
                    return (f"{name} is not a uniform predicate (only UP0-"
                            f"UP{UNIFORM_PRED_REGS - 1} exist)")
                return Placement("UP", n, UPRED, n, 1)
            width = 2 if fam == "URD" else 1
            if n % width:
                return f"{name} is not an even-aligned pair (UR{n}:UR{n + 1})"
            if n + width > UNIFORM_REGS:
                return (f"{name} is outside the uniform file (only UR0-UR{UNIFORM_REGS - 1} "
                        f"exist)")
            return Placement(fam, n, UGPR, 2 * n, 2 * width)
        m = self._vector.match(name)
        if m is not None:
            vec, bits, u = int(m.group(1)), int(m.group(2)), int(m.group(3))
            units = max(1, bits // 16) * vec
            align = pow2_at_least(units)         # aligned to its size (a .v2 .f64: a quad)
            if u % align:
                return f"{name} does not start on a multiple of {align} units"
            if u + units > 2 * k:
                return f"{name} (units {u}-{u + units - 1}) is outside the budget of {k} registers"
            return Placement("V", u, GPR, u, units, vec, bits)
        if name.startswith("%" + self.stem) and re.match(
                r"%" + re.escape(self.stem) + r"U?(?:RD|RQ|R|H|P|V)\d", name):
            return f"{name} is not a well-formed physical register name"
        return None


class Locations:
    """The locations one allocated function touches, as dense ids, with their overlaps.

    ``overlaps[i]`` lists every location sharing a unit with location i, i itself first. Ids are
    created on demand; overlap lists are kept up to date as locations are added.
    """

    def __init__(self, spill_array: str | None):
        self.spill_array = spill_array
        self.keys: list[tuple] = []
        self.display: list[str] = []
        self.overlaps: list[list[int]] = []
        self._ids: dict[tuple, int] = {}
        self._buckets: dict[tuple[int, int], list[int]] = {}

    def _add(self, key: tuple, display: str, space: int, start: int, size: int) -> int:
        i = len(self.keys)
        self._ids[key] = i
        self.keys.append(key)
        self.display.append(display)
        ov = [i]
        seen = {i}
        for u in range(start, start + size):
            bucket = self._buckets.setdefault((space, u), [])
            for j in bucket:
                if j not in seen:
                    seen.add(j)
                    ov.append(j)
                    self.overlaps[j].append(i)
            bucket.append(i)
        self.overlaps.append(ov)
        return i

    def register(self, p: Placement, name: str) -> int:
        if p.space in (PRED, UPRED):
            key = (p.space, p.start, 1)
            got = self._ids.get(key)
            return got if got is not None else self._add(key, name, p.space, p.start, 1)
        if p.space == UGPR:
            key = (UGPR, p.start, p.size, p.family)
            got = self._ids.get(key)
            return got if got is not None else self._add(key, name, UGPR, p.start, p.size)
        # the family is part of the key: %R2 and %V2x16_4 cover the same units but are
        # different PTX registers (they overlap, so writing one destroys the other)
        key = (GPR, p.start, p.size, p.family)
        got = self._ids.get(key)
        return got if got is not None else self._add(key, name, GPR, p.start, p.size)

    def pinned(self, name: str) -> int:
        key = (PIN, name)
        got = self._ids.get(key)
        return got if got is not None else self._add(key, name, PIN, 0, 0)

    def slot(self, offset: int, size: int) -> int:
        key = (SLOT, offset, size)
        got = self._ids.get(key)
        if got is not None:
            return got
        return self._add(key, f"[{self.spill_array}+{offset}] ({size} bytes)", SLOT, offset,
                         size)

    def snapshot(self, value: int, operand: int, name: str) -> int:
        """A location no instruction names: what operand ``operand`` (an index) of the removed
        definition of ``value`` read there, for as long as that register is not redefined
        (a predicate recomputed from registers, :mod:`.matching`). It overlaps nothing."""
        key = (SNAPSHOT, value, operand)
        got = self._ids.get(key)
        return got if got is not None else self._add(key, name, SNAPSHOT, 0, 0)

    def space(self, loc: int) -> int:
        return self.keys[loc][0]

    def __len__(self) -> int:
        return len(self.keys)
