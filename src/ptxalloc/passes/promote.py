"""Function-local ``.local`` arrays promoted to registers before allocation: ptxas's
ConvertMemoryToRegisterOrUniform pre-pass (seed 004 "Pre-Allocation and Mem-to-Reg",
``sub_910840``, with its 64 KB cap; issue 17). Uniform registers are another pass's business:
this one promotes to ordinary registers.

An array declared in the function body (``.local .align 4 .b8 __local_depot0[16];``, also the
older ``.local .u32 name;``), of at most 64 KB, is promoted when its address never escapes and
every access is at a constant offset with a consistent width (an array declared in a nested
``{ }`` scope under a name the module also declares is left alone: outside the scope the name is
the module's variable):

* its *address registers* are the registers derived from its name by ``mov d, NAME``,
  ``cvta.local d, NAME`` (a generic address), ``mov d, a``, ``cvta.local d, a``,
  ``add d, a, IMM`` / ``add d, IMM, a`` and ``sub d, a, IMM`` from another address register
  ``a``: each unguarded, the only definition of ``d`` in the function, and in a block that
  dominates every use of ``d`` (earlier in the block when they share one), so ``d`` holds one
  known address wherever it is read;
* every read of an address register, and every mention of the name, is one of those
  derivations or the address of a plain scalar access: ``ld.local``/``st.local`` through a
  ``.local`` address, or ``ld``/``st`` without a state space through a generic one (nvcc
  ``-G`` code addresses its depot through ``%SP = cvta.local(%SPL)``), with no other qualifier,
  a 16-, 32- or 64-bit type, a data register of exactly that width (or an immediate stored) and
  the address register nowhere else in the instruction. Anything else — an address stored,
  passed to a call, compared, offset by a register, a vector or 8-bit access — leaves the
  array in memory;
* the accesses' byte ranges lie in the array, are aligned to their width, and two that overlap
  are the same range: each range is a *slot*.

Each slot becomes a fresh register (``.b16``/``.b32``/``.b64``); each load becomes
``mov.TYPE d, slot`` and each store ``mov.TYPE slot, src`` (TYPE the access's own; the guard
kept). The address arithmetic is then dead — every read of an address register was an
access or another derivation — and is removed, and so is the declaration unless the module
names the array outside the function (nvcc ``-G`` debug information does: ``.b64
__local_depot0`` in ``.debug_info``), since ptxas reserves the stack frame for a declared array
whether it is used or not.

A load of a slot that no store reaches reads uninitialized local memory: an unspecified
value. Promoted, it reads a register that no definition reaches, which the allocator treats as
defined at entry (SPEC section 3, LLVM's IMPLICIT_DEF): it gets a register of its own, live
from the function's entry, and every such read sees the same unspecified value, as repeated
reads of untouched memory would. Nothing is invented for it.

:mod:`ptxalloc.verify.promote` re-derives every condition and rewrite independently. Switch:
the knob ``promote`` (``--knob promote=1``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..ir import isa
from ..ir.cfg import CFG
from ..ir.instruction import DIRECTIVE, SCOPE_CLOSE, SCOPE_OPEN, Instruction, Raw
from ..ir.module import Function
from ..ir.operands import Imm, Mem, Reg, Sym
from ..ir.registers import CLASS_BITS, class_of_type

MAX_PROMOTED_BYTES = 64 * 1024      # seed 004: is_promotable caps the sum at 0x10000

_DECL = re.compile(r"\.local\s+(?:\.align\s+(\d+)\s+)?\.([a-z]+(\d+))\s+([\w$%.]+)\s*"
                   r"(?:\[\s*(\d+)\s*\])?\s*;?\s*$")
_ACCESS = re.compile(r"(ld|st)(\.local)?\.([bsuf])(16|32|64)$")
_ARITH = re.compile(r"(add|sub)\.[su](32|64)$")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_INT = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)[uU]?$")


@dataclass
class Promoted:
    """A function with some ``.local`` arrays promoted: ``arrays`` their names, ``bytes`` their
    total size, ``slots`` the registers added ({array: [(offset, bits)]}), ``accesses`` the
    loads and stores replaced, ``frame_bytes`` the bytes of the declarations removed."""

    function: Function
    arrays: list[str] = field(default_factory=list)
    bytes: int = 0
    slots: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    accesses: int = 0
    frame_bytes: int = 0

    def report(self) -> dict:
        bits = sum(b for s in self.slots.values() for _, b in s)
        return {"arrays": len(self.arrays), "local_bytes": self.bytes,
                "slots": sum(len(s) for s in self.slots.values()),
                "registers_added": -(-bits // 32), "accesses": self.accesses,
                "frame_bytes_removed": self.frame_bytes}


def local_arrays(fn: Function) -> dict[str, int]:
    """The arrays declared ``.local`` in the function body, each once (a name declared again in
    another scope is left out: its accesses could not be told apart): {name: size in bytes}."""
    out: dict[str, int] = {}
    twice = set()
    for s in fn.body:
        if type(s) is Raw and s.kind == DIRECTIVE and s.text.lstrip().startswith(".local"):
            m = _DECL.match(s.text.strip())
            if m:
                elem = int(m.group(3)) // 8
                if m.group(4) in out:
                    twice.add(m.group(4))
                out[m.group(4)] = elem * int(m.group(5)) if m.group(5) else elem
    return {name: size for name, size in out.items() if name not in twice}


def nested_declarations(fn: Function) -> set[str]:
    """The names declared inside a nested ``{ }`` scope of the function body: outside that
    scope the same name may be a module-scope variable's (a module-scope ``.local``)."""
    out: set[str] = set()
    depth = 0
    for s in fn.body:
        if type(s) is Raw:
            if s.kind == SCOPE_OPEN:
                depth += 1
            elif s.kind == SCOPE_CLOSE:
                depth -= 1
            elif s.kind == DIRECTIVE and depth > 0:
                m = _DECL.match(s.text.strip())
                if m:
                    out.add(m.group(4))
    return out


