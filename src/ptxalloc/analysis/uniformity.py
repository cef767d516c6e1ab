"""Uniformity: which registers hold one value for every thread of a warp (seed 004 "Register
Classes": the uniform classes UR0-UR62 and UP0-UP6, sm_75 and later; docs/decisions.md,
"Uniform registers").

A register is *uniform* when every thread of the warp that reads it reads the same value. The
analysis is a greatest fixpoint, conservative where unsure (divergent):

* a register is uniform only when every one of its definitions is an instruction the *rule*
  accepts, unguarded or guarded by a uniform predicate, reading only uniform registers (except
  the warp-collective ``vote``/``redux`` with a full membermask, whose result is uniform by the
  PTX ISA whatever they read), uniform special registers (``%ctaid``, ``%nctaid``, ``%ntid``,
  the cluster ids, ``%gridid``, the shared-memory sizes) and symbols; a register read before any
  definition on some path, or never defined, is divergent;
* and every definition sits in a *control-uniform* block: one outside the influence region of
  every divergent branch — the blocks reachable from the branch before its immediate
  post-dominator, where threads may be apart (sync dependence: a value defined differently on
  two sides of a divergent branch, or inside a loop whose exit is divergent, is divergent after
  the join, for its definitions lie in the region). A branch is divergent when it is guarded by
  a predicate that is not uniform (``brx.idx`` also when its index is not); a branch one of
  whose targets is a block that ends the thread at once (``ret``/``exit`` in a kernel) is not:
  the threads that take it are gone, and those left all go on together.

Two rules say which instructions can produce a uniform value from uniform inputs:
:data:`VALUE_RULE` (any pure computation, floating point included: the share of values that
*are* uniform) and :data:`DATAPATH_RULE` (what the SASS uniform datapath executes: integer,
logic and address arithmetic, moves and selects, integer compares, kernel-parameter and
constant loads, ``vote``/``redux``; no floating point and no other memory) — the rule for
registers that may live in UR/UP. Loads other than ``.param`` (in a kernel) and ``.const`` at
uniform addresses, atomics, shuffles, textures and tensor instructions are never uniform.
"""

from __future__ import annotations

import re
from typing import Callable

from ..ir.cfg import CFG
from ..ir.instruction import Instruction
from ..ir.module import Function
from ..ir.operands import Imm, Mem, Reg, Sym, Vec
from ..util import bits
from .liveness import Liveness

#: Special registers equal in every thread of a warp (and fixed for the thread's life).
UNIFORM_SPECIAL = re.compile(
    r"%(?:ctaid|nctaid|ntid|clusterid|nclusterid|cluster_ctaid|cluster_nctaid|cluster_ctarank"
    r"|cluster_nctarank|is_explicit_cluster|gridid|total_smem_size|aggr_smem_size"
    r"|dynamic_smem_size|envreg\d+)(?:\.[xyzw])?$")

#: Opcode bases the uniform datapath executes (integer, logic, address arithmetic).
_DATAPATH_BASES = frozenset((
    "mov", "add", "sub", "mul", "mad", "and", "or", "xor", "not", "cnot", "shl", "shr", "shf",
    "lop3", "setp", "selp", "min", "max", "neg", "abs", "cvt", "cvta", "bfe", "bfi", "prmt",
    "popc", "clz", "brev", "bfind", "ld", "vote", "redux"))

#: Further pure opcode bases whose result is uniform when their inputs are (floating point).
_VALUE_BASES = _DATAPATH_BASES | frozenset((
    "fma", "div", "rem", "rcp", "sqrt", "rsqrt", "sin", "cos", "lg2", "ex2", "tanh", "copysign",
    "mul24", "mad24", "sad", "set", "slct", "testp", "dp4a", "dp2a", "fns"))

#: Bases that only move bits (their type suffix may be a float type on the datapath).
_BIT_MOVES = frozenset(("mov", "selp", "ld"))

_FLOAT_TYPE = re.compile(r"\.(?:f16|f16x2|bf16|bf16x2|f32|f64|tf32|e4m3|e5m2|e2m1|e2m3|e3m2)"
                         r"(?:\.|$)")
_FULL_MASK = frozenset(("0xffffffff", "0xFFFFFFFF", "-1", "4294967295"))


def _base(ins: Instruction) -> str:
    return ins.opcode.split(".", 1)[0]


def _collective(ins: Instruction) -> bool:
    """``vote.sync``/``redux.sync`` over the whole warp (an immediate full membermask): every
    participating thread gets the same result."""
    return (_base(ins) in ("vote", "redux") and ".sync" in ins.opcode and len(ins.ops) >= 2
            and type(ins.ops[-1]) is Imm and ins.ops[-1].text in _FULL_MASK)


def _uniform_address(ins: Instruction, mem: Mem, kernel_params: frozenset[str],
                     uniform: int) -> bool:
    """``ld.param`` of a kernel's own parameter, or ``ld.const`` at a symbol or a uniform
    register (plus a constant offset)."""
    if mem.rest or mem.suffix or mem.base is None:
        return False
    space = ins.opcode.split(".")[1] if "." in ins.opcode else ""
    base = mem.base
    if space == "param":
        return type(base) is Sym and base.text in kernel_params
    if space == "const":
        if type(base) is Sym:
            return not base.text.startswith("%")
        return type(base) is Reg and bool(uniform >> base.v & 1)
    return False


