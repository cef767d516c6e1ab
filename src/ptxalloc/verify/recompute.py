"""Translation validation of recomputation at the use (issue 13; seed 002 "Rematerialization"):
the rewritten function computes what the original computes. The checker proves a recomputed
allocation (``recompute=1`` in its header) in steps: it rebuilds the rewritten function from the
original and the ``//@recompute`` / ``//@dead`` lines (:func:`ptxalloc.ir.recompute.
apply_recomputations`, mechanical), proves it equivalent here, then proves the allocation
against it (docs/checker.md, "Recomputed allocations").

The argument is the checker's own, an available-expressions one, and reads nothing of the pass
(:mod:`ptxalloc.passes.recompute`). Registers numbered past the original's are *fresh*. The two
bodies are walked together:

* a rewritten instruction that defines a fresh register is *inserted*: it must be
  speculatable (:func:`ptxalloc.ir.effects.speculatable`: pure, off the carry chain, unguarded,
  and not a warp-synchronous ``.aligned`` instruction such as ``movmatrix``, which every thread
  of the warp must execute together and so may not go to a use under a divergent branch),
  define that one whole register, and be the fresh register's only definition (it may read
  fresh registers: a chain ``mul.wide %n1, %idx, 2`` + ``add.s64 %n2, %base, %n1`` recomputes
  an address together with the offset it reads); nor may it read a register an asynchronous
  instruction of the function keeps accessing after it issues
  (:func:`ptxalloc.ir.isa.async_operands`: a ``wgmma`` A fragment or accumulator, a
  ``tcgen05.ld``/``st`` vector), which it could read in flight where the original did not;
* every other rewritten instruction is the next original one, operand for operand, except that
  a read of an original register ``%v`` (an operand, an address register or the guard) may read
  a fresh register ``%n`` of the same type instead — a *substitution*;
* an original instruction the rewritten body lacks is *dead*: it must be pure, and no rewritten
  instruction may read what it defines, nor may it define an old-ABI ``.reg`` result (the
  caller reads those at ``ret``); labels, directives and every other statement stay.

Then on the original with the inserted instructions added (the dead ones kept) a forward
must-dataflow computes, before every instruction, which register holds which expression: an
unguarded pure instruction ``op %x, a, b`` of registers, immediates and fixed symbols with
``%x`` not among its operands makes ``%x`` hold ``(op, a, b)``; any definition of a register
(guarded, partial or not) ends what that register holds and every expression that reads it;
where paths meet only what holds on all of them survives; nothing holds at entry. Two registers
hold the same value right before an instruction when they are the same register, or both hold
expressions of the same operation whose operands are the same immediates and symbols and
registers that, recursively (to :data:`MAX_DEPTH` levels), hold the same value there: each was
computed from its operands' values, unchanged since, so they are equal. A substitution of
``%n`` for ``%v`` is valid when ``%n`` and ``%v`` hold the same value right before the
instruction — ``add %n2, %base, %n1`` after ``mul.wide %n1, %idx, 2`` for ``add %a, %base,
%off`` after ``mul.wide %off, %idx, 2``, say, when neither ``%off`` nor ``%idx`` changed since.
The original with the inserted instructions therefore computes what the original computes (the
inserted ones write only fresh registers) and reads the same values where the rewritten one
reads fresh registers; dropping a dead pure instruction, whose results nobody reads, changes
nothing else.
"""

from __future__ import annotations

from ..errors import VerificationError
from ..ir import isa
from ..ir.cfg import CFG
from ..ir.effects import PURE, effect_kind, speculatable, uses_carry
from ..ir.instruction import COMMENT, Instruction, Label, Raw
from ..ir.module import Function
from ..ir.operands import Imm, Reg, Sym
from ..ir.recompute import DEAD, RECOMPUTE, Recompute, apply_recomputations, parse_entries


