"""Recomputation at the use before allocation: addresses formed at the access, cheap values and
predicates rematerialized where they are read (seed 002 "Rematerialization" and its cost
model; issue 13: transformations (v), address formation at the access, and (i), cheap
rematerialization, of its measurement of where ptxas wins).

Triton and LLVM compute an address, an offset or a predicate once and keep it live across a
loop until the access that reads it; ptxas forms such a value right before the access, from
registers live there anyway. This pass does the same on the PTX: a value ``%v`` is recomputed
at its uses when

* it has exactly one definition ``op %v, a, b`` — a cheap integer computation (``add``, ``sub``,
  ``mul``/``mad`` including ``.wide``, ``shl``/``shr``, ``and``/``or``/``xor``/``not``,
  ``cvt`` between integers, ``cvta``, ``mov``) or a ``setp``, of kind ``PURE``
  (:mod:`ptxalloc.ir.effects`: no memory access, never a load, nothing with a side effect),
  unguarded, off the carry chain, reading only registers, immediates and fixed symbols
  (``%tid.x``, a variable's address), with ``%v`` not among its operands, and none a register
  an asynchronous instruction keeps accessing (:func:`ptxalloc.ir.isa.async_operands`: a copy
  at a later use could read it in flight);
* at every use the definition is *available*: it reaches the use on every path and none of its
  operands nor ``%v`` is redefined in between (a forward must-dataflow over the blocks);
* at every use each register operand of the definition is live anyway (live before the use in
  the original): recomputing there lengthens no other value's range — or, for an operand that
  is not (Triton's ``mul.wide.s32 %off, %idx, 2`` read only by ``add.s64 %a, %base, %off``),
  it is itself a candidate whose definition is available at the use and whose operands are
  live there: its definition is copied too, first, a *chain* of at most :data:`MAX_CHAIN`
  instructions (the same rule, no other value's range grows), and an operand definition that
  nothing reads any more is left out; or, last, an operand whose range is *extended* to the
  use: one read by nothing but this definition, or any general register. An extended
  operand's new range lies within its old one and the value's (every path to the use passes
  the definition, which reads it, and neither changes in between; for a chain's operand, the
  chain values' too, which end at the use or at their last other reader), so the extended
  operands together must be narrower than the value (``%idx``, 32 bits, for the 64-bit
  ``%off``: one register where there were two, as ptxas keeps a 32-bit index per element and
  forms the address at the access), each counted at its width shared among its readers (a
  64-bit base read by 32 address computations, each formed at its store, is extended once
  for all, as ptxas keeps one base live: Triton's epilogues compute every address of a tile,
  ``cvt``/``mul.wide`` -> ``shl`` -> ``add`` base -> ``add`` offset, before a barrier and store
  through them after it). Per operand the cheaper of a chain and an extension is taken. When
  all values are planned the shares are *settled*: a value whose extended operands, each
  shared among the values really extending it, cost its width or more is left as written
  (until every value kept pays), unless it is recomputed at one use only and the operands it
  alone extends cost no more than its width (its chain is moved there, not copied, and its
  ranges merge into theirs);
* for a predicate (a ``setp``, or ``and``/``or``/``xor``/``not.pred`` of predicates) when the
  function keeps more predicates live at once than P0-P6 hold, a second plan also reads its
  32-bit operands at the use with their ranges extended (Triton's matmul keeps 33 predicates
  live from ``setp``s before its epilogue's barrier to the stores they guard; ptxas issues
  ``ISETP`` right before each guarded access and never keeps more than 7): a predicate beyond
  the file would spill into a general register anyway. Of the plans with and without this
  trade the one needing fewer registers in all (general MaxLive plus the predicates beyond
  the file) is kept;
* the recomputations are worth it by seed 002's rule (:func:`ptxalloc.spill.remat.
  worth_rematerializing`: one cycle of compute against a reload of 4 to 10) and there are at
  most :data:`MAX_RECOMPUTATIONS` of them, and the value's range shrinks (it is not read only
  by the instruction right after its definition).

Then one copy of the definition into a fresh register goes right before each using instruction,
the uses read it, and the original definition, now without uses, is left out. Pressure can only
fall where it was computed (the new value is live only across its use, its operands were live
there already) but decisions are taken together on the original's liveness, so the result is
kept only when its MaxLive (general registers and predicates) is no higher.

The decisions are :class:`~ptxalloc.ir.recompute.Recompute` records; the allocated function
carries them in ``//@recompute`` / ``//@dead`` lines and :mod:`ptxalloc.verify.recompute`
proves the rewritten function equivalent to the original by its own available-expressions
argument (docs/checker.md, "Recomputed allocations"). Switch: the knob ``recompute`` (2: with
chains, the default; 1: without; 0: off).
"""

