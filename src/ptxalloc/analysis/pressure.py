"""Register pressure and MaxLive (seed 002 "Register Allocation Statistics"; SPEC section 9).

Pressure is counted per register file in 32-bit registers: a 16-bit value counts half, a 64-bit
value two, a tuple group its whole width whenever any member is live (it is one allocation
unit). At an instruction the registers that must coexist are those live after it together with
those it defines (a definition occupies a register even if it is never read); at a block's
entry, those live in. For a copy ``mov d, s`` whose source stays live, ``d`` and ``s`` hold one
value and count once.

MaxLive, the largest pressure anywhere, is the lower bound no allocation of the values as
written can beat without spilling (coalescing, which makes the two ends of a copy one value,
can). At the peak the report lists the live values, where each is defined and where it is
last used, with the source line from ``.loc`` where present: the answer to "why does this kernel
need so many registers".
"""

from __future__ import annotations

import math

from ..ir.cfg import CFG
from ..ir.registers import RegClass
from ..records import record
from ..target.units import vreg_shape
from ..util import bits
from .liveness import Liveness
from .tuples import TupleInfo


@record
class PressurePoint:
    instr: int                     # instruction id (index into cfg.instrs); -1: block entry
    block: int
    regs: float                    # GPR pressure in 32-bit registers
    preds: int
    live: list[int]                # registers live there