def _rule(bases: frozenset[str], datapath: bool):
    def accepts(ins: Instruction, uniform: int, kernel_params: frozenset[str]) -> bool:
        """Whether ``ins`` writes uniform results when ``uniform`` holds its register inputs."""
        base = _base(ins)
        if base not in bases or not ins.known:
            return False
        if datapath and base not in _BIT_MOVES and _FLOAT_TYPE.search(ins.opcode):
            return False
        if ins.guard >= 0 and not uniform >> ins.guard & 1:
            return False
        collective = base in ("vote", "redux")
        if collective and not _collective(ins):
            return False
        if base == "ld" and not (ins.opcode.startswith("ld.param")
                                 or ins.opcode.startswith("ld.const")):
            return False
        for op in ins.ops:
            t = type(op)
            if t is Vec:
                return False
            if t is Sym and op.text.startswith("%") and not UNIFORM_SPECIAL.match(op.text):
                return False
            if t is Mem:
                if base != "ld" or not _uniform_address(ins, op, kernel_params, uniform):
                    return False
        if not collective:
            for u in ins.uses:
                if not uniform >> u & 1:
                    return False
        return True
    return accepts


Rule = Callable[[Instruction, int, frozenset], bool]
VALUE_RULE: Rule = _rule(_VALUE_BASES, datapath=False)
DATAPATH_RULE: Rule = _rule(_DATAPATH_BASES, datapath=True)


def _terminal(cfg: CFG, bid: int) -> bool:
    """A block whose first instruction ends the thread unconditionally (in a kernel)."""
    ins = cfg.blocks[bid].instrs
    return bool(ins) and ins[0].guard < 0 and _base(ins[0]) in ("ret", "exit")


def immediate_postdominators(cfg: CFG) -> list[int]:
    """Per block, its immediate post-dominator (-1: the function's exit, or none)."""
    blocks = cfg.blocks
    n = len(blocks)
    full = (1 << n) - 1
    pdom = [full] * n
    exits = [b.id for b in blocks if not b.succs]
    for e in exits:
        pdom[e] = 1 << e
    changed = True
    while changed:
        changed = False
        for b in reversed(blocks):
            if not b.succs:
                continue
            p = full
            for s in b.succs:
                p &= pdom[s]
            p |= 1 << b.id
            if p != pdom[b.id]:
                pdom[b.id] = p
                changed = True
    ipdom = [-1] * n
    for b in range(n):
        if pdom[b] == full and blocks[b].succs:
            continue                        # reaches no exit (an endless loop): none
        strict = pdom[b] & ~(1 << b)
        for d in bits(strict):
            if pdom[d] == strict:
                ipdom[b] = d
                break
    return ipdom


def divergent_blocks(cfg: CFG, uniform: int, ipdom: list[int] | None = None) -> int:
    """The bitset of blocks inside the influence region of some divergent branch, the
    registers ``uniform`` taken as uniform (the module docstring)."""
    if ipdom is None:
        ipdom = immediate_postdominators(cfg)
    kernel = cfg.fn.is_entry
    out = 0
    for b in cfg.blocks:
        if len(b.succs) < 2 or not b.instrs or not b.reachable:
            continue
        term = b.instrs[-1]
        divergent = term.guard >= 0 and not uniform >> term.guard & 1
        if _base(term) == "brx":
            divergent = divergent or any(not uniform >> u & 1 for u in term.uses)
        if not divergent or (kernel and any(_terminal(cfg, s) for s in b.succs)):
            continue
        stop = ipdom[b.id]
        region = 0                  # this branch's own walk: another's may have stopped sooner
        work = [s for s in b.succs if s != stop]
        while work:
            x = work.pop()
            if region >> x & 1:
                continue
            region |= 1 << x
            work.extend(s for s in cfg.blocks[x].succs if s != stop and not region >> s & 1)
        out |= region
    return out


def uniform_registers(fn: Function, cfg: CFG | None = None, rule: Rule = VALUE_RULE,
                      candidates: int | None = None) -> int:
    """The bitset of ``fn``'s registers found uniform under ``rule`` (:data:`VALUE_RULE` or
    :data:`DATAPATH_RULE`), starting from ``candidates`` (every register by default): the
    greatest fixpoint of the module docstring's conditions."""
    cfg = cfg or CFG(fn)
    n = len(fn.regs)
    defs_of: list[list[int]] = [[] for _ in range(n)]
    users_of: list[list[int]] = [[] for _ in range(n)]
    instrs = cfg.instrs
    for i, ins in enumerate(instrs):
        for d in ins.defs:
            defs_of[d].append(i)
        for u in ins.uses:
            users_of[u].append(i)
        if ins.guard >= 0:
            users_of[ins.guard].append(i)
    defined = 0
    for v in range(n):
        if defs_of[v]:
            defined |= 1 << v
    uniform = (((1 << n) - 1) if candidates is None else candidates) & defined
    uniform &= ~Liveness(cfg).entry_live
    kernel_params = frozenset(p.name for p in fn.params if p.space == "param") \
        if fn.is_entry else frozenset()
    block_of = cfg.block_of
    ipdom = immediate_postdominators(cfg)
    branch_preds = 0
    for b in cfg.blocks:
        if len(b.succs) > 1 and b.instrs:
            term = b.instrs[-1]
            if term.guard >= 0:
                branch_preds |= 1 << term.guard
            if _base(term) == "brx":
                for u in term.uses:
                    branch_preds |= 1 << u
    while True:
        divergent = divergent_blocks(cfg, uniform, ipdom)
        work = list(range(len(instrs)))
        lost_branch = False
        while work:
            i = work.pop()
            ins = instrs[i]
            live_defs = [d for d in ins.defs if uniform >> d & 1]
            if not live_defs:
                continue
            if divergent >> block_of[i] & 1 or not rule(ins, uniform, kernel_params):
                for d in live_defs:
                    uniform &= ~(1 << d)
                    lost_branch = lost_branch or bool(branch_preds >> d & 1)
                    work.extend(users_of[d])
        if not lost_branch:
            return uniform