from __future__ import annotations

import re

from ..analysis.liveness import Liveness
from ..ir import isa
from ..ir.cfg import CFG
from ..ir.effects import PURE, effect_kind, uses_carry
from ..ir.module import Function
from ..ir.operands import Imm, Reg, Sym
from ..ir.recompute import Recompute, apply_recomputations
from ..ir.registers import CLASS_BITS, RegClass
from ..records import record
from ..spill.remat import worth_rematerializing
from ..target.units import PRED_REGS
from ..util import bits as set_bits, gc_paused

#: Opcodes cheap enough to recompute (seed 002: moves, add/sub, shifts, bitwise operations,
#: address computation), integer types only, and ``setp`` of any type.
CHEAP_BASES = frozenset(("add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "not",
                         "cvt", "cvta", "mov", "setp"))
_TYPE = re.compile(r"\.(?:[subf]\d+|f16x2|bf16x2|bf16|pred|tf32|e4m3|e5m2)\b")
_INTEGER = re.compile(r"\.[sub](?:8|16|32|64)$")

#: Predicate logic (``and.pred %p, %q, %r``) is as cheap as a ``setp``.
PREDICATE_LOGIC = frozenset(("and", "or", "xor", "not"))

#: The most recomputations of one value (each is one instruction more).
MAX_RECOMPUTATIONS = 8

#: The most definitions copied at one use: the value's and those of operands not live there.
MAX_CHAIN = 4

#: The same for the plan without shared extensions (``share=False``), the planner as it was
#: before them: its greedy choices with longer chains can pin operands that shorter ones
#: leave free (rodinia's ``bpnn_layerforward``: MaxLive 15 with chains of 3, 18 with 4).
MAX_CHAIN_UNSHARED = 3

_GENERAL = (RegClass.GPR32, RegClass.GPR64)


@record
class Recomputed:
    """The rewritten function and what was done: ``records`` (one per use served, each
    inserting its chain and the definition), ``dead`` (original instruction indices left out:
    one per value recomputed or offset no longer read) and MaxLive
    (registers, predicates) before and after."""

    function: Function
    records: list[Recompute]
    dead: list[int]
    max_live_before: tuple[int, int]
    max_live_after: tuple[int, int]

    def report(self) -> dict:
        return {"values": len(self.dead),
                "inserted": sum(1 + len(r.inner) for r in self.records),
                "max_live_before": self.max_live_before[0],
                "max_live_after": self.max_live_after[0]}


def cheap(ins) -> bool:
    """Whether ``ins`` is a definition this pass may copy (module docstring)."""
    base = ins.base
    if base not in CHEAP_BASES or ins.guard >= 0 or len(ins.defs) != 1 or not ins.known \
            or effect_kind(ins) != PURE or uses_carry(ins):
        return False
    dst = ins.ops[0] if ins.ops else None
    if type(dst) is not Reg or dst.comp or dst.v != ins.defs[0] or dst.v in ins.uses:
        return False
    for op in ins.ops[1:]:
        t = type(op)
        if t is Reg:
            if op.comp:
                return False
        elif t is not Imm and t is not Sym:
            return False
    if base == "setp":
        return True
    types = _TYPE.findall(ins.opcode)
    if types == [".pred"]:
        return base in PREDICATE_LOGIC
    return bool(types) and all(_INTEGER.match(t) for t in types) or \
        (base == "mov" and not types)


