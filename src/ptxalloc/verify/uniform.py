"""The checker's own test that what lives in a uniform register is uniform (seed 004 "Register
Classes": UR0-UR62, UP0-UP6; docs/checker.md, "Uniform registers").

A warp has one copy of each uniform register, so a value may live in ``%UR<n>``, ``%URD<n>``
or ``%UP<n>`` only if every thread of the warp holds the same value. The checker does not ask
the allocator's analysis; it confirms this on the allocated function alone with a simple,
conservative rule. Every instruction that writes a uniform register must:

* target sm_75 or later (the header's ``arch``);
* be an integer, logic or address instruction of the uniform datapath — ``mov``, ``add``,
  ``sub``, ``mul``, ``mad``, the bitwise and shift operations, integer ``min``/``max``/``neg``/
  ``abs``, ``setp`` and ``selp``, integer ``cvt``, ``cvta``, the bit-field ones — with no
  floating-point type (``mov``, ``selp`` and loads only move bits), a ``ld.param`` of one of
  the kernel's own parameters, a ``ld.const`` at a symbol or a uniform register, or a
  ``vote.sync``/``redux.sync`` with the full membermask ``0xffffffff``;
* read only uniform registers (its guard included; the data operand of ``vote``/``redux``
  excepted), immediates, symbols and the special registers equal across a warp (``%ctaid``,
  ``%nctaid``, ``%ntid``, the cluster ids, ``%gridid``, the shared-memory sizes);
* sit in a block no divergent branch controls: a guarded branch is divergent unless its guard
  is a ``%UP`` register (and a ``brx.idx`` index a ``%UR``), or, in a kernel, one of its
  targets begins with an unguarded ``ret``/``exit`` (the threads that go there end); a
  divergent branch controls the blocks reachable from it before its immediate
  post-dominator, which this module finds for itself.

A function under the calling convention (the header's ``abi=1``: a ``.func``, or a function
with a ``call``) has no uniform register at all: the convention (seed 003; SPEC) saves and
passes R registers only, so nothing says a callee leaves a caller's uniform registers intact,
and a ``.func`` cannot know that its caller's warp is converged. The allocator never places a
uniform register there; this rule is what makes that safe to prove.

The class limits (UR0-UR62, UP0-UP6, pairs even-aligned) are the name decoder's
(:mod:`.locations`).
"""

from __future__ import annotations

import re

from ..errors import VerificationError
from ..ir import isa
from ..ir.instruction import Instruction
from ..ir.module import Function
from ..ir.operands import Imm, Mem, Reg, Sym, Vec
from .blocks import Blocks

MIN_SM = 75

# these two patterns are texts, compiled by re on first use: only a function with uniform
# registers reads them, and compiling them cost every checker's start-up 0.2 ms (issue 16)
_SPECIAL = (r"%(?:ctaid|nctaid|ntid|clusterid|nclusterid|cluster_ctaid|cluster_nctaid"
                      r"|cluster_ctarank|cluster_nctarank|is_explicit_cluster|gridid"
                      r"|total_smem_size|aggr_smem_size|dynamic_smem_size|envreg\d+)"
                      r"(?:\.[xyzw])?$")
_OPCODES = frozenset(("mov", "add", "sub", "mul", "mad", "and", "or", "xor", "not", "cnot",
                      "shl", "shr", "shf", "lop3", "setp", "selp", "min", "max", "neg", "abs",
                      "cvt", "cvta", "bfe", "bfi", "prmt", "popc", "clz", "brev", "bfind", "ld",
                      "vote", "redux"))
_FLOAT = r"\.(?:f16|f16x2|bf16|bf16x2|f32|f64|tf32|e4m3|e5m2|e2m1|e2m3|e3m2)(?:\.|$)"
_FULL_MASK = frozenset(("0xffffffff", "0xFFFFFFFF", "-1", "4294967295"))


def _sm(arch: str) -> int:
    m = re.match(r"sm_(\d+)", arch)
    return int(m.group(1)) if m else 0


def _postdominators(blocks: Blocks) -> list[int]:
    """Per block its immediate post-dominator, -1 for none (the exit, or an endless loop)."""
    n = blocks.n
    every = set(range(n))
    pdom = [set(every) for _ in range(n)]
    for b in range(n):
        if not blocks.succs[b]:
            pdom[b] = {b}
    changed = True
    while changed:
        changed = False
        for b in range(n - 1, -1, -1):
            if blocks.succs[b]:
                new = set.intersection(*(pdom[s] for s in blocks.succs[b])) | {b}
                if new != pdom[b]:
                    pdom[b] = new
                    changed = True
    out = [-1] * n
    for b in range(n):
        if pdom[b] == every and blocks.succs[b]:
            continue
        strict = pdom[b] - {b}
        for d in strict:
            if pdom[d] == strict:
                out[b] = d
                break
    return out


