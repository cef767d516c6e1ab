"""Translation validation of ``.local`` arrays promoted to registers (issue 17; seed 004
ConvertMemoryToRegisterOrUniform): the checker proves a promoted allocation (``promote=1`` in
its header) by rebuilding, from the original alone, the function the allocator was given — each
array a ``//@promote NAME`` line names is checked promotable and its loads and stores replaced
here — and proving the allocation against that (docs/checker.md, "Hoisted and promoted
allocations"). A wrong replacement by the pass then fails the proof: the allocation's
instruction does not match the one rebuilt here.

An array is accepted when, recomputed here independently of :mod:`ptxalloc.passes.promote`:

* it is declared ``.local`` in the function's body, in at most 64 KB, and not in a nested
  ``{ }`` scope when the module's text outside the functions names it too (outside the scope
  the name is then the module's variable, and an access there is not the array's);
* its address never escapes: the registers holding an address in it are found by closing over
  ``mov``/``cvta.local`` of its name and ``mov``/``cvta.local``/``add``/``sub`` of such a
  register with an integer immediate, each unguarded, the register's only definition, and in
  a block dominating each of its reads (before it in the same block); every instruction that
  reads such a register or names the array is one of those, or a plain scalar ``ld``/``st``
  (``.local`` through a local address, no state space through a generic one; nothing else in
  the opcode but a 16-, 32- or 64-bit type) that uses it only as the address;
* every access is at a constant offset inside the array, aligned to its width, with a data
  register of exactly that width (or a stored immediate), and any two overlapping accesses
  cover the same bytes (one slot, one width).

The rebuilt function has one fresh ``.bN`` register per slot and each access replaced by
``mov.TYPE data, slot`` (a load) or ``mov.TYPE slot, data`` (a store), guard and line kept;
the derivations of its addresses removed (every read of their registers was an access or a
derivation, so they are dead), and its declaration too unless the module's text outside the
functions, comments aside, names the array (nvcc ``-G`` debug information).
Together with the allocation proof this is the whole chain: the original's memory slot and the
rebuilt function's register hold the same value at every access, since no other instruction can
reach the slot (its address never escapes) and every access names it exactly.
"""

from __future__ import annotations

import re

from ..errors import VerificationError
from ..ir import isa
from ..ir.cfg import CFG
from ..ir.instruction import COMMENT, DIRECTIVE, SCOPE_CLOSE, SCOPE_OPEN, Instruction, Raw
from ..ir.module import Function
from ..ir.operands import Imm, Mem, Reg, Sym
from ..ir.registers import CLASS_BITS, class_of_type
from .header import PROMOTE

LIMIT = 0x10000
_OPCODE = re.compile(r"(?P<op>ld|st)(?P<local>\.local)?\.(?P<t>[bsuf])(?P<bits>16|32|64)$")
_ADDRESS_ARITH = re.compile(r"(?:add|sub)\.[su](?:32|64)$")
_NUMBER = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)[uU]?$")


def read_promotions(allocated: Function) -> list[str]:
    """The array names the ``//@promote`` lines of an allocated function list, in order."""
    out = []
    for s in allocated.body:
        if type(s) is Raw and s.kind == COMMENT and s.text.startswith(PROMOTE):
            words = s.text[len(PROMOTE):].split()
            if len(words) != 1 or s.text[len(PROMOTE):][:1] not in (" ", "\t"):
                raise VerificationError(f"function '{allocated.name}', line {s.line}: malformed "
                                        f"promote line '{s.text}'")
            out.append(words[0])
    return out


def _number(text: str) -> int | None:
    m = _NUMBER.match(text)
    if m is None:
        return None
    digits = m.group(2)
    value = int(digits, 8) if digits[0] == "0" and len(digits) > 1 and digits[1] not in "xX" \
        else int(digits, 0)
    return -value if m.group(1) == "-" else value