def recompute_function(fn: Function, chains: bool = True) -> Recomputed | None:
    """The function with its cheap values recomputed at their uses (with ``chains``, together
    with operands not live there: :func:`plan`), or None when nothing qualifies or MaxLive
    would not stay as low: of :func:`recompute_choices`, the one needing fewest registers."""
    best = None
    for got in recompute_choices(fn, chains):
        if got is not None and (best is None or registers_needed(got.max_live_after)
                                < registers_needed(best.max_live_after)):
            best = got
    return best


def recompute_choices(fn: Function, chains: bool = True) -> list[Recomputed | None]:
    """The recomputations worth choosing between, each None when nothing qualifies or MaxLive
    would not stay as low: the plan of :func:`plan`, and, with ``chains`` when more predicates
    are live at once than P0-P6 hold, also the plan that trades predicates for the ranges of
    their 32-bit operands. Which one needs fewer registers can depend on what follows (the
    schedule sinks loads to the ``setp`` they feed only when the ``setp`` stays where it is):
    :func:`ptxalloc.pipeline.pre_passes` chooses after scheduling each."""
    from ..analysis import pressure_of, remember_pressure
    from ..analysis.pressure import Pressure
    from ..analysis.tuples import find_tuples
    with gc_paused():
        made = _plan(fn, chains, False)
        if made.liveness is not None:
            # MaxLive before: the plan's CFG and liveness are those of ``fn`` (pressure_of's)
            old_p = Pressure(made.cfg, made.liveness, find_tuples(fn, made.cfg.instrs))
            remember_pressure(fn, old_p)
        else:
            old_p = pressure_of(fn)
        before = (old_p.max_live, old_p.max_preds)

        def made_into(made: _Plan) -> Recomputed | None:
            if not made.records:
                return None
            new = made.applied or apply_recomputations(fn, made.records, made.dead)
            new_p = pressure_of(new)
            after = (new_p.max_live, new_p.max_preds)
            if after[0] <= before[0] and after[1] <= before[1]:
                return Recomputed(new, made.records, made.dead, before, after)
            return None

        out: list[Recomputed | None] = []
        first = None
        for trade in (False, True) if chains and old_p.max_preds > PRED_REGS else (False,):
            if trade:
                made = _plan(fn, chains, True, setup=made.setup)
            got = made_into(made)
            if made.novel:
                # the greedy plan without shared extensions, where it needs fewer registers
                # (planned only where this one took a step that plan would not; applied and
                # measured only where it plans other records: the same ones make the same
                # function, which cannot need fewer)
                unshared = _plan(fn, chains, trade, share=False, setup=made.setup)
                same = unshared.records == made.records and unshared.dead == made.dead
                alone = None if same else made_into(unshared)
                if alone is not None and (got is None or registers_needed(alone.max_live_after)
                                          < registers_needed(got.max_live_after)):
                    got = alone
            chosen = (got.records, got.dead) if got is not None else None
            if trade and chosen == first:
                break           # the trade changes nothing: one choice
            first = chosen
            out.append(got)
        return out


def registers_needed(max_live: tuple[int, int]) -> int:
    """What the choices between recomputations (and :func:`ptxalloc.pipeline.pre_passes`
    between them scheduled) weigh: MaxLive's general registers plus the predicates beyond
    P0-P6 at the predicate peak, wherever each peak is — every predicate beyond the file costs
    a register *and* save/restore code, so a plan leaving fewer of them counts as cheaper even
    where they are not live at the general peak. Not the floor: that is
    :meth:`ptxalloc.analysis.pressure.Pressure.max_live_with_predicates` (point by point, what
    an allocation keeping every predicate cannot go below; the driver's predicate floor).
    Weighing the plans by the floor instead was measured (docs/decisions.md, "Two measures of
    predicates beyond the file"): Triton's sm80_matmul then keeps the plan without the trade,
    118 registers at K = 255 instead of 120 but 53 values saved around (predicates in general
    registers), and 25 % more spill bytes at K = 24 and 32."""
    return max_live[0] + max(0, max_live[1] - PRED_REGS)