class UniformCheck:
    """The rule of the module docstring on one allocated function."""

    def __init__(self, fn: Function, stem: str, arch: str, abi: bool = False):
        self.fn = fn
        self.arch = arch
        self.abi = abi
        pat = re.compile(r"%" + re.escape(stem) + r"(?:URD|UR|UP)\d+$")
        self.uniform = {v for v, name in enumerate(fn.regs.names) if pat.match(name)}
        self.what = ("kernel" if fn.is_entry else "function") + f" '{fn.name}'"

    def fail(self, ins: Instruction, reason: str) -> VerificationError:
        text = " ".join(ins.render(self.fn.regs.names.__getitem__).split())
        return VerificationError(f"{self.what}, line {ins.line} '{text}': {reason}")

    def run(self) -> None:
        if not self.uniform:
            return
        fn = self.fn
        instrs = [s for s in fn.body if type(s) is Instruction]
        roles: list[Instruction] = []
        for ins in instrs:
            c = ins.copy_with(list(ins.ops))
            isa.classify(c, fn.regs)
            roles.append(c)
        if self.abi:
            self._refuse_under_convention(instrs, roles)
        blocks = Blocks(fn.body, fn.branch_targets, fn.name)
        block_of = [b for b in range(blocks.n) for _ in range(blocks.count[b])]
        controlled = self._controlled(blocks, instrs, roles)
        for i, ins in enumerate(instrs):
            c = roles[i]
            written = [d for d in c.defs if d in self.uniform]
            if not written:
                continue
            name = fn.regs.names[written[0]]
            if _sm(self.arch) < MIN_SM:
                raise self.fail(ins, f"{name} is a uniform register, which {self.arch} does not "
                                     f"have (sm_{MIN_SM} and later)")
            if block_of[i] in controlled:
                raise self.fail(ins, f"{name} is written under a divergent branch: its value "
                                     f"need not be uniform")
            reason = self._why_not(c)
            if reason:
                raise self.fail(ins, f"{name} is a uniform register but {reason}")

    def _refuse_under_convention(self, instrs: list[Instruction],
                                 roles: list[Instruction]) -> None:
        """Refute the function: it has uniform registers under the calling convention."""
        first = next(((ins, u) for ins, c in zip(instrs, roles)
                      for u in (*c.defs, *c.uses, c.guard) if u in self.uniform), None)
        name = self.fn.regs.names[first[1] if first else min(self.uniform)]
        reason = (f"{name} is a uniform register, but the {self.what} is under the calling "
                  f"convention (abi=1), which saves and passes R registers only: a call may "
                  f"change a uniform register, and a .func's caller need not be converged")
        if first is None:
            raise VerificationError(f"{self.what}: {reason}")
        raise self.fail(first[0], reason)

    def _controlled(self, blocks: Blocks, instrs: list[Instruction],
                    roles: list[Instruction]) -> set[int]:
        """The blocks some divergent branch controls."""
        ipdom = _postdominators(blocks)
        out: set[int] = set()
        for b in range(blocks.n):
            succs = blocks.succs[b]
            if len(succs) < 2 or not blocks.count[b] or not blocks.reachable[b]:
                continue
            term = roles[blocks.first[b] + blocks.count[b] - 1]
            divergent = term.guard >= 0 and term.guard not in self.uniform
            if term.opcode.startswith("brx"):
                divergent = divergent or any(u not in self.uniform for u in term.uses)
            if not divergent:
                continue
            if self.fn.is_entry and any(self._ends_thread(blocks, instrs, s) for s in succs):
                continue
            stop = ipdom[b]
            region: set[int] = set()        # its own walk: another's may have stopped sooner
            work = [s for s in succs if s != stop]
            while work:
                x = work.pop()
                if x in region:
                    continue
                region.add(x)
                work.extend(s for s in blocks.succs[x] if s != stop)
            out |= region
        return out

    @staticmethod
    def _ends_thread(blocks: Blocks, instrs: list[Instruction], b: int) -> bool:
        """Block ``b`` begins with an unguarded ``ret`` or ``exit``."""
        if not blocks.count[b]:
            return False
        ins = instrs[blocks.first[b]]
        return ins.guard < 0 and ins.opcode.split(".")[0] in ("ret", "exit")

    def _why_not(self, ins: Instruction) -> str | None:
        """Why ``ins`` may not write a uniform register (None: it may)."""
        op = ins.opcode
        base = op.split(".", 1)[0]
        if base not in _OPCODES:
            return f"'{base}' is not an instruction of the uniform datapath"
        if base not in ("mov", "selp", "ld") and re.search(_FLOAT, op):
            return "a floating-point instruction does not write uniform registers"
        collective = base in ("vote", "redux")
        if collective and not (".sync" in op and ins.ops and type(ins.ops[-1]) is Imm
                               and ins.ops[-1].text in _FULL_MASK):
            return f"'{base}' without the full membermask 0xffffffff need not be uniform"
        if base == "ld" and not (op.startswith("ld.param") or op.startswith("ld.const")):
            return "only .param and .const loads are uniform"
        if ins.guard >= 0 and ins.guard not in self.uniform:
            return "its guard is not a uniform predicate"
        params = {p.name for p in self.fn.params if p.space == "param"} \
            if self.fn.is_entry else set()
        for x in ins.ops:
            t = type(x)
            if t is Vec:
                return "a register tuple is never uniform"
            if t is Sym and x.text.startswith("%") and not re.match(_SPECIAL, x.text):
                return f"{x.text} differs between the threads of a warp"
            if t is Mem:
                b = x.base
                if base != "ld" or x.rest or x.suffix or b is None:
                    return "it reads memory other than a kernel parameter or constant"
                if op.startswith("ld.param") and not (type(b) is Sym and b.text in params):
                    return "it loads a .param that is not one of the kernel's own parameters"
                if op.startswith("ld.const") and not (
                        (type(b) is Sym and not b.text.startswith("%"))
                        or (type(b) is Reg and b.v in self.uniform)):
                    return "it loads from a constant address that is not uniform"
        if not collective:
            for u in ins.uses:
                if u not in self.uniform:
                    return (f"it reads {self.fn.regs.names[u]}, which is not a uniform "
                            f"register")
        return None


def check_uniform(fn: Function, stem: str, arch: str, abi: bool = False) -> None:
    """Refute (VerificationError) an allocated function whose uniform registers may hold
    values that are not uniform, or that has uniform registers under the calling convention
    (``abi``; the module docstring)."""
    UniformCheck(fn, stem, arch, abi).run()