def read_records(allocated: Function) -> tuple[list[Recompute], list[int]]:
    """The records and dead instructions of an allocated function's ``//@recompute`` and
    ``//@dead`` lines; raises VerificationError on a malformed one."""
    records: list[Recompute] = []
    dead: list[int] = []
    for s in allocated.body:
        if type(s) is Raw and s.kind == COMMENT:
            for kind in (RECOMPUTE, DEAD):
                if s.text.startswith(kind) and s.text[len(kind):len(kind) + 1] in (" ", "\t"):
                    try:
                        r, d = parse_entries(kind, s.text[len(kind):])
                    except ValueError as e:
                        raise VerificationError(f"function '{allocated.name}', line {s.line}: "
                                                f"{e} in '{s.text}'") from None
                    records += r
                    dead += d
    return records, dead


def recomputed_original(original: Function, allocated: Function) -> Function:
    """The original rewritten as the allocated function's records say, once proven equivalent
    (:func:`check_recomputation`): what the allocation is then proven against."""
    records, dead = read_records(allocated)
    try:
        rewritten = apply_recomputations(original, records, dead)
    except ValueError as e:
        raise VerificationError(f"function '{original.name}': {e}") from None
    check_recomputation(original, rewritten)
    return rewritten


def _expression(ins: Instruction):
    """(destination, expression key, registers read) of an instruction that makes its
    destination hold an expression, else None."""
    if ins.guard >= 0 or len(ins.defs) != 1 or not ins.known or effect_kind(ins) != PURE \
            or uses_carry(ins) or not ins.ops:
        return None
    dst = ins.ops[0]
    if type(dst) is not Reg or dst.comp or dst.v != ins.defs[0] or dst.v in ins.uses:
        return None
    key = [ins.opcode]
    for op in ins.ops[1:]:
        t = type(op)
        if t is Reg and not op.comp:
            key.append(("r", op.v))
        elif t is Imm or t is Sym:
            key.append((t.__name__, op.text))
        else:
            return None
    return dst.v, tuple(key), frozenset(ins.uses)


def check_recomputation(original: Function, rewritten: Function) -> None:
    """Raise VerificationError unless ``rewritten`` computes what ``original`` computes by the
    argument of the module docstring."""
    name = original.name
    oregs, rregs = original.regs, rewritten.regs
    n_orig = len(oregs)
    for attr in ("names", "types", "classes", "vec"):
        if getattr(rregs, attr)[:n_orig] != getattr(oregs, attr):
            raise VerificationError(f"function '{name}': the recomputed function's registers "
                                    f"are not the original's")
    rnames = rregs.names

    def where(ins: Instruction) -> str:
        return f"function '{name}', line {ins.line} '{ins.render(rnames.__getitem__)}'"

    fresh_defs: dict[int, int] = {}
    # old-ABI ``.reg`` results are read by the caller at ``ret``: never dead
    read_in_rewritten = 0
    for p in original.returns:
        if p.space == "reg" and p.vid >= 0:
            read_in_rewritten |= 1 << p.vid
    for s in rewritten.body:
        if type(s) is Instruction:
            for d in s.defs:
                if d >= n_orig:
                    fresh_defs[d] = fresh_defs.get(d, 0) + 1
            for u in s.uses:
                read_in_rewritten |= 1 << u
    in_flight: set[int] = set()
    for s in original.body:
        if type(s) is Instruction:
            got = isa.async_operands(s)
            if got is not None:
                in_flight.update(got[0])
    combined: list = []
    checks: dict[int, list[tuple[int, int]]] = {}    # id(instruction) -> substitutions
    obody, rbody = original.body, rewritten.body
    i = k = 0
    while i < len(obody) or k < len(rbody):
        r = rbody[k] if k < len(rbody) else None
        o = obody[i] if i < len(obody) else None
        if type(r) is Instruction and any(d >= n_orig for d in r.defs):
            _check_inserted(r, n_orig, fresh_defs, where)
            if any(u in in_flight for u in r.uses):
                raise VerificationError(f"{where(r)}: an inserted instruction reads a register "
                                        f"an asynchronous instruction keeps accessing (it "
                                        f"could be in flight here)")
            combined.append(r)
            k += 1
            continue
        if type(o) is Instruction:
            # the same statement object (an instruction no record touched) reads what it read
            subs = None if type(r) is not Instruction else [] if r is o else \
                _substitutions(o, r, n_orig, rregs)
            if subs is not None:
                if subs:
                    checks[id(r)] = subs
                combined.append(r)
                i += 1
                k += 1
                continue
            if effect_kind(o) != PURE or uses_carry(o) or not o.known \
                    or any(read_in_rewritten >> d & 1 for d in o.defs):
                what = (f"line {r.line} '{r.render(rnames.__getitem__)}'" if r is not None
                        else "the end of the function")
                raise VerificationError(
                    f"function '{name}': the recomputed function has {what} where the original "
                    f"has line {o.line} '{o.render(oregs.names.__getitem__)}', which is not a "
                    f"dead pure instruction that may be left out")
            combined.append(o)
            i += 1
            continue
        if o is None or r is None or type(r) is Instruction or not _same_statement(o, r):
            line = getattr(r if r is not None else o, "line", 0)
            raise VerificationError(f"function '{name}', line {line}: the recomputed function "
                                    f"does not keep the original's labels and statements")
        combined.append(r)
        i += 1
        k += 1
    if checks:
        _prove_substitutions(rewritten, combined, checks, where)