def plan(fn: Function, chains_allowed: bool = True, trade_predicates: bool = False,
         share: bool = True) -> tuple[list[Recompute], list[int]]:
    """The recomputations to make and the definitions they leave dead; with
    ``chains_allowed``, a definition whose operand is not live at a use is recomputed there
    together with that operand's own definition; with ``trade_predicates``, a predicate is
    recomputed at its uses with its 32-bit operands' ranges extended there; with ``share``
    (and chains), a general register read elsewhere too may have its range extended to the
    use, of a chain and an extension the cheaper is taken, and chains are up to
    :data:`MAX_CHAIN` long (else :data:`MAX_CHAIN_UNSHARED`; module docstring)."""
    made = _plan(fn, chains_allowed, trade_predicates, share)
    return made.records, made.dead


@record
class _Plan:
    """:func:`plan`'s result with what it computed on the way, for
    :func:`recompute_choices` not to compute it again: the CFG and liveness of ``fn``, and the
    records applied when checking for unread chain definitions (None when that needed no
    application), and whether it took a step the plan without shared extensions would not
    (``novel``: without one, that plan is this one)."""

    records: list[Recompute]
    dead: list[int]
    cfg: CFG
    liveness: Liveness | None = None
    applied: Function | None = None
    novel: bool = False
    setup: _Setup | None = None


@record
class _Setup:
    """What :func:`_plan` computes of ``fn`` before planning, the same for every plan of it
    (with or without trading predicates or sharing): the CFG, each register's readers, the
    candidates, the available definitions and the liveness (and its per-block lists, filled
    as planning asks)."""

    cfg: CFG
    uses_at: dict
    readers: dict
    define: dict
    available: dict | None = None
    liveness: Liveness | None = None
    live_before: dict | None = None


def _setup(fn: Function) -> _Setup:
    cfg = CFG(fn)
    instrs = cfg.instrs
    regs = fn.regs
    ndefs = [0] * len(regs)
    uses_at: dict[int, list[int]] = {}
    for i, ins in enumerate(instrs):
        for d in ins.defs:
            ndefs[d] += 1
        for u in ins.uses:
            uses_at.setdefault(u, []).append(i)
    # old-ABI ``.reg`` parameters and results: the caller reads a result at ``ret``
    bound = {p.vid for p in fn.params + fn.returns if p.space == "reg" and p.vid >= 0}
    # registers an asynchronous instruction keeps accessing: a copy at a later use could read
    # them in flight (undefined), so a definition reading one is no candidate
    in_flight: set[int] = set()
    for ins in instrs:
        got = isa.async_operands(ins)
        if got is not None:
            in_flight.update(got[0])
    readers = {u: set(at) for u, at in uses_at.items()}
    define: dict[int, int] = {}          # candidate value -> its defining instruction
    for i, ins in enumerate(instrs):
        if in_flight and any(u in in_flight for u in ins.uses):
            continue
        if ins.defs and ndefs[ins.defs[0]] == 1 and ins.defs[0] not in bound and ins.defs[0] in uses_at and cheap(ins) \
                and (regs.vec[ins.defs[0]] == 0) and regs.classes[ins.defs[0]] != RegClass.B128:
            define[ins.defs[0]] = i
    if not define:
        return _Setup(cfg, uses_at, readers, define)
    return _Setup(cfg, uses_at, readers, define, available_before(cfg, instrs, define),
                  Liveness(cfg), {})


