"""The register-unit model of the register file (SPEC section 2; seed 000 "Constraint Systems",
seed 002 "Register Class Constraints").

The general register file is counted in 16-bit *units*: unit 2i and 2i+1 are the halves of the
32-bit register Ri. A *shape* says how many consecutive units a value occupies and how they are
aligned; a *placement* is one concrete set of units, written as a bitmask. Two values conflict
when they are live at the same time and their placements share a unit. That one rule covers
every aliasing case of the seeds: 32/64-bit aliasing (RD2 = R4:R5 overlaps R4), H16 packing (two
halves in one register), 128-bit quads and tensor fragments (register tuples).

Predicates are a separate file of seven units, P0-P6 (PT is architectural).

For a budget K the allocatable GPR units are 0 .. 2K-1 (R0 .. R(K-1)); with K = 15 the GPR64
placements are exactly the 7 pairs R0:R1 ... R12:R13.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from ..ir.registers import RegClass

GPR, PRED = 0, 1
PRED_REGS = 7


class Shape(NamedTuple):
    """Consecutive units a value occupies in one file, and their alignment. A named tuple:
    hashed and compared in C, for it is a dictionary key in the allocators' hot loops."""

    file: int        # GPR or PRED
    units: int       # consecutive units occupied
    align: int       # start unit must be a multiple of this

    def mask(self, start: int) -> int:
        """The units this shape occupies when it starts at unit ``start``, as a bitmask."""
        return ((1 << self.units) - 1) << start

    @property
    def regs(self) -> float:
        """Size in 32-bit registers (16-bit values count half); predicates count one each."""
        return self.units / 2 if self.file == GPR else float(self.units)

    def __str__(self) -> str:
        if self.file == PRED:
            return "PRED"
        return {(1, 1): "H16", (2, 2): "GPR32", (4, 4): "GPR64", (8, 8): "B128"}.get(
            (self.units, self.align), f"TUPLE{self.units // 2}x{self.align // 2}")


H16 = Shape(GPR, 1, 1)
GPR32 = Shape(GPR, 2, 2)
GPR64 = Shape(GPR, 4, 4)
B128 = Shape(GPR, 8, 8)
PRED1 = Shape(PRED, 1, 1)

CLASS_SHAPE = {RegClass.H16: H16, RegClass.GPR32: GPR32, RegClass.GPR64: GPR64,
               RegClass.B128: B128, RegClass.PRED: PRED1}


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p <<= 1
    return p


def tuple_shape(units: int, align_regs: int) -> Shape:
    """A register tuple of ``units`` consecutive units whose start is aligned to
    ``align_regs`` 32-bit registers, or to the tuple's own size rounded up to a power of two
    where that is smaller (a .v2 of 16-bit members needs one register, not two)."""
    return Shape(GPR, units, max(1, min(2 * align_regs, _pow2_at_least(units))))


def vreg_shape(rclass: RegClass, vec: int) -> Shape:
    """Shape of one virtual register: its class, or for a vector-typed register (``.reg .v4
    .u32 x``) a tuple of its members aligned to its size rounded up to a power of two, as the
    ISA table aligns a vector operand (a ``.v2 .f64`` is a 4-aligned quad)."""
    base = CLASS_SHAPE[rclass]
    if vec <= 1 or rclass == RegClass.PRED:
        return base
    units = base.units * vec
    return tuple_shape(units, _pow2_at_least(units) // 2)


class RegFile:
    """The allocatable units for a budget of K 32-bit registers (1 <= K <= 255)."""

    def __init__(self, k: int, pred_regs: int = PRED_REGS, reserved: int = 0):
        self.k = k
        self.pred_regs = pred_regs
        self.reserved = reserved            # GPR units never allocated (R31, ...)
        self._placements: dict[Shape, list[tuple[int, int]]] = {}
        self._fits: dict[tuple[Shape, ...], bool] = {}
        self._starts: dict[Shape, int] = {}

    def size(self, shape: Shape) -> int:
        return 2 * self.k if shape.file == GPR else self.pred_regs

    def placements(self, shape: Shape) -> list[tuple[int, int]]:
        """Every placement of ``shape`` as (start unit, unit mask), lowest first."""
        got = self._placements.get(shape)
        if got is None:
            reserved = self.reserved if shape.file == GPR else 0
            first = shape.mask(0)       # shape.mask(s) is first << s, inlined (issue 16)
            got = [(s, first << s) for s in range(0, self.size(shape) - shape.units + 1,
                                                  shape.align)
                   if not (first << s) & reserved]
            self._placements[shape] = got
        return got

    def count(self, shape: Shape) -> int:
        return len(self.placements(shape))

    def free_starts(self, shape: Shape, forbidden: int) -> int:
        """The bitset of the start units of the placements of ``shape`` that take none of the
        ``forbidden`` units: :meth:`placements` filtered in a few int operations instead of a
        walk (Briggs's select on a Triton kernel at K = 255 walked up to 255 per value)."""
        starts = self._starts.get(shape)
        if starts is None:
            starts = 0
            for s, _ in self.placements(shape):
                starts |= 1 << s
            self._starts[shape] = starts
        return starts & ~blocked_starts(forbidden, shape.units)

    def fits(self, shapes: list[Shape]) -> bool:
        """Whether ``shapes`` fit side by side in the file (first fit, largest first); the
        answer is remembered per list of shapes (most instructions ask one of a few)."""
        key = tuple(shapes)
        got = self._fits.get(key)
        if got is None:
            got = self._fits[key] = self._first_fit(shapes)
        return got

    def _first_fit(self, shapes: list[Shape]) -> bool:
        used = 0
        for shape in sorted(shapes, key=lambda s: (-s.units, -s.align)):
            for _, mask in self.placements(shape):
                if not mask & used:
                    used |= mask
                    break
            else:
                return False
        return True


def blocked_starts(forbidden: int, units: int) -> int:
    """The start units from which ``units`` consecutive units meet ``forbidden``: the OR of
    ``forbidden >> j`` for j < units, in log2(units) shifts."""
    if units <= 2:                  # the common shapes (16- and 32-bit), without the loop
        return forbidden | forbidden >> 1 if units == 2 else forbidden
    blocked = forbidden
    covered = 1
    while covered < units:
        step = min(covered, units - covered)
        blocked |= blocked >> step
        covered += step
    return blocked


@lru_cache(maxsize=None)     # a handful of shape pairs, asked in the allocators' hot loops
def blocking_weight(node: Shape, neighbour: Shape) -> int:
    """How many placements of ``node`` one placement of ``neighbour`` can block at most: the
    weight of that neighbour in ``node``'s degree (Smith, Ramsey and Holloway, "A generalized
    algorithm for graph-coloring register allocation", PLDI 2004). With 32-bit values only it
    is 1, and the weighted degree is the plain degree of the seeds."""
    if node.file != neighbour.file:
        return 0
    period = node.align * neighbour.align
    best = 0
    for s in range(0, period, neighbour.align):
        lo, hi = s, s + neighbour.units            # neighbour occupies [lo, hi)
        # node placements p (multiples of node.align) with [p, p+units) meeting [lo, hi)
        first = -(-(lo - node.units + 1) // node.align) * node.align
        count = 0
        p = first
        while p < hi:
            count += 1
            p += node.align
        best = max(best, count)
    return best
