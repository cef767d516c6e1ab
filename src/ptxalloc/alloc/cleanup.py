"""After allocation: copy propagation and dead-code elimination over physical registers (seed
002 "Post-Allocation Passes": ``post_allocation_peephole`` and ``post_allocation_dce``; knob
``PostAllocCleanup``; docs/allocated-ptx.md, "Spill code and other inserted instructions").

It runs on the final allocated function, every register placed, before the PTX is written.

* **Copy propagation**, within a basic block: after an unguarded inserted copy ``mov D, S``
  (``//@move``), a later read of D — through any register of D's placement and shape — reads S
  instead while neither D nor S has been written since and no call came between (a call may
  clobber registers it does not name); a copy back, ``mov S, D``, then copies within one
  register and goes. A read inside a vector or register tuple, a call's argument list or a
  ``.param`` access (the convention may bind its register) is left alone. Original copies
  between two registers are not propagated: the checker knows that an inserted copy's two
  ends hold the same values, but not an original copy's (docs/decisions.md, "Copy
  propagation and dead code after allocation").
* **Dead-code elimination**: backward liveness over the register units of the final code
  (a call and the end of a ``.func`` read every register; the end of a kernel none), iterated
  until nothing more dies. A dead unguarded definition of one register is removed: an inserted
  copy, reload, restore, rematerialization or predicate save/restore is simply not emitted;
  an original instruction the ISA's effect table (:mod:`ptxalloc.ir.effects`) calls ``PURE``
  and outside the carry chain becomes a ``//@removed`` line, which the checker reads as a
  definition whose value is held nowhere afterwards (a later read of it is refuted).

Nothing with a side effect, a memory access (plain loads included), a guarded definition, an
instruction of several results, a spill store or a call is removed. A function with an
asynchronous operation (``wgmma``, ``cp.async``, ``tcgen05``, ``mbarrier``, anything ``.async``)
or an instruction the ISA table does not know is left untouched: registers in flight are read
after the instruction that names them.
"""

from __future__ import annotations

from ..analysis.calls import is_call
from ..ir.cfg import CFG
from ..ir.edits import EditKind
from ..ir.effects import PURE, effect_kind, uses_carry
from ..ir.instruction import DEF, USE, Instruction, Removed
from ..ir.module import Function
from ..ir.operands import Args, Mem, Reg, Vec

#: inserted instructions that only define a register and may go when it is dead
_DROPPABLE = frozenset((EditKind.MOVE, EditKind.RELOAD, EditKind.RESTORE, EditKind.REMAT,
                        EditKind.PRELOAD, EditKind.PSPILL))

#: instructions whose register operand the calling convention may bind to one register
_BOUND = ("st.param", "ld.param")

_ASYNC_PREFIXES = ("wgmma", "cp.async", "cp.reduce.async", "tcgen05", "mbarrier")


def untouchable(fn: Function) -> str:
    """Why the pass leaves ``fn`` alone ('' when it does not)."""
    for s in fn.body:
        if type(s) is Instruction:
            if not s.known:
                return f"'{s.opcode}' is not in the ISA table"
            if s.opcode.startswith(_ASYNC_PREFIXES) or ".async" in s.opcode:
                return f"it has an asynchronous operation ('{s.opcode}')"
    return ""


def removable_original(ins: Instruction) -> bool:
    """Whether original instruction ``ins`` may become ``//@removed`` when its result is dead."""
    return (ins.guard < 0 and len(ins.defs) == 1 and bool(ins.ops) and type(ins.ops[0]) is Reg
            and not ins.ops[0].comp and ins.ops[0].v == ins.defs[0]
            and effect_kind(ins) == PURE and not uses_carry(ins))


def _droppable(ins: Instruction, mask_of: dict[int, int]) -> bool:
    if ins.guard >= 0 or len(ins.defs) != 1 or ins.defs[0] not in mask_of:
        return False
    if ins.origin is None:
        return removable_original(ins)
    return ins.origin.kind in _DROPPABLE