def _plan(fn: Function, chains_allowed: bool, trade_predicates: bool = False,
          share: bool = True, setup: _Setup | None = None) -> _Plan:
    setup = setup or _setup(fn)
    cfg, define = setup.cfg, setup.define
    if not define:
        return _Plan([], [], cfg, setup=setup)
    instrs = cfg.instrs
    regs = fn.regs
    max_chain = MAX_CHAIN if share else MAX_CHAIN_UNSHARED
    uses_at, readers = setup.uses_at, setup.readers
    available, liveness, live_before = setup.available, setup.liveness, setup.live_before
    trading = [False]       # a predicate is being planned and may take operands' ranges
    novel = [False]         # a step the plan without shared extensions would not take
    records = []
    dead = []
    pinned = 0          # operands of recomputed definitions: their own definitions must stay
    gone = 0            # values recomputed: their definitions are left out
    accepted = []       # (value, definition, extended operands, records) per value

    def live_at(j: int) -> int:
        blk = cfg.block_of[j]
        lb = live_before.get(blk)
        if lb is None:
            lb = live_before[blk] = liveness.live_before(blk)
        return lb[j - cfg.blocks[blk].first]

    def operand_at(u: int, reader: int, j: int, live: int, depth: int, chain: list[int],
                   extended: list[int]) -> bool:
        """Whether operand ``u`` of instruction ``reader`` can be had at ``j``: recomputed there
        too when ``reader`` is its only reader (it then dies), else live there anyway, else
        recomputed there, else read there with its range extended (``extended`` collects it)
        when ``reader`` is its only reader or it is a general register: :func:`_narrower` and
        :func:`_settled` then bound the widths (module docstring); of a chain and an extension
        the cheaper; appends definitions to copy, innermost first. A value already recomputed
        (its definition left out) can only be copied again."""
        only = readers[u] == {reader}
        extendable = only or (trading[0] and regs.classes[u] == RegClass.GPR32) \
            or (share and not trading[0] and regs.classes[u] in _GENERAL)
        is_live = live >> u & 1 and not gone >> u & 1
        if only and u in define and depth > 0:
            trial, trial_ext = list(chain), list(extended)
            if chain_for(u, j, live, depth, trial, trial_ext) \
                    and (is_live or not cheaper_extended(u, trial_ext, extended)):
                chain[:], extended[:] = trial, trial_ext
                return True
        if gone >> u & 1:
            return False
        if is_live:
            return True
        if not only and depth > 0:
            trial, trial_ext = list(chain), list(extended)
            if chain_for(u, j, live, depth, trial, trial_ext) \
                    and not (extendable and cheaper_extended(u, trial_ext, extended)):
                chain[:], extended[:] = trial, trial_ext
                return True
        if extendable:
            if not only and not trading[0]:
                novel[0] = True
            extended.append(u)
            return True
        return False

    def cheaper_extended(u: int, trial_ext: list[int], extended: list[int]) -> bool:
        """Whether extending ``u``'s range costs no more than extending the ranges a chain
        recomputing it extends (``trial_ext`` beyond ``extended``; :func:`_extension_cost`):
        the chain is then not worth its copies. Not while trading predicates: that plan wants
        a predicate's 32-bit operands rather than the predicate."""
        if trading[0] or not share:
            return False
        added = set(trial_ext) - set(extended)
        if sum(_extension_cost(regs, w, readers) for w in added) \
                < _extension_cost(regs, u, readers):
            return False
        novel[0] = True
        return True

    def chain_for(u: int, j: int, live: int, depth: int, chain: list[int],
                  extended: list[int]) -> bool:
        """Whether candidate ``u`` can be recomputed at ``j`` through at most ``depth``
        definitions (its own included) from operands had there (:func:`operand_at`)."""
        k = define.get(u)
        if k is None or depth == 0 or not available[j] >> u & 1:
            return False
        if depth <= MAX_CHAIN - MAX_CHAIN_UNSHARED:
            novel[0] = True         # deeper than the unshared plan looks
        for w in set(instrs[k].uses):
            if not operand_at(w, k, j, live, depth - 1, chain, extended):
                return False
        if k not in chain:
            chain.append(k)
        return True

    # the latest definitions first: an address is recomputed rather than the offset it reads
    for v, i in sorted(define.items(), key=lambda x: -x[1]):
        if pinned >> v & 1:
            continue
        d = instrs[i]
        operands = 0
        for u in d.uses:
            operands |= 1 << u
        sites = sorted(set(uses_at[v]))
        if len(sites) > MAX_RECOMPUTATIONS:
            continue
        if len(sites) == 1 and sites[0] == i + 1 and cfg.block_of[i] == cfg.block_of[i + 1]:
            continue                    # read right after it is made: nothing to shorten
        chains: list[tuple[int, ...]] = []
        extended: list[int] = []        # narrower operands whose range takes over v's
        trading[0] = trade_predicates and regs.classes[v] == RegClass.PRED
        for j in sites:
            if not available[j] >> v & 1 or uses_carry(instrs[j]) or \
                    not worth_rematerializing(cfg.blocks[cfg.block_of[j]].depth):
                break
            live = live_at(j)
            chain: list[int] = []
            if chains_allowed:
                if not all(operand_at(u, i, j, live, max_chain - 1, chain, extended)
                           for u in set(d.uses)):
                    break
            elif live & operands != operands:
                break
            chains.append(tuple(chain))
        else:
            ext = 0
            for u in extended:
                ext |= 1 << u
            if ext and not _narrower(regs, ext, v, trade_predicates, readers):
                continue
            operands |= ext
            served = []
            for j, chain in zip(sites, chains):
                served.append(Recompute(i, (j,), chain))
                for k in chain:
                    for u in instrs[k].uses:
                        operands |= 1 << u
            accepted.append((v, i, ext, served))
            gone |= 1 << v
            pinned |= operands
    for v, i, ext, served in _settled(regs, accepted, trade_predicates):
        records.extend(served)
        dead.append(i)
    records.sort()
    unread, applied = _unread_chain_definitions(fn, instrs, records, dead)
    dead.extend(unread)
    return _Plan(records, dead, cfg, liveness, applied, novel[0] and share, setup)