def _declaration(fn: Function, name: str) -> tuple[Raw, int, bool] | None:
    """(the declaration, its size in bytes, whether it lies in a nested ``{ }`` scope)."""
    pattern = re.compile(r"\.local\s+(?:\.align\s+\d+\s+)?\.[a-z]+(\d+)\s+" + re.escape(name)
                         + r"\s*(?:\[\s*(\d+)\s*\])?\s*;?$")
    found = []
    depth = 0
    for s in fn.body:
        if type(s) is Raw:
            if s.kind == SCOPE_OPEN:
                depth += 1
            elif s.kind == SCOPE_CLOSE:
                depth -= 1
            elif s.kind == DIRECTIVE:
                m = pattern.match(s.text.strip())
                if m:
                    found.append((s, m, depth > 0))
    if len(found) != 1:             # none, or one per scope: accesses cannot be told apart
        return None
    s, m, nested = found[0]
    return s, int(m.group(1)) // 8 * (int(m.group(2)) if m.group(2) else 1), nested


def _promote_array(fn: Function, name: str, module_text: str = "") -> Function:
    where = f"function '{fn.name}': array '{name}'"

    def refuse(why: str) -> VerificationError:
        return VerificationError(f"{where} cannot be promoted to registers: {why}")

    declared = _declaration(fn, name)
    if declared is None:
        raise refuse("it is not a .local array declared once in the function")
    declaration, size, nested = declared
    mention = re.compile(r"(?<![\w$%.])" + re.escape(name) + r"(?![\w$])")
    if nested and mention.search(module_text):
        raise refuse("it is declared in a nested scope and the module declares the name too "
                     "(outside the scope the name is the module's variable)")
    if size > LIMIT:
        raise refuse(f"{size} bytes exceed the 64 KB cap")
    cfg = CFG(fn)
    instrs = cfg.instrs
    names = fn.regs.names.__getitem__
    definitions: dict[int, list[int]] = {}
    for k, ins in enumerate(instrs):
        for d in ins.defs:
            definitions.setdefault(d, []).append(k)
    params = {p.vid for p in fn.params + fn.returns if p.vid >= 0}
    address: dict[int, tuple[str, int]] = {}        # register -> ("local"|"generic", offset)
    born: dict[int, int] = {}

    def derived(ins: Instruction) -> tuple[str, int] | None:
        ops = ins.ops
        if ins.base in ("mov", "cvta") and len(ops) == 2 and type(ops[0]) is Reg:
            to_generic = ins.base == "cvta"
            if to_generic and not ins.opcode.startswith("cvta.local."):
                return None
            src = ops[1]
            if type(src) is Sym and src.text == name:
                return ("generic" if to_generic else "local"), 0
            if type(src) is Reg and not src.comp and src.v in address:
                space, off = address[src.v]
                if to_generic:
                    return ("generic", off) if space == "local" else None
                return space, off
            return None
        if _ADDRESS_ARITH.match(ins.opcode) and len(ops) == 3 and type(ops[0]) is Reg:
            regs = [op for op in ops[1:] if type(op) is Reg]
            imms = [op for op in ops[1:] if type(op) is Imm]
            if len(regs) != 1 or len(imms) != 1 or regs[0].comp or regs[0].v not in address:
                return None
            if ins.base == "sub" and ops[1] is not regs[0]:
                return None
            c = _number(imms[0].text)
            if c is None:
                return None
            space, off = address[regs[0].v]
            return space, off + c if ins.base == "add" else off - c
        return None

    grew = True
    while grew:
        grew = False
        for k, ins in enumerate(instrs):
            if ins.defs and ins.defs[0] in address:
                continue
            got = derived(ins)
            if got is None:
                continue
            d = ins.ops[0].v
            if ins.guard >= 0 or ins.ops[0].comp or definitions.get(d) != [k] or d in params:
                raise refuse(f"line {ins.line}: the address register {names(d)} is not defined "
                             f"once, unguarded")
            address[d] = got
            born[d] = k
            grew = True
    slots: dict[int, tuple[int, int]] = {}           # byte -> (offset, bits)
    accesses: dict[int, tuple[int, int]] = {}        # instruction -> (offset, bits)
    dead: set[int] = set()                           # ids of the derivations
    for k, ins in enumerate(instrs):
        reads = [u for u in ins.uses if u in address]
        if not reads and not mention.search(ins.render(names)):
            continue
        text = f"line {ins.line} '{ins.render(names)}'"
        for u in reads:
            b, bu = cfg.block_of[born[u]], cfg.block_of[k]
            fine = born[u] < k if b == bu else cfg.blocks[bu].reachable and cfg.dominates(b, bu)
            if not fine:
                raise refuse(f"{text} reads the address {names(u)} where its definition "
                             f"does not dominate")
        if derived(ins) is not None:
            dead.add(id(ins))
            continue
        m = _OPCODE.match(ins.opcode)
        if m is None or len(ins.ops) != 2:
            raise refuse(f"{text}: the address escapes (not a plain scalar 16/32/64-bit load "
                         f"or store)")
        load = m.group("op") == "ld"
        bits = int(m.group("bits"))
        mem = ins.ops[1] if load else ins.ops[0]
        data = ins.ops[0] if load else ins.ops[1]
        if type(mem) is not Mem or mem.rest or mem.suffix:
            raise refuse(f"{text}: the address escapes")
        extra = _number(mem.offset[1:] if mem.offset.startswith("+") else mem.offset) \
            if mem.offset else 0
        if extra is None:
            raise refuse(f"{text}: the offset is not a constant")
        if type(mem.base) is Sym and mem.base.text == name:
            space, off = "local", 0
        elif type(mem.base) is Reg and mem.base.v in address and not mem.base.comp:
            space, off = address[mem.base.v]
        else:
            raise refuse(f"{text}: the address escapes")
        if (space == "local") != (m.group("local") is not None):
            raise refuse(f"{text}: a {space} address accessed in another state space")
        if type(data) is Reg:
            if data.v in address:
                raise refuse(f"{text}: the address escapes (stored)")
            if data.comp or fn.regs.vec[data.v] or CLASS_BITS[fn.regs.classes[data.v]] != bits:
                raise refuse(f"{text}: the register's width differs from the access's {bits} "
                             f"bits")
        elif load or type(data) is not Imm:
            raise refuse(f"{text}: not a register or immediate")
        off += extra
        width = bits // 8
        if off < 0 or off + width > size or off % width:
            raise refuse(f"{text}: offset {off} of a {width}-byte access is outside the "
                         f"{size}-byte array or misaligned")
        for byte in range(off, off + width):
            if slots.setdefault(byte, (off, bits)) != (off, bits):
                o, b = slots[byte]
                raise refuse(f"{text}: bytes {off}..{off + width - 1} overlap the {b // 8}-byte "
                             f"access at offset {o} (mismatched widths)")
        accesses[k] = (off, bits)
    if not accesses:
        raise refuse("it is never accessed")
    new = fn.copy()
    slot_reg = {}
    for off, bits in sorted(set(accesses.values())):
        slot_reg[off] = new.regs.add(f"%{name}+{off}", f".b{bits}",
                                     class_of_type(f".b{bits}"))
    replaced = {}
    for k, (off, bits) in accesses.items():
        ins = instrs[k]
        typ = ins.opcode[ins.opcode.rindex("."):]
        ops = [ins.ops[0], Reg(slot_reg[off])] if ins.base == "ld" \
            else [Reg(slot_reg[off]), ins.ops[1]]
        mov = Instruction("mov" + typ, ops, ins.guard, ins.guard_neg, ins.line, ins.loc,
                          ins.comment)
        isa.classify(mov, new.regs)
        replaced[id(ins)] = mov
    if not mention.search(module_text):
        dead.add(id(declaration))
    new.body = [replaced.get(id(s), s) for s in new.body if id(s) not in dead]
    return new


def promoted_original(original: Function, allocated: Function,
                      module_decls: list[str] = ()) -> Function:
    """The original with every array the ``//@promote`` lines of ``allocated`` name checked and
    promoted (module docstring): what the allocation (or the next pre-pass) is proven against.
    ``module_decls`` are the module's statements outside its functions."""
    module_text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", "\n".join(module_decls), flags=re.S)
    fn = original
    seen = set()
    for name in read_promotions(allocated):
        if name in seen:
            raise VerificationError(f"function '{original.name}': array '{name}' is promoted "
                                    f"twice")
        seen.add(name)
        fn = _promote_array(fn, name, module_text)
    return fn