class Pressure:
    """Per-instruction pressure of one function.

    ``gpr[i]`` and ``pred[i]`` give the pressure at instruction id ``i`` (in 32-bit registers
    and predicates); ``by_class[c][i]`` splits ``gpr`` by register class. ``max_regs`` and
    ``max_preds`` are MaxLive; ``peak`` the point where the general registers peak.
    """

    def __init__(self, cfg: CFG, liveness: Liveness, tuples: TupleInfo | None = None,
                 exclude: int = 0):
        fn = cfg.fn
        regs = fn.regs
        classes = regs.classes
        n = len(regs)
        # (class, arity) -> units, found once each
        shape_units = {ck: vreg_shape(*ck).units for ck in set(zip(classes, regs.vec))}
        units = list(map(shape_units.__getitem__, zip(classes, regs.vec)))
        is_pred = [c == RegClass.PRED for c in classes]
        for v in bits(exclude):             # counted in neither file (uniform registers)
            is_pred[v] = False
            units[v] = 0
        # tuple groups: the whole span counts once while any member is live
        group = [-1] * n
        gunits: list[int] = []
        if tuples is not None:
            for gid, g in enumerate(tuples.groups):
                gunits.append(g.units)
                for v, _ in g.members:
                    group[v] = gid
        self.cfg = cfg
        self.liveness = liveness        # kept for a later pass over the same function
        self.tuples = tuples            # (the schedule's, after the recomputation's pressure)
        self.units = units
        self._walk_inputs = (liveness, is_pred, group, gunits)
        self._by_class: dict[str, list[float]] | None = None
        gpr, pred, _, best, best_pred, entry_gpr, entry_pred = self._walk(False)
        self.gpr = gpr
        self.pred = pred
        self.entry_gpr = entry_gpr          # per block: the pressure of its live-in set
        self.entry_pred = entry_pred
        self.max_regs = max(best[0], 0) / 2
        self.max_preds = best_pred
        self.peak = self._peak_point(liveness, best, group)

    @property
    def by_class(self) -> dict[str, list[float]]:
        """``gpr`` split by register class: only reports read it, so it is found on first
        use (a second walk) rather than with every analysis (issue 16)."""
        if self._by_class is None:
            by_class_units = self._walk(True)[2]
            self._by_class = {c.name: [w / 2 for w in by_class_units[int(c)]]
                              for c in RegClass if c != RegClass.PRED}
        return self._by_class

    def _walk(self, split_classes: bool):
        """One backward walk of every block: (gpr, pred, per-class units or None, the peak
        (units, instruction id, block, index in block), the predicate peak, and per block the
        pressure of its live-in set: general registers, predicates).

        The live set is one flag per register (a bytearray: no big-int operation per operand),
        carried from block to block: the blocks are walked last first, so a block starts from
        the live-in set of the block after it, and only the registers where that differs from
        its own live-out set are flipped (few: most blocks fall through). The peak is the one
        a walk of the blocks first to last finds first (the highest, then the earliest block,
        then, in a block, the last instruction, then its entry)."""
        cfg = self.cfg
        liveness, is_pred, group, gunits = self._walk_inputs
        units = self.units
        classes = cfg.fn.regs.classes
        ninstr = len(cfg.instrs)
        gpr = [0.0] * ninstr
        pred = [0] * ninstr
        cls_index = [int(c) for c in classes]
        by_class_units = [[0] * ninstr for _ in RegClass] if split_classes else None
        best = (-1, -1, -1, -1)            # (units, instr id, block, index in block)
        best_pred = 0
        entry_gpr = [0.0] * len(cfg.blocks)
        entry_pred = [0] * len(cfg.blocks)

        # a value outside tuple groups is counted inline (most are: issue 16); the others, and
        # every value when the classes are split, through add/remove
        inline = [not split_classes and g < 0 for g in group]
        weight = [0 if p else u for p, u in zip(is_pred, units)]
        pcount = [1 if p else 0 for p in is_pred]
        live = bytearray(len(group))       # the live set, one flag per register
        state = 0                          # the same set as a bitset, between blocks
        unit_sum = 0
        pred_sum = 0
        cls_units = [0] * len(RegClass)
        gcount: dict[int, int] = {}

        def add(v: int) -> None:
            nonlocal unit_sum, pred_sum
            if is_pred[v]:
                pred_sum += 1
                return
            g = group[v]
            if g >= 0:
                c = gcount.get(g, 0)
                gcount[g] = c + 1
                if c:
                    return
                w = gunits[g]
            else:
                w = units[v]
            unit_sum += w
            cls_units[cls_index[v]] += w

        def remove(v: int) -> None:
            nonlocal unit_sum, pred_sum
            if is_pred[v]:
                pred_sum -= 1
                return
            g = group[v]
            if g >= 0:
                c = gcount[g] - 1
                gcount[g] = c
                if c:
                    return
                w = gunits[g]
            else:
                w = units[v]
            unit_sum -= w
            cls_units[cls_index[v]] -= w

        for b in reversed(cfg.blocks):
            out = liveness.live_out[b.id]
            if state != out:
                for v in bits(state ^ out):
                    if live[v]:
                        live[v] = 0
                        if inline[v]:
                            unit_sum -= weight[v]
                            pred_sum -= pcount[v]
                        else:
                            remove(v)
                    else:
                        live[v] = 1
                        if inline[v]:
                            unit_sum += weight[v]
                            pred_sum += pcount[v]
                        else:
                            add(v)
            top = (-1, -1, -1, -1)         # this block's peak, found as a forward walk would
            instrs = b.instrs
            for k in range(len(instrs) - 1, -1, -1):
                ins = instrs[k]
                i = b.first + k
                defs = ins.defs
                # the defs join the live-after set for this point
                if len(defs) == 1:          # the common case, without a list per instruction
                    extra = () if live[defs[0]] else defs
                else:
                    extra = [d for d in defs if not live[d]] if defs else defs
                if ins.is_copy:
                    d, s_ = defs[0], ins.uses[0]
                    if d != s_ and live[s_]:
                        if extra:
                            extra = []             # d shares s's register
                        elif live[d]:
                            extra = None           # d and s live after: count once
                if extra is None:
                    remove(defs[0])
                elif extra:
                    for d in extra:
                        if inline[d]:
                            unit_sum += weight[d]
                            pred_sum += pcount[d]
                        else:
                            add(d)
                u, p = unit_sum, pred_sum
                if split_classes:
                    for c, w in enumerate(cls_units):
                        if w:
                            by_class_units[c][i] = w
                if extra is None:
                    add(defs[0])
                elif extra:
                    for d in extra:
                        if inline[d]:
                            unit_sum -= weight[d]
                            pred_sum -= pcount[d]
                        else:
                            remove(d)
                gpr[i] = u / 2
                pred[i] = p
                if u > top[0]:
                    top = (u, i, b.id, k)
                if p > best_pred:
                    best_pred = p
                # step to the live-before set
                if ins.guard < 0:
                    for d in defs:
                        if live[d]:
                            live[d] = 0
                            if inline[d]:
                                unit_sum -= weight[d]
                                pred_sum -= pcount[d]
                            else:
                                remove(d)
                for v in ins.uses:
                    if not live[v]:
                        live[v] = 1
                        if inline[v]:
                            unit_sum += weight[v]
                            pred_sum += pcount[v]
                        else:
                            add(v)
            # block entry: live-in (what the walk reached: gen | (live-out & ~kill))
            state = liveness.live_in[b.id]
            entry_gpr[b.id] = unit_sum / 2
            entry_pred[b.id] = pred_sum
            if unit_sum > top[0]:
                top = (unit_sum, -1, b.id, -1)
            if pred_sum > best_pred:
                best_pred = pred_sum
            if top[0] >= best[0]:           # an earlier block wins a tie
                best = top
        return gpr, pred, by_class_units, best, best_pred, entry_gpr, entry_pred

    def _peak_point(self, liveness: Liveness, best, group) -> PressurePoint:
        units, instr, block, k = best
        if block < 0:
            return PressurePoint(-1, -1, 0.0, 0, [])
        if k < 0:
            live = liveness.live_in[block]
        else:
            ins = self.cfg.blocks[block].instrs[k]
            live = liveness.live_after(block)[k]
            for d in ins.defs:
                live |= 1 << d
        return PressurePoint(instr, block, units / 2, 0, bits(live))

    @property
    def max_live(self) -> int:
        """MaxLive in whole 32-bit registers (two 16-bit halves make one)."""
        return math.ceil(self.max_regs)

    def max_live_with_predicates(self, pred_regs: int) -> int:
        """MaxLive counting the predicates beyond the predicate file's ``pred_regs``: where
        more are live at once, the others live in general registers (SPEC section 5: a spilled
        predicate is a 32-bit register holding 0 or 1, live from its definition to its last
        use), so the most, over every point, of the general registers live there plus the
        predicates above ``pred_regs``. A floor for an allocation that keeps every predicate
        as written (none recomputed where it is read)."""
        most = self.max_regs
        for g, p in zip(self.gpr, self.pred):
            if p > pred_regs and g + p - pred_regs > most:
                most = g + p - pred_regs
        for g, p in zip(self.entry_gpr, self.entry_pred):
            if p > pred_regs and g + p - pred_regs > most:
                most = g + p - pred_regs
        return math.ceil(most)

    def top_points(self, count: int = 5) -> list[int]:
        """Instruction ids of the highest-pressure instructions, highest first."""
        order = sorted(range(len(self.gpr)), key=lambda i: (-self.gpr[i], i))
        return order[:count]