def _narrower(regs, extended: int, v: int, trade_predicates: bool = False,
              readers: dict[int, set[int]] | None = None) -> bool:
    """Whether the general registers of the bitset ``extended`` together are narrower than
    ``v``, whose range theirs take over, each counted by :func:`_extension_cost` (its width
    shared among its readers; all of it without ``readers``); for a predicate ``v``, when
    ``trade_predicates`` (more predicates live at once than P0-P6), 32-bit registers are: a
    predicate beyond the file would take a general register anyway, spilled there by ``selp``
    and reloaded by ``setp`` (ptxas's ``ISETP`` right before the guarded access), and the
    operands are often shared (a bound every ``setp`` reads); :func:`recompute_function` (and,
    after scheduling, :func:`ptxalloc.pipeline.pre_passes`) keeps the plan only when it needs
    fewer registers in all than the plan without the trade."""
    if regs.classes[v] == RegClass.PRED:
        return trade_predicates and all(regs.classes[u] == RegClass.GPR32
                                        for u in range(extended.bit_length())
                                        if extended >> u & 1)
    if regs.classes[v] not in _GENERAL:
        return False
    width = 0.0
    for u in set_bits(extended):
        if regs.classes[u] not in _GENERAL:
            return False
        width += _extension_cost(regs, u, readers)
    return width < CLASS_BITS[regs.classes[v]]


def _settled(regs, accepted: list, trade_predicates: bool) -> list:
    """The values of ``accepted`` (``(value, definition, extended operands, records)``) whose
    extended operands, each now shared among the values that really extend it rather than
    among all its readers, still cost less than the value's width (:func:`_narrower`); the
    others are left as written, until every one kept pays. Leaving one out is safe: no record
    reads a value recomputed (``gone``), and its operands stay where they are."""
    kept = list(accepted)
    while True:
        sharers: dict[int, int] = {}
        for _, _, ext, _ in kept:
            for u in set_bits(ext):
                sharers[u] = sharers.get(u, 0) + 1
        now = [a for a in kept if not a[2] or regs.classes[a[0]] == RegClass.PRED
               or _pays(regs, a, sharers)]
        if len(now) == len(kept):
            return kept
        kept = now


def _pays(regs, accepted, sharers: dict[int, int]) -> bool:
    """Whether a value's extended operands cost less than its width, each shared among the
    values extending it; or, recomputed at one use only (its chain moved there, not copied),
    those it alone extends cost no more: it merges its chain's ranges into theirs."""
    v, _, ext, served = accepted
    width = CLASS_BITS[regs.classes[v]]
    cost = sum(CLASS_BITS[regs.classes[u]] / sharers[u] for u in set_bits(ext))
    if cost < width:
        return True
    alone = sum(CLASS_BITS[regs.classes[u]] for u in set_bits(ext) if sharers[u] == 1)
    return len(served) == 1 and alone <= width