def _check_inserted(r: Instruction, n_orig: int, fresh_defs: dict[int, int], where) -> None:
    e = _expression(r)
    if e is None or not speculatable(r) or e[0] < n_orig or fresh_defs.get(e[0]) != 1:
        raise VerificationError(f"{where(r)}: an inserted instruction must be a pure, unguarded "
                                f"computation, not warp-synchronous, that is the only "
                                f"definition of one fresh register")


def _substitutions(o: Instruction, r: Instruction, n_orig: int, rregs):
    """The (original register, fresh register) pairs where ``r`` reads a fresh register in
    place of ``o``'s; None when ``r`` is not ``o`` with such substitutions."""
    if o.opcode != r.opcode or o.guard_neg != r.guard_neg or len(o.ops) != len(r.ops) \
            or o.defs != r.defs:
        return None
    subs = []

    def same_reg(a: int, b: int) -> bool:
        if a == b:
            return True
        if b >= n_orig and a < n_orig and rregs.types[a] == rregs.types[b] \
                and rregs.vec[a] == rregs.vec[b]:
            subs.append((a, b))
            return True
        return False

    if (o.guard < 0) != (r.guard < 0) or (o.guard >= 0 and not same_reg(o.guard, r.guard)):
        return None
    mask = "%\x00".__add__
    for x, y in zip(o.ops, r.ops):
        if type(x) is not type(y):
            return None
        if x.render(lambda v: mask("")) != y.render(lambda v: mask("")):
            return None
        for a, b in zip(x.regs(), y.regs()):
            if a.comp != b.comp or not same_reg(a.v, b.v):
                return None
    if any(b in r.defs for _, b in subs):
        return None
    return subs


def _same_statement(o, r) -> bool:
    if type(o) is not type(r):
        return False
    if type(o) is Label:
        return o.name == r.name
    if type(o) is Raw:
        return o.kind == r.kind and o.text == r.text
    return False