def immediate(text: str) -> int | None:
    """The value of a PTX integer immediate, or None."""
    if not _INT.match(text):
        return None
    t = text.rstrip("uU")
    neg = t.startswith("-")
    t = t.lstrip("+-")
    v = int(t, 8) if len(t) > 1 and t[0] == "0" and t[1] not in "xX" else int(t, 0)
    return -v if neg else v


def _mentions(name: str):
    return re.compile(r"(?<![\w$%.])" + re.escape(name) + r"(?![\w$])")


class _Analysis:
    """Address registers and accesses of one array (module docstring)."""

    def __init__(self, fn: Function, cfg: CFG, name: str, size: int, ndefs: list[int]):
        self.ok = True
        self.addr: dict[int, tuple[bool, int]] = {}     # vreg -> (generic, offset)
        self.accesses: dict[int, tuple[int, int]] = {}  # instr id -> (offset, bits)
        self.derivations: list[int] = []                # instr ids
        instrs = cfg.instrs
        mention = _mentions(name)
        names = fn.regs.names.__getitem__
        # derivations to a fixpoint (a derivation may come after its use in body order)
        def_at: dict[int, int] = {}
        changed = True
        while changed and self.ok:
            changed = False
            for k, ins in enumerate(instrs):
                if ins.defs and ins.defs[0] in self.addr:
                    continue
                got = self._derivation(ins, name)
                if got is None:
                    continue
                d = ins.defs[0] if len(ins.defs) == 1 else -1
                if d < 0 or ins.guard >= 0 or ndefs[d] != 1:
                    self.ok = False
                    return
                self.addr[d] = got
                def_at[d] = k
                changed = True
        for k, ins in enumerate(instrs):
            touches = [u for u in ins.uses if u in self.addr]
            named = bool(mention.search(ins.render(names)))
            if not touches and not named:
                continue
            if self._derivation(ins, name) is not None:
                self.derivations.append(k)
            else:
                acc = self._access(ins, name, fn)
                if acc is None:
                    self.ok = False
                    return
                self.accesses[k] = acc
            for u in touches:               # the address is known wherever it is read
                dk = def_at[u]
                db, ub = cfg.block_of[dk], cfg.block_of[k]
                if not (cfg.blocks[ub].reachable and (dk < k if db == ub
                                                      else cfg.dominates(db, ub))):
                    self.ok = False
                    return
        seen: dict[int, tuple[int, int]] = {}
        for off, bits in self.accesses.values():
            w = bits // 8
            if off < 0 or off + w > size or off % w:
                self.ok = False
                return
            for b in range(off, off + w):
                if seen.setdefault(b, (off, bits)) != (off, bits):
                    self.ok = False
                    return

    def _derivation(self, ins: Instruction, name: str) -> tuple[bool, int] | None:
        """(generic, offset) of the address ``ins`` derives, or None when it derives none."""
        base, ops = ins.base, ins.ops
        if len(ops) == 2 and type(ops[0]) is Reg and base in ("mov", "cvta"):
            generic = base == "cvta"
            if generic and not ins.opcode.startswith("cvta.local."):
                return None
            src = ops[1]
            if type(src) is Sym and src.text == name:
                return generic, 0
            if type(src) is Reg and not src.comp and src.v in self.addr:
                g, off = self.addr[src.v]
                if generic and g:
                    return None
                return generic or g, off
            return None
        if len(ops) == 3 and type(ops[0]) is Reg and _ARITH.match(ins.opcode):
            a, b = ops[1], ops[2]
            if base == "add" and type(a) is Imm:
                a, b = b, a
            if type(a) is Reg and not a.comp and a.v in self.addr and type(b) is Imm:
                c = immediate(b.text)
                if c is None:
                    return None
                g, off = self.addr[a.v]
                return g, off + (c if base == "add" else -c)
        return None

    def _access(self, ins: Instruction, name: str, fn: Function) -> tuple[int, int] | None:
        """(offset, bits) of a promotable access to the array, or None."""
        m = _ACCESS.match(ins.opcode)
        if m is None or len(ins.ops) != 2:
            return None
        is_load = m.group(1) == "ld"
        local = m.group(2) is not None
        bits = int(m.group(4))
        mem, data = (ins.ops[1], ins.ops[0]) if is_load else (ins.ops[0], ins.ops[1])
        if type(mem) is not Mem or mem.rest or mem.suffix:
            return None
        off = immediate(mem.offset.replace("+", "", 1)) if mem.offset else 0
        if off is None:
            return None
        if type(mem.base) is Sym and mem.base.text == name:
            generic, base_off = False, 0
        elif type(mem.base) is Reg and not mem.base.comp and mem.base.v in self.addr:
            generic, base_off = self.addr[mem.base.v]
        else:
            return None
        if generic == local:
            return None
        if type(data) is Reg:
            if data.comp or data.v in self.addr or fn.regs.vec[data.v] or \
                    CLASS_BITS[fn.regs.classes[data.v]] != bits:
                return None
        elif is_load or type(data) is not Imm:
            return None
        return base_off + off, bits