def _extension_cost(regs, u: int, readers: dict[int, set[int]] | None) -> float:
    """What extending ``u``'s range to a use costs one recomputation: its width, shared among
    the instructions reading it (a 64-bit base read by 32 address computations, each
    recomputed at its store, is extended once for all 32: ptxas keeps one base live and forms
    each address at its access); whole without ``readers``."""
    n = len(readers.get(u, ())) if readers is not None else 1
    return CLASS_BITS[regs.classes[u]] / max(1, n)


def _unread_chain_definitions(fn: Function, instrs, records: list[Recompute],
                              dead: list[int]) -> tuple[list[int], Function | None]:
    """The definitions copied into chains that nothing reads once the records are applied (an
    offset read only by the address now formed at the access): they are left out too. Also
    returns the function with the records applied and all those definitions left out (None
    when no chain copies a definition)."""
    inner = {k for r in records for k in r.inner} - set(dead)
    if not inner:
        return [], None
    # what the applied records read, without applying them each round: a served instruction
    # reads a copy in place of the value, a copy reads the copies before it in its chain
    served: dict[int, set[int]] = {}
    copies_read = 0
    for r in records:
        v = instrs[r.define].defs[0]
        for u in r.uses:
            served.setdefault(u, set()).add(v)
        made: set[int] = set()
        for k in r.inner + (r.define,):
            for u in instrs[k].uses:
                if u not in made:
                    copies_read |= 1 << u
            made.add(instrs[k].defs[0])
    gone = set(dead)
    while True:
        read = copies_read
        for k, ins in enumerate(instrs):
            if k not in gone:
                skip = served.get(k)
                for u in ins.uses:
                    if skip is None or u not in skip:
                        read |= 1 << u
        unread = {k for k in inner - gone if not read >> instrs[k].defs[0] & 1}
        if not unread:
            return sorted(gone - set(dead)), apply_recomputations(fn, records, sorted(gone))
        gone |= unread


def available_before(cfg: CFG, instrs, define: dict[int, int]) -> dict[int, int]:
    """For each instruction that reads a candidate, the bitset of candidates whose definition is
    available right before it: it reached there on every path with neither the value nor an
    operand redefined since (forward must-dataflow)."""
    kills: dict[int, int] = {}           # register -> candidates its redefinition invalidates
    for v, i in define.items():
        kills[v] = kills.get(v, 0) | 1 << v
        for u in instrs[i].uses:
            kills[u] = kills.get(u, 0) | 1 << v
    gen_at = {i: v for v, i in define.items()}
    universe = 0
    for v in define:
        universe |= 1 << v
    blocks = cfg.blocks

    def transfer(b, avail: int, out: dict[int, int] | None) -> int:
        first = b.first
        for k, ins in enumerate(b.instrs):
            if out is not None:
                out[first + k] = avail
            for d in ins.defs:
                kill = kills.get(d)
                if kill:
                    avail &= ~kill
            v = gen_at.get(first + k)
            if v is not None:
                avail |= 1 << v
        return avail

    n = len(blocks)
    avail_in = [universe] * n
    avail_out = [universe] * n
    avail_in[0] = 0
    for b in blocks:
        if not b.reachable:
            avail_in[b.id] = 0
    changed = True
    order = cfg.rpo
    while changed:
        changed = False
        for bid in order:
            b = blocks[bid]
            if bid != 0:
                x = universe
                for p in b.preds:
                    x &= avail_out[p] if blocks[p].reachable else 0
                avail_in[bid] = x
            out = transfer(b, avail_in[bid], None)
            if out != avail_out[bid]:
                avail_out[bid] = out
                changed = True
    result: dict[int, int] = {}
    for b in blocks:
        transfer(b, avail_in[b.id] if b.reachable else 0, result)
    return result