def _prove_substitutions(rewritten: Function, combined: list, checks, where) -> None:
    """The forward must-dataflow of the module docstring over the combined program; every
    substitution's two registers must hold the same value."""
    fn = rewritten.copy()
    fn.body = combined
    cfg = CFG(fn)
    instrs = cfg.instrs
    # only the registers a substitution names, and transitively the operands of what defines
    # them, matter; others' expressions are not tracked (nor found: an expression's
    # destination is its instruction's one definition, so only the instructions defining one
    # tracked register alone are looked at)
    sole_definer: dict[int, list[int]] = {}      # register -> instructions defining it alone
    for i, ins in enumerate(instrs):
        if len(ins.defs) == 1:
            sole_definer.setdefault(ins.defs[0], []).append(i)
    exprs: list = [None] * len(instrs)
    wanted: set[int] = set()
    work = [x for subs in checks.values() for pair in subs for x in pair]
    while work:
        x = work.pop()
        if x not in wanted:
            wanted.add(x)
            for i in sole_definer.get(x, ()):
                e = exprs[i] = _expression(instrs[i])
                if e is not None:
                    work.extend(e[2])
    readers: dict[int, set[int]] = {}        # register -> tracked registers whose expression reads it
    for e in exprs:
        if e is not None:
            for u in e[2]:
                readers.setdefault(u, set()).add(e[0])

    def step(ins: Instruction, e, state: dict) -> None:
        for d in ins.defs:
            state.pop(d, None)
            for x in readers.get(d, ()):
                held = state.get(x)
                if held is not None and d in held[1]:
                    del state[x]
        if e is not None and e[0] in wanted:
            state[e[0]] = (e[1], e[2])

    blocks = cfg.blocks
    n = len(blocks)
    # per block, the instructions ``step`` changes a state at: those defining a tracked
    # register or one a tracked expression reads (the others leave every state as it is)
    touched = wanted | readers.keys()
    apart = touched.isdisjoint
    acting = [[(ins, exprs[b.first + k]) for k, ins in enumerate(b.instrs)
               if ins.defs and not apart(ins.defs)] for b in blocks]
    state_in: list[dict | None] = [None] * n
    state_out: list[dict | None] = [None] * n
    state_in[0] = {}
    # passes in reverse post-order over the blocks whose predecessors' states changed since
    # they were last visited (all at first): the same fixed point as passes over every block
    # (the steps are monotone), with fewer meets
    pending = set(cfg.rpo)
    while pending:
        for bid in cfg.rpo:
            if bid not in pending:
                continue
            pending.discard(bid)
            b = blocks[bid]
            if bid != 0 or b.preds:
                merged = None if bid != 0 else {}
                for p in b.preds:
                    out = state_out[p]
                    if out is None:
                        continue            # not yet reached: the top of the lattice
                    if merged is None:
                        merged = dict(out)
                    elif merged != out:        # (equal states, the usual case, meet as they are)
                        merged = {x: h for x, h in merged.items() if out.get(x) == h}
                state_in[bid] = merged if merged is not None else None
            st = state_in[bid]
            if st is None:
                continue
            st = dict(st)
            for ins, e in acting[bid]:
                step(ins, e, st)
            if st != state_out[bid]:
                state_out[bid] = st
                pending.update(b.succs)
    for b in blocks:
        st = state_in[b.id] if b.reachable else None
        st = dict(st) if st is not None else {}
        for k, ins in enumerate(b.instrs):
            subs = checks.get(id(ins))
            if subs:
                for a, f in subs:
                    if not _same_value(a, f, st, MAX_DEPTH):
                        raise VerificationError(
                            f"{where(ins)}: reads {rewritten.regs.names[f]} in place of "
                            f"{rewritten.regs.names[a]}, but the two do not hold the same "
                            f"computation on every path here (an operand or the value is "
                            f"redefined, or the definition does not reach)")
            step(ins, exprs[b.first + k], st)


#: How deep :func:`_same_value` follows operands (a recomputed chain is at most this long).
MAX_DEPTH = 6


def _same_value(a: int, b: int, state: dict, depth: int) -> bool:
    """Whether registers ``a`` and ``b`` hold the same value here: the same register, or both
    hold the same operation of operands that hold the same values (to ``depth`` levels)."""
    if a == b:
        return True
    x, y = state.get(a), state.get(b)
    if x is None or y is None or depth == 0:
        return False
    if x == y:
        return True
    kx, ky = x[0], y[0]
    if len(kx) != len(ky) or kx[0] != ky[0]:
        return False
    for p, q in zip(kx[1:], ky[1:]):
        if p == q:
            continue
        if p[0] != "r" or q[0] != "r" or not _same_value(p[1], q[1], state, depth - 1):
            return False
    return True
