"""The uniform register classes, allocated on their own (seed 004 "Register Classes" and
"Entry Point: sub_9721C0": UR0-UR62 and UP0-UP6 are classes of their own, each allocated
independently of R and P; sm_75 and later; docs/decisions.md, "Uniform registers").

:func:`place_uniform` picks the registers of a working function that go to the uniform files
and places them:

1. the candidates: registers of one 32-bit, 64-bit or predicate value (no 16-bit halves, no
   quads, no vector-typed registers, no member of a register tuple, nothing the caller
   excludes), found uniform by :func:`ptxalloc.analysis.uniformity.uniform_registers` under
   the datapath rule — so every definition of a UR/UP value reads only UR/UP values, uniform
   special registers, constants, kernel parameters and the constant bank;
2. a first-fit coloring over their interference (:class:`InterferenceGraph`), copies placed
   on their source's register when it is free: a 32-bit value takes one of UR0-UR62, a
   64-bit value an even-aligned pair URn:URn+1 (written ``%URD<n>``), a predicate one of
   UP0-UP6;
3. a value that finds no register goes back to R/P (ptxas keeps uniform values in R when UR
   runs out; nothing is spilled from a uniform file), and the candidates are found again
   without it, since what read it is no longer defined from uniform registers alone.

The registers placed are left out of the R/P allocation (the driver pins them) and written as
``%UR<n>``, ``%URD<n>``, ``%UP<n>`` (:func:`ptxalloc.alloc.output.physical_name`).
"""

from __future__ import annotations

from ..analysis.interference import InterferenceGraph
from ..analysis.liveness import Liveness
from ..analysis.uniformity import DATAPATH_RULE, uniform_registers
from ..ir.cfg import CFG
from ..ir.module import Function
from ..ir.operands import Vec
from ..ir.registers import RegClass
from ..util import bits

UR_REGS = 63        # UR0-UR62 (URZ is architectural)
UP_REGS = 7         # UP0-UP6 (UPT is architectural)

#: Per class: (file, registers a value takes, alignment): "UR" or "UP".
_SHAPE = {RegClass.GPR32: ("UR", 1, 1), RegClass.GPR64: ("UR", 2, 2),
          RegClass.PRED: ("UP", 1, 1)}


class UniformPlacement:
    """The registers placed in the uniform files: ``start[v]`` is the first register (URn or
    UPn) of register ``v``; ``found`` how many registers the analysis found uniform under the
    datapath rule before any went back for want of room."""

    def __init__(self) -> None:
        self.start: dict[int, int] = {}
        self.found = 0

    def registers(self, fn: Function) -> int:
        """UR registers used (the highest placed, plus one)."""
        top = -1
        for v, s in self.start.items():
            if fn.regs.classes[v] != RegClass.PRED:
                top = max(top, s + _SHAPE[fn.regs.classes[v]][1] - 1)
        return top + 1

    def predicates(self, fn: Function) -> int:
        """UP registers used."""
        return max((s + 1 for v, s in self.start.items()
                    if fn.regs.classes[v] == RegClass.PRED), default=0)

    def mask(self) -> int:
        """The bitset of the placed registers."""
        m = 0
        for v in self.start:
            m |= 1 << v
        return m


def _eligible(fn: Function, exclude: set[int]) -> int:
    """Registers of a class the uniform files hold, in no register tuple, not excluded."""
    regs = fn.regs
    m = 0
    for v, (c, vec) in enumerate(zip(regs.classes, regs.vec)):
        if c in _SHAPE and vec == 0 and v not in exclude:
            m |= 1 << v
    for ins in fn.instructions():
        for op in ins.ops:
            if type(op) is Vec:
                for r in op.regs():
                    m &= ~(1 << r.v)
    return m


def place_uniform(fn: Function, exclude: set[int] = frozenset()) -> UniformPlacement:
    """Choose and place the uniform registers of ``fn`` (the module docstring)."""
    cfg = CFG(fn)
    out = UniformPlacement()
    candidates = _eligible(fn, exclude)
    adj = InterferenceGraph(cfg, Liveness(cfg)).adj
    copy_source: dict[int, int] = {}
    for ins in cfg.instrs:
        if ins.is_copy:
            copy_source.setdefault(ins.defs[0], ins.uses[0])
    first = True
    while True:
        uniform = uniform_registers(fn, cfg, DATAPATH_RULE, candidates)
        if first:
            out.found = uniform.bit_count()
            first = False
        start, failed = _color(fn, uniform, adj, copy_source)
        if not failed:
            out.start = start
            return out
        candidates = uniform & ~failed


def _color(fn: Function, uniform: int, adj: list[int], copy_source: dict[int, int]
           ) -> tuple[dict[int, int], int]:
    """First-fit coloring of the ``uniform`` registers in id order; returns the starts and
    the bitset of registers that found no room."""
    classes = fn.regs.classes
    start: dict[int, int] = {}
    failed = 0
    for v in bits(uniform):
        file, size, align = _SHAPE[classes[v]]
        limit = UR_REGS if file == "UR" else UP_REGS
        taken = 0
        for u in bits(adj[v] & uniform):
            s = start.get(u)
            if s is not None and _SHAPE[classes[u]][0] == file:
                taken |= ((1 << _SHAPE[classes[u]][1]) - 1) << s
        want = ((1 << size) - 1)
        src = copy_source.get(v)
        choices = range(0, limit - size + 1, align)
        if src is not None and src in start and classes[src] == classes[v]:
            choices = [start[src], *choices]
        for s in choices:
            if not (want << s) & taken:
                start[v] = s
                break
        else:
            failed |= 1 << v
    return start, failed