class Cleanup:
    """What :func:`clean_up` did."""

    def __init__(self) -> None:
        self.uses_propagated = 0
        self.moves_removed = 0          # inserted //@move copies not emitted
        self.inserted_removed = 0       # other inserted definitions (reloads, remats ...)
        self.original_removed = 0       # original definitions written //@removed

    def as_dict(self) -> dict:
        return {"uses_propagated": self.uses_propagated, "moves_removed": self.moves_removed,
                "inserted_removed": self.inserted_removed,
                "original_removed": self.original_removed}

    def __bool__(self) -> bool:
        return bool(self.uses_propagated or self.moves_removed or self.inserted_removed
                    or self.original_removed)


def clean_up(fn: Function, cfg: CFG, mask_of: dict[int, int], shape_of,
             kept_copies: set[int]) -> tuple[CFG, Cleanup]:
    """Propagate copies and remove dead definitions in ``fn`` (in place); ``mask_of`` gives
    each placed register's units (registers without one are never touched), ``shape_of(v)``
    what makes two registers of one placement interchangeable, ``kept_copies`` the ids of
    original copies written ``//@removed`` later (their source must stay held). Returns the
    CFG after and the figures."""
    done = Cleanup()
    if untouchable(fn):
        return cfg, done
    replaced: dict[int, object] = {}
    for block in cfg.blocks:
        _propagate(block.instrs, mask_of, shape_of, kept_copies, replaced, done)
    if replaced:
        fn.body = [t for t in (replaced.get(id(s), s) for s in fn.body) if t is not None]
        cfg = CFG(fn)
    everything = 0
    for m in mask_of.values():
        everything |= m
    exit_live = everything if fn.kind == "func" else 0
    # per block, per instruction what the rounds read of it, computed once: removing a dead
    # definition changes no other instruction and no edge, and liveness per instruction
    # does not depend on how the instructions are cut into blocks, so the rounds work on
    # these lists and the CFG is built again once, at the end
    blocks = [[_facts(ins, mask_of, everything, exit_live, kept_copies) for ins in b.instrs]
              for b in cfg.blocks]
    succs = [b.succs for b in cfg.blocks]
    summary: list = [None] * len(blocks)
    removed = False
    while True:
        dead = _dead(blocks, succs, summary, exit_live)
        if not dead:
            break
        removed = True
        for bid, facts in enumerate(blocks):
            if any(id(f[0]) in dead for f in facts):
                blocks[bid] = [f for f in facts if id(f[0]) not in dead]
                summary[bid] = None
        body = []
        for s in fn.body:
            if id(s) in dead:
                if s.origin is None:
                    body.append(Removed(s, "dead"))
                    done.original_removed += 1
                elif s.origin.kind is EditKind.MOVE:
                    done.moves_removed += 1
                else:
                    done.inserted_removed += 1
                continue
            body.append(s)
        fn.body = body
    if removed:
        cfg = CFG(fn)
    return cfg, done


def _propagate(instrs: list[Instruction], mask_of: dict[int, int], shape_of,
               kept_copies: set[int], replaced: dict[int, object], done: Cleanup) -> None:
    """Copy propagation through one block's inserted copies (not into the original copies
    within one register, ``kept_copies``: written ``//@removed``, they must stay so)."""
    copies: list[tuple[int, int, int, object]] = []     # (dst mask, src mask, src, shape)
    for ins in instrs:
        if copies:
            if is_call(ins):
                copies = []
            elif not ins.opcode.startswith(_BOUND) and id(ins) not in kept_copies:
                got = _rewrite_uses(ins, copies, mask_of, shape_of)
                if got is not None:
                    new, count = got
                    done.uses_propagated += count
                    if _copy_in_place(new, mask_of):    # a copy back: it changes nothing
                        replaced[id(ins)] = None
                        done.moves_removed += 1
                        continue
                    replaced[id(ins)] = new
                    ins = new
        written = 0
        for d in ins.defs:
            written |= mask_of.get(d, 0)
        if written:
            copies = [c for c in copies if not (c[0] & written or c[1] & written)]
        o = ins.origin
        if (o is not None and o.kind is EditKind.MOVE and ins.is_copy and ins.guard < 0
                and ins.defs[0] in mask_of and ins.uses[0] in mask_of):
            d, s = ins.defs[0], ins.uses[0]
            if mask_of[d] != mask_of[s] and shape_of(d) == shape_of(s):
                copies.append((mask_of[d], mask_of[s], s, shape_of(d)))


