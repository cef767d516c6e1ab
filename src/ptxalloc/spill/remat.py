"""Rematerialization: recompute a value instead of reloading it (seed 002 "Rematerialization —
Recompute vs. Reload"; SPEC section 5).

A spilled value is rematerialized when it has exactly one definition, unguarded, that reads no
register and has no side effect — a constant (``mov.u32 %r1, 5``), a special register that
stays fixed for the thread (``%tid``, ``%ntid``, ``%ctaid``, ``%nctaid``, ``%laneid``,
``%gridid``, ``%lanemask_*``), a symbol's address (``mov.u64 %rd1, arr``, ``cvta`` of a
symbol), or, in a kernel, a load of one of its own parameters (``ld.param.u64 %rd1,
[k_param_0]``: kernel parameters are read-only, so the value never changes; ptxas folds such a
load into a constant-bank operand, ``c[0x0][0x160]``) — and recomputing it is cheaper: ``compute_cost < 0.75 x load_cost``, with a compute
cost of 1 cycle for these moves and parameter loads and a load cost of 10 cycles outside loops and 4 inside them
(seed 002 ``estimate_cache_latency``), so every such value qualifies.

Definitions that read registers (``add %r2, %r1, 4``, shifts, masks) are not rematerialized: the
source would have to be available, unchanged, at every use, which PTX that reuses registers
does not guarantee; reloading them is always correct. docs/decisions.md records this. A
``.func``'s parameters are not rematerialized: the function may store to them (``st.param``)
and the calling convention binds their loads to registers.

A predicate is also recomputed, from registers, where its definition is a ``setp`` of general
registers and immediates (one destination, unguarded, the only definition of the predicate)
and at each of its uses every register operand is live before the use and the definition is
*available* there (it reached the use on every path with no operand redefined since:
:func:`ptxalloc.passes.recompute.available_before`): the copy of the ``setp`` before the use
reads the values the definition read and lengthens no range, and no general register holds the
predicate (seed 002's rule: one instruction against a reload). Only where more predicates are
live at once than P0-P6 hold (:func:`predicate_remat_candidates`); the checker proves each
copy (docs/checker.md, "Predicates recomputed from registers").

The knob ``RematParamLoads`` (:mod:`ptxalloc.alloc.knobs`, default 1) switches parameter loads
off; the checker proves every recomputation (``//@remat``, docs/checker.md).
"""

from __future__ import annotations

from ..ir.effects import FIXED_SPECIAL
from ..ir.instruction import Instruction
from ..ir.module import Function
from ..ir.operands import Imm, Mem, Reg, Sym

COMPUTE_COST = 1.0
REMAT_FACTOR = 0.75
LOAD_COST_OUTSIDE_LOOPS = 10.0
LOAD_COST_IN_LOOPS = 4.0



def _pure_source(op) -> bool:
    if type(op) is Imm:
        return True
    if type(op) is Sym:
        return bool(FIXED_SPECIAL.match(op.text)) or not op.text.startswith("%")
    return False


def kernel_param_names(fn: Function) -> frozenset[str]:
    """The ``.param`` parameters of a kernel (read-only for its whole run); none for a
    ``.func``."""
    if not fn.is_entry:
        return frozenset()
    return frozenset(p.name for p in fn.params if p.space == "param")


def _kernel_param_load(ins: Instruction, params: frozenset[str]) -> bool:
    """``ld.param... %r, [p]`` or ``[p+imm]`` of one of the kernel's own parameters."""
    if not params or not ins.opcode.startswith("ld.param"):
        return False
    src = ins.ops[1]
    return (type(src) is Mem and type(src.base) is Sym and src.base.text in params
            and not src.rest and not src.suffix)


def remat_candidates(fn: Function, instrs: list[Instruction],
                     param_loads: bool = True) -> dict[int, Instruction]:
    """Registers that can be recomputed, each with its single defining instruction; with
    ``param_loads``, a kernel's loads of its own parameters too."""
    params = kernel_param_names(fn) if param_loads else frozenset()
    first: dict[int, Instruction] = {}     # register -> its first definition
    several: set[int] = set()               # registers defined more than once
    for ins in instrs:
        for d in ins.defs:
            if d in first:
                several.add(d)
            else:
                first[d] = ins
    out = {}
    for v, ins in first.items():
        if v in several:
            continue
        if ins.guard >= 0 or len(ins.defs) != 1 or len(ins.ops) != 2 or ins.uses:
            continue
        dst, src = ins.ops
        if type(dst) is not Reg or dst.comp:
            continue
        base = ins.opcode.split(".", 1)[0]
        if not (base in ("mov", "cvta") and _pure_source(src)
                or _kernel_param_load(ins, params)):
            continue
        out[v] = ins
    return out


def predicate_remat_candidates(cfg, liveness, origin_of: dict[int, int],
                               avoid: set[int]) -> dict[int, Instruction]:
    """Predicates recomputable from registers at every use (module docstring), each with its
    ``setp``; as predicate and operands only registers that are still whole: no register of
    the function stands for one of them (``origin_of``: a spill temporary or a legalization
    copy, whose definitions replace some of the original's, so that the definitions seen
    here would not be the checker's), and none of ``avoid`` (registers of asynchronous
    instructions, temporaries)."""
    from ..ir.registers import RegClass
    from ..passes.recompute import available_before
    instrs = cfg.instrs
    classes = cfg.fn.regs.classes
    avoid = set(avoid)
    avoid.update(o for t, o in origin_of.items() if t != o)
    ndefs: dict[int, int] = {}
    for ins in instrs:
        for d in ins.defs:
            ndefs[d] = ndefs.get(d, 0) + 1
    define: dict[int, int] = {}
    for i, ins in enumerate(instrs):
        if ins.base != "setp" or ins.guard >= 0 or len(ins.defs) != 1 or ins.origin is not None:
            continue
        p = ins.defs[0]
        dst = ins.ops[0] if ins.ops else None
        if (classes[p] != RegClass.PRED or ndefs[p] != 1 or type(dst) is not Reg or dst.comp
                or origin_of.get(p, p) != p or p in avoid):
            continue
        operands = ins.ops[1:]
        if not ins.uses or not all(
                type(x) is Imm or (type(x) is Reg and not x.comp and x.v != p
                                   and classes[x.v] != RegClass.PRED
                                   and origin_of.get(x.v, x.v) == x.v and x.v not in avoid)
                for x in operands):
            continue
        define[p] = i
    if not define:
        return {}
    available = available_before(cfg, instrs, define)    # none in unreachable blocks
    out = dict(define)
    for b in cfg.blocks:
        before = None
        for k, ins in enumerate(b.instrs):
            for u in ins.uses:
                if u not in out:
                    continue
                if before is None:
                    before = liveness.live_before(b.id)
                live = before[k]
                if not available.get(b.first + k, 0) >> u & 1 or any(
                        not live >> x & 1 for x in instrs[define[u]].uses):
                    del out[u]
    return {p: instrs[i] for p, i in out.items()}


def worth_rematerializing(loop_depth: int) -> bool:
    load = LOAD_COST_IN_LOOPS if loop_depth > 0 else LOAD_COST_OUTSIDE_LOOPS
    return COMPUTE_COST < REMAT_FACTOR * load
