"""ptxas's fat-point allocator (seed 004 "Core Fat-Point Allocator: sub_957160", "Register
Assignment: sub_94FDD0", "Per-Class Driver: sub_971A90", "Guidance consumption by the retry
loop"; SPEC section 6), on the project's allocation problem (:class:`Problem`).

**Per class.** The general registers (class R) and the predicates (class P) are allocated one
after the other, each with its own attempts; a node never conflicts across files.

**An attempt** (one call of the seed's ``fatpoint_allocate``) orders the nodes of the class
(:mod:`fatpoint_order`, the six lists) and colors the assignment stack in reverse. For each node
it looks at two per-slot histograms over the register file — 512 entries, as ptxas's two
2056-byte arrays: 255 registers are 510 16-bit units (:mod:`ptxalloc.target.units`), so a slot
is a placement's start unit:

* **primary[s]** — the interference count: how many already-assigned nodes that interfere with
  this one overlap the placement starting at ``s``. In a NOSPILL attempt any conflict is *hard*
  (no spill may resolve it), and so is a conflict with a precolored or unspillable node: such a
  slot counts ``HARD``, above every threshold;
* **secondary[s]** — the tie-break cost: the spill costs of the conflicting nodes (the seed's
  secondary spill cost, vreg+76), plus ``PREFER_COST`` when the slot lies outside the node's
  preferred registers (callee-saved ones for a value live across calls, SPEC section 7), minus
  the block frequency of every copy whose other end already sits where this slot would make
  the copy vanish (the seed's pre-allocated candidate, sub_950100). There is no bank term:
  ptxas's bank-aware allocation (knob 627, allocator state +1591) is off by default.

The scan skips slots whose primary count exceeds the discard threshold (knob
``RegAllocThresholdForDiscardConflicts``, 684, default 50); the minimum primary count wins and
the secondary cost breaks ties (the earlier slot wins a full tie). Correctness first: a slot
with primary 0 is a legal placement (it overlaps no interfering assigned node's units, and the
slot list holds only placements of the node's shape — pairs, quads and tuples take all their
units, aligned — within the budget). A winning slot with conflicts is taken only in a SPILL
attempt, and only when the conflicting nodes cost less to spill than the node itself: they are
evicted — ptxas "discards the conflicts" by spilling them. Otherwise the node *needs spill*
(seed flag 0x40000). The assignment (sub_94FDD0) writes the node's start unit; the registers
coalesced into the node — its alias chain, the union-find members of :class:`Problem` — all
take it, each at its own offset, when the driver writes the allocation out.

The production scan (:meth:`FatPoint.choose`) evaluates the histogram entries lazily in slot
order and stops as soon as no later slot can win (a legal slot whose secondary cost equals the
lowest any slot can have); :func:`histograms` builds the full arrays and :func:`scan` reads them
the seed's way — the unit tests check that both choose alike.

**The retry loop** (sub_971A90 / sub_9714E0), once per class in each of the driver's rounds:

1. a NOSPILL attempt at the budget; if every node got a slot, done;
2. otherwise up to ``RegAllocNumNonSpillTrials`` (639) SPILL attempts: the spill guidance
   (:mod:`fatpoint_guidance`) picks the values to spill so that the pressure fits the register
   target T, and the attempt colors the rest, evicting where that is cheaper; an attempt that
   leaves no node needing spill ends the loop, one that does lowers the target to T - 1 (the
   seed's target-minus-one descent) for the next;
3. every attempt is recorded (sub_93D070); the best one is the round's result: the one whose
   spills add the fewest bytes of spill code (a store per definition, a reload per use: the
   figure ``ptxas -v`` reports), ties to the lower spill cost. The seed does not say what
   "best" compares; spill cost alone picked sets of many cheap values and more spill bytes on
   the corpus at K = 15 (docs/decisions.md). When no attempt succeeded, the best
   one is the final fallback (sub_936FD0): it always succeeds by spilling whatever needed
   spill.

The values the result leaves to spill go through the driver's spill rewrite, and the next round
allocates the function as rewritten, so every allocation is checked by the same checker as the
CICC allocator's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..target.units import GPR, PRED, Shape, blocking_weight
from ..util import bits
from . import knobs as knob_table
from .api import Allocator, Coloring, Problem, register
from .choice import spill_code_bytes
from .fatpoint_guidance import excess_points, spill_guidance
from .fatpoint_order import LOWCONF, LOWLATE, precolored_partners, order
from .matrix import UnitMatrix
from .session import Session

if TYPE_CHECKING:
    from ..ir.cfg import CFG
    from ..ir.module import Function

HIST = 512                       # entries of ptxas's histograms: 510 units of R0..R254 fit
HARD = 1 << 30                   # a conflict no spill may resolve
PREFER_COST = 2.0                # a slot outside the preferred registers: a save and a restore
NOSPILL, SPILL = "NOSPILL", "SPILL"
CLASS_NAME = {GPR: "R", PRED: "P"}


@dataclass
class Attempt:
    """One fat-point pass over one register class."""

    mode: str
    target: int                        # the register target (predicates for class P)
    start: dict[int, int] = field(default_factory=dict)
    guided: list[int] = field(default_factory=list)      # spilled by the guidance
    evicted: list[int] = field(default_factory=list)     # conflicts discarded by spilling
    failed: list[int] = field(default_factory=list)      # needs spill: no slot at all
    cost: float = 0.0                  # spill cost of what it leaves to spill
    code_bytes: float = 0.0            # bytes of spill code that would add
    peak: int = 0                      # registers (predicates) used
    optimistic: int = 0                # nodes colored from LowConf / LowLate
    stack: list[int] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return not self.failed

    @property
    def spilled(self) -> list[int]:
        return self.guided + self.evicted + self.failed

    def describe(self) -> str:
        what = "ok" if self.success else f"{len(self.failed)} need spill"
        parts = [f"{self.mode}@{self.target}: {what} ({self.peak} used)"]
        if self.guided:
            parts.append(f"{len(self.guided)} guided")
        if self.evicted:
            parts.append(f"{len(self.evicted)} evicted")
        return ", ".join(parts)


def scan(primary: list[int], secondary: list[float], slots: list[int],
         threshold: int) -> int | None:
    """The seed's slot scan: skip slots above the threshold; the minimum primary count wins,
    the lower secondary cost breaks ties, the earlier slot a full tie. None: no slot."""
    best = None
    best_p = best_s = 0
    for s in slots:
        pc = primary[s]
        if pc > threshold:
            continue
        if best is None or pc < best_p or (pc == best_p and secondary[s] < best_s):
            best, best_p, best_s = s, pc, secondary[s]
    return best


class FatPoint:
    """The fat-point core for one register class of one round's problem."""

    def __init__(self, p: Problem, file: int, threshold: int = 50):
        self.p = p
        self.file = file
        self.threshold = threshold
        self.nodes = [n for n, sh in ((n, p.shape[n]) for n in p.members)
                      if sh.file == file and n not in p.precolored]
        self.precolored = {n: s for n, s in p.precolored.items() if p.shape[n].file == file}
        self.size = p.regfile.size(Shape(file, 1, 1))
        self._slots: dict[Shape, list[tuple[int, tuple[int, ...]]]] = {}
        self._slot_index: dict[Shape, dict[int, tuple[int, ...]]] = {}
        self._hard: int | None = None
        self._moves: dict[int, list[tuple[int, int, float]]] | None = None
        self._plain: set[int] | None = None
        self._precolored_partners: set[int] | None = None

    @property
    def hard_mask(self) -> int:
        """The nodes no conflict may evict: precolored and unspillable ones."""
        if self._hard is None:
            p = self.p
            hard = 0
            for n in p.precolored:
                hard |= 1 << n
            cost = p.cost
            for n in p.members:
                if math.isinf(cost[n]):
                    hard |= 1 << n
            self._hard = hard
        return self._hard

    # -- the slots and the secondary terms --

    def slots(self, shape: Shape) -> list[tuple[int, tuple[int, ...]]]:
        got = self._slots.get(shape)
        if got is None:
            got = [(s, tuple(range(s, s + shape.units)))
                   for s, _ in self.p.regfile.placements(shape)]
            self._slots[shape] = got
        return got

    def slot_index(self, shape: Shape) -> dict[int, tuple[int, ...]]:
        got = self._slot_index.get(shape)
        if got is None:
            got = dict(self.slots(shape))
            self._slot_index[shape] = got
        return got

    def move_partners(self) -> dict[int, list[tuple[int, int, float]]]:
        """Per node, the copies to nodes it was not merged with: (other node, unit offset from
        the other node's start to this node's start that makes the copy vanish, weight)."""
        if self._moves is None:
            p = self.p
            out: dict[int, list[tuple[int, int, float]]] = {}
            off = p.offset
            for w, d, s, _ in p.moves:
                a, b = p.find(d), p.find(s)
                if a == b or p.shape[a].file != self.file or p.shape[b].file != self.file:
                    continue
                out.setdefault(a, []).append((b, off[s] - off[d], w))
                out.setdefault(b, []).append((a, off[d] - off[s], w))
            self._moves = out
        return self._moves

    def plain(self) -> set[int]:
        """The nodes whose secondary cost is 0 wherever they are legal: no copy partner and
        no preferred registers."""
        if self._plain is None:
            moves = self.move_partners()
            prefer = self.p.prefer
            self._plain = {n for n in self.nodes if n not in moves and n not in prefer}
        return self._plain

    def bonuses(self, n: int, start: dict[int, int]) -> dict[int, float]:
        """The copy bonuses of ``n`` by slot (negative): the block frequency of each copy whose
        other end is assigned where this slot makes the copy vanish."""
        bonus: dict[int, float] = {}
        moves = self.move_partners().get(n)
        if moves:
            for m, delta, w in moves:
                sm = start.get(m)
                if sm is not None:
                    s = sm + delta
                    bonus[s] = bonus.get(s, 0.0) - w
        return bonus

    # -- the histograms (reference) and the scan (production) --

    @staticmethod
    def soft_cost(s: int, shape: Shape, bonus: dict[int, float], want: int) -> float:
        """The preference part of ``secondary[s]`` for a node of ``shape``."""
        sec = bonus.get(s, 0.0) if bonus else 0.0
        if want and shape.mask(s) & ~want:
            sec += PREFER_COST
        return sec

    def histograms(self, n: int, occ: list[int], start: dict[int, int],
                   mode: str) -> tuple[list[int], list[float], list[int]]:
        """The full primary and secondary histograms of ``n`` (512 entries each, indexed by
        slot) and the slots of its shape."""
        primary = [0] * HIST
        secondary = [0.0] * HIST
        adjn = self.p.adj[n]
        cost = self.p.cost
        bonus = self.bonuses(n, start)
        want = self.p.prefer.get(n, 0)
        slots = []
        shape = self.p.shape[n]
        for s, units in self.slots(shape):
            slots.append(s)
            c = 0
            for u in units:
                c |= occ[u]
            c &= adjn
            if c and (mode == NOSPILL or c & self.hard_mask):
                primary[s] = HARD
            else:
                primary[s] = c.bit_count()
            sec = self.soft_cost(s, shape, bonus, want)
            for m in bits(c):
                sec += cost[m]
            secondary[s] = sec
        return primary, secondary, slots

    def choose(self, n: int, occ: list[int], start: dict[int, int],
               mode: str) -> tuple[int | None, int]:
        """The winning slot of ``n`` and the bitset of assigned nodes it conflicts with (0 for
        a legal slot); None when every slot is skipped. Same answer as ``scan(histograms())``."""
        adjn = self.p.adj[n]
        shape = self.p.shape[n]
        slots = self.slots(shape)
        want = self.p.prefer.get(n, 0)
        if n in self.plain():
            # no secondary term but conflicts: the first legal slot wins
            for s, units in slots:
                c = 0
                for u in units:
                    c |= occ[u]
                if not c & adjn:
                    return s, 0
            if mode == NOSPILL:
                return None, 0
            return self.discard_scan(n, occ, slots, {}, 0)
        bonus = self.bonuses(n, start)
        # the lowest secondary cost a legal slot can have: a legal bonus slot's, else 0
        floor = 0.0
        if bonus:
            slot_units = self.slot_index(shape)
            for s in bonus:
                units = slot_units.get(s)
                if units is None:
                    continue
                c = 0
                for u in units:
                    c |= occ[u]
                if not c & adjn:
                    floor = min(floor, self.soft_cost(s, shape, bonus, want))
        soft = bool(bonus or want)
        best = None
        best_sec = 0.0
        for s, units in slots:
            c = 0
            for u in units:
                c |= occ[u]
            if c & adjn:
                continue
            sec = self.soft_cost(s, shape, bonus, want) if soft else 0.0
            if best is None or sec < best_sec:
                best, best_sec = s, sec
                if sec <= floor:
                    break
        if best is not None:
            return best, 0
        if mode == NOSPILL:
            return None, 0
        return self.discard_scan(n, occ, slots, bonus, want)

    def discard_scan(self, n: int, occ: list[int], slots, bonus: dict[int, float],
                     want: int) -> tuple[int | None, int]:
        """SPILL mode, no legal slot for ``n``: the slot with the fewest conflicts (none of
        them hard, at most the discard threshold), the lowest secondary cost breaking ties,
        and the bitset of those conflicts; (None, 0) when every slot is skipped."""
        adjn = self.p.adj[n]
        shape = self.p.shape[n]
        best = None
        best_sec = 0.0
        threshold = self.threshold
        hard = self.hard_mask
        cost = self.p.cost
        best_c = 0
        best_p = 0
        for s, units in slots:
            c = 0
            for u in units:
                c |= occ[u]
            c &= adjn
            if c & hard:
                continue
            pc = c.bit_count()
            if pc > threshold or (best is not None and pc > best_p):
                continue                         # skipped, or cannot win
            sec = self.soft_cost(s, shape, bonus, want)
            for m in bits(c):
                sec += cost[m]
            if best is None or pc < best_p or (pc == best_p and sec < best_sec):
                best, best_p, best_sec, best_c = s, pc, sec, c
        return best, best_c

    # -- one attempt --

    def residual_degrees(self, excluded: set[int]) -> dict[int, int]:
        """Weighted degrees once the ``excluded`` nodes are taken out of the graph."""
        p = self.p
        gone = 0
        for x in excluded:
            gone |= 1 << x
        by_shape = [(sh, mask & gone) for sh, mask in p.shape_masks.items() if mask & gone]
        adj = p.adj
        shape = p.shape
        wdeg = {}
        for n in self.nodes:
            w = p.wdeg[n]
            a = adj[n]
            if a & gone:
                sn = shape[n]
                for sh, mask in by_shape:
                    common = a & mask
                    if common:
                        w -= blocking_weight(sn, sh) * common.bit_count()
            wdeg[n] = w
        return wdeg

    def attempt(self, mode: str, target: int, guided: list[int] | None = None) -> Attempt:
        p = self.p
        guided = list(guided or ())
        excluded = set(guided)
        result = Attempt(mode, target, guided=guided)
        matrix = UnitMatrix(p.shape, p.adj, self.size, self.precolored)
        occ = matrix.occ                            # per unit: bitset of assigned nodes
        start = result.start = matrix.start
        shape = p.shape
        nodes = [n for n in self.nodes if n not in excluded]
        wdeg = self.residual_degrees(excluded) if excluded else p.wdeg
        if self._precolored_partners is None:                # the same for every attempt
            self._precolored_partners = precolored_partners(p)
        ordering = order(p, nodes, wdeg, spill_retry=(mode == SPILL),
                         partners=self._precolored_partners)
        cost = p.cost
        adj = p.adj
        plain = self.plain()
        slots2 = self.slots(Shape(self.file, 2, 2)) if self.file == GPR else None
        failed = result.failed
        for n in ordering.coloring_order():
            if slots2 is not None and n in plain and shape[n] == (GPR, 2, 2):
                # inline fast path of choose(): a 32-bit value without secondary terms takes
                # the first legal register
                adjn = adj[n]
                placed = False
                for s, (u0, u1) in slots2:
                    if not (occ[u0] | occ[u1]) & adjn:
                        matrix.assign(n, s)
                        placed = True
                        break
                if placed:
                    continue
                if mode == NOSPILL:
                    failed.append(n)
                    continue
                # no legal register: straight to the eviction scan (no secondary terms)
                s, conflicts = self.discard_scan(n, occ, slots2, {}, 0)
            else:
                s, conflicts = self.choose(n, occ, start, mode)
            if s is not None and conflicts:
                discarded = bits(conflicts)
                if sum(cost[m] for m in discarded) >= cost[n]:
                    s = None                         # cheaper to spill this one
                else:
                    for m in discarded:
                        matrix.unassign(m)
                        result.evicted.append(m)
            if s is None:
                result.failed.append(n)
                continue
            matrix.assign(n, s)
        result.stack = ordering.stack
        result.optimistic = sum(1 for n in nodes if ordering.list_of.get(n) in
                                (LOWCONF, LOWLATE))
        result.cost = sum(cost[n] for n in result.spilled)
        div = 2 if self.file == GPR else 1
        result.peak = max(((s + shape[n].units - 1) // div for n, s in start.items()),
                          default=-1) + 1
        return result


def allocate_class(core: FatPoint, trials: int) -> tuple[Attempt, list[Attempt]]:
    """The retry loop for one class: NOSPILL, then SPILL retries with spill guidance and the
    target-minus-one descent; returns the best attempt and all of them."""
    p = core.p
    scale = 2 if core.file == GPR else 1
    target = p.regfile.k if core.file == GPR else p.regfile.pred_regs
    first = core.attempt(NOSPILL, target)
    attempts = [first]
    if first.success or not core.nodes or trials <= 0:
        return first, attempts
    # the excess points once, for the lowest target the descent can reach
    points = excess_points(p, core.file, max(1, target - trials + 1) * scale)
    for _ in range(trials):
        guided = spill_guidance(p, core.file, target * scale, points)
        a = core.attempt(SPILL, target, guided)
        attempts.append(a)
        if a.success:
            break
        if target <= 1:
            break
        target -= 1
    size = spill_code_bytes(p, core.file)
    for a in attempts:
        a.code_bytes = sum(size[n] for n in a.spilled)
    best = min(attempts, key=lambda a: (a.code_bytes, a.cost))     # min keeps the first tie
    return best, attempts


@dataclass
class ClassTrace:
    """What the retry loop did for one class in one round (for ``-v`` and the report)."""

    file: int
    attempts: list[Attempt]
    best: Attempt

    def describe(self) -> str:
        text = f"class {CLASS_NAME[self.file]}: " + "; ".join(a.describe() for a in self.attempts)
        if len(self.attempts) > 1:
            chosen = self.attempts.index(self.best) + 1
            label = "" if any(a.success for a in self.attempts) else " (final fallback)"
            text += (f" -> best: attempt {chosen}{label}, spills {len(self.best.spilled)} "
                     f"value(s), {self.best.code_bytes:g} bytes of spill code, cost "
                     f"{self.best.cost:.4g}")
        return text


def color(p: Problem, knobs: dict[str, float] | None = None,
          trace: list[ClassTrace] | None = None) -> Coloring:
    """One round of the fat-point allocator: every class through its retry loop."""
    k = knob_table.resolve(knobs)
    threshold = int(k["RegAllocThresholdForDiscardConflicts"])
    trials = int(k["RegAllocNumNonSpillTrials"])
    result = Coloring()
    for n, s in p.precolored.items():
        result.start[n] = s
    for file in (GPR, PRED):
        core = FatPoint(p, file, threshold)
        if not core.nodes:
            continue
        best, attempts = allocate_class(core, trials)
        result.start.update(best.start)
        result.spilled.extend(best.spilled)
        result.stack.extend(best.stack)
        result.optimistic += best.optimistic
        if trace is not None:
            trace.append(ClassTrace(file, attempts, best))
    return result


class FatpointSession(Session):
    """The fat-point allocator across the driver's rounds for one function: it keeps the
    attempt log (``-v``), the final register target, and compacts the spill frame."""

    def __init__(self, fn: "Function", budget: int, options) -> None:
        super().__init__(fn, budget, options)
        self.knobs = knob_table.resolve(getattr(options, "knobs", None))
        self.rounds: list[list[ClassTrace]] = []
        self.frame_bytes_saved = 0

    def color(self, problem: Problem, options) -> Coloring:
        trace: list[ClassTrace] = []
        coloring = color(problem, self.knobs, trace)
        self.rounds.append(trace)
        return coloring

    def forget(self, back: int) -> None:
        del self.rounds[-back]

    def slots(self, cfg: "CFG", frame: int) -> int:
        from ..spill.compaction import compact_frame
        new_frame, _ = compact_frame(cfg, frame)
        self.frame_bytes_saved = frame - new_frame
        return new_frame

    @property
    def attempts(self) -> int:
        return sum(len(t.attempts) for trace in self.rounds for t in trace)

    @property
    def final_target(self) -> int:
        """The register target of the attempt that decided the last round's general
        registers (the budget when it was the NOSPILL attempt)."""
        for trace in reversed(self.rounds):
            for t in trace:
                if t.file == GPR:
                    return t.best.target
        return self.budget

    def finish(self, result) -> None:
        for i, trace in enumerate(self.rounds, 1):
            text = " | ".join(t.describe() for t in trace) or "nothing to allocate"
            result.notes.append(f"fat-point round {i}: {text}")
        result.notes.append(f"fat-point: {self.attempts} attempt(s) in {len(self.rounds)} "
                            f"round(s), final target {self.final_target} registers"
                            + (f", {self.frame_bytes_saved} frame bytes saved by slot "
                               f"compaction" if self.frame_bytes_saved else ""))
        result.extra["fatpoint_attempts"] = self.attempts
        result.extra["final_target"] = self.final_target
        result.extra["frame_bytes_saved"] = self.frame_bytes_saved


class Fatpoint(Allocator):
    """ptxas's allocator as a registry entry: per class, NOSPILL then guided SPILL attempts;
    its session keeps the attempt log and compacts the spill frame."""

    name = "fatpoint"
    description = "ptxas's fat-point allocator (seed 004)"
    coalesces = True

    def color(self, problem: Problem, options) -> Coloring:
        return color(problem, getattr(options, "knobs", None))

    def open(self, fn: "Function", budget: int, options) -> Session:
        return FatpointSession(fn, budget, options)


register(Fatpoint())