def _copy_in_place(ins: Instruction, mask_of: dict[int, int]) -> bool:
    """Whether ``ins`` is an inserted copy within one register."""
    return (ins.origin is not None and ins.origin.kind is EditKind.MOVE and ins.is_copy
            and ins.guard < 0 and mask_of.get(ins.defs[0]) == mask_of.get(ins.uses[0]))


def _rewrite_uses(ins: Instruction, copies, mask_of, shape_of):
    """``(instruction, uses rewritten)`` with reads of a copy's destination reading its
    source, or None when none is."""
    by_mask = {c[0]: c for c in copies}
    count = 0

    def swap(r: Reg):
        nonlocal count
        m = mask_of.get(r.v)
        if m is None or r.comp:
            return r
        c = by_mask.get(m)
        if c is None or shape_of(r.v) != c[3]:
            return r
        count += 1
        return Reg(c[2])
    ops = []
    for op, role in zip(ins.ops, ins.roles):
        t = type(op)
        if role & DEF or t is Vec or t is Args or (t is Mem and op.rest):
            ops.append(op)      # a register tuple (a texture's coordinates) stays whole
        else:
            ops.append(op.map_regs(swap) if role & USE or type(op) is not Reg else op)
    guard = ins.guard
    if guard >= 0:
        g = swap(Reg(guard))
        guard = g.v
    if not count:
        return None
    new = ins.copy_with(ops, guard)
    return new, count


def _facts(ins: Instruction, mask_of: dict[int, int], everything: int, exit_live: int,
           kept_copies: set[int]) -> tuple:
    """What :func:`_dead` reads of ``ins``: the instruction, the units it reads and those it
    writes for certain (:func:`_effect`), and the units of its one result when it may go when
    they are dead (None when it may not)."""
    gen, kill = _effect(ins, mask_of, everything, exit_live)
    droppable = id(ins) not in kept_copies and _droppable(ins, mask_of)
    return ins, gen, kill, mask_of[ins.defs[0]] if droppable else None


def _dead(blocks: list[list[tuple]], succs: list[list[int]], summary: list,
          exit_live: int) -> set[int]:
    """Ids of the droppable instructions whose result no later instruction reads; ``blocks``
    holds each block's instructions as :func:`_facts`, ``summary`` each block's (gen, kill)
    over units, None where not known yet (filled in)."""
    n = len(blocks)
    for bid, facts in enumerate(blocks):
        if summary[bid] is None:
            gen = kill = 0
            for _, g, k, _ in reversed(facts):
                gen = (gen & ~k) | g
                kill |= k
            summary[bid] = (gen, kill)
    live_in = [0] * n
    live_out = [0] * n
    changed = True
    while changed:
        changed = False
        for bid in reversed(range(n)):
            out = exit_live if not succs[bid] else 0
            for s in succs[bid]:
                out |= live_in[s]
            gen, kill = summary[bid]
            inn = gen | (out & ~kill)
            live_out[bid] = out
            if inn != live_in[bid]:
                live_in[bid] = inn
                changed = True
    dead: set[int] = set()
    for bid, facts in enumerate(blocks):
        live = live_out[bid]
        for ins, g, k, result in reversed(facts):
            if result is not None and not result & live:
                dead.add(id(ins))
                continue
            live = (live & ~k) | g
    return dead


def _effect(ins: Instruction, mask_of: dict[int, int], everything: int,
            exit_live: int) -> tuple[int, int]:
    """(units read, units written for certain) by ``ins``: a call reads every register, the
    end of the function those live on exit."""
    if is_call(ins):
        return everything, 0
    gen = 0
    for u in ins.uses:              # a guard included
        gen |= mask_of.get(u, 0)
    if ins.base in ("ret", "exit"):
        return gen | exit_live, 0
    kill = 0
    if ins.guard < 0:
        for d in ins.defs:
            kill |= mask_of.get(d, 0)
    return gen, kill