def promote_function(fn: Function, module_text: str = "") -> Promoted | None:
    """The function with every promotable ``.local`` array in registers (module docstring), or
    None when there is none; ``module_text`` is the module's text outside its functions, where
    a name that appears keeps its declaration."""
    outside = _COMMENTS.sub(" ", module_text)
    nested = nested_declarations(fn)
    # a nested declaration whose name the module also has: an access outside the scope is the
    # module's variable, which the name alone cannot tell from the nested array
    arrays = {n: s for n, s in local_arrays(fn).items() if s <= MAX_PROMOTED_BYTES
              and not (n in nested and _mentions(n).search(outside))}
    if not arrays:
        return None
    cfg = CFG(fn)
    ndefs = [0] * len(fn.regs)
    for ins in cfg.instrs:
        for d in ins.defs:
            ndefs[d] += 1
    for p in fn.params + fn.returns:
        if p.vid >= 0:
            ndefs[p.vid] += 1
    new = fn.copy()
    result = Promoted(new)
    replace: dict[int, Instruction | None] = {}
    for name, size in arrays.items():
        an = _Analysis(fn, cfg, name, size, ndefs)
        if not an.ok or not an.accesses:
            continue
        slots = sorted(set(an.accesses.values()))
        vreg = {}
        stem = re.sub(r"[^\w$]", "_", name)
        for off, bits in slots:
            ptype = f".b{bits}"
            vreg[off] = new.regs.add(f"%{stem}_{off}", ptype, class_of_type(ptype))
        for k, (off, bits) in an.accesses.items():
            ins = cfg.instrs[k]
            slot = Reg(vreg[off])
            ops = [ins.ops[0], slot] if ins.base == "ld" else [slot, ins.ops[1]]
            mov = Instruction("mov" + ins.opcode[ins.opcode.rindex("."):], ops, ins.guard,
                              ins.guard_neg, ins.line, ins.loc, ins.comment)
            isa.classify(mov, new.regs)
            replace[id(ins)] = mov
        for k in an.derivations:
            replace[id(cfg.instrs[k])] = None
        if not _mentions(name).search(outside):
            decl = next(s for s in new.body if type(s) is Raw and s.kind == DIRECTIVE
                        and _DECL.match(s.text.strip()) and
                        _DECL.match(s.text.strip()).group(4) == name)
            replace[id(decl)] = None
            result.frame_bytes += size
        result.arrays.append(name)
        result.bytes += size
        result.slots[name] = slots
        result.accesses += len(an.accesses)
    if not result.arrays:
        return None
    new.body = [replace.get(id(s), s) for s in new.body if replace.get(id(s), s) is not None]
    return result
