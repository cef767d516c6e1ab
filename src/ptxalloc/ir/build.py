"""Constructors of the instructions ptxalloc inserts: register copies, spill stores and
reloads to the ``.local`` spill array, and the predicate saves and restores of SPEC section 5
(``selp.u32 r, 1, 0, p`` / ``setp.ne.u32 p, r, 0``). Each is classified by the ISA table like a
parsed instruction."""

from __future__ import annotations

from . import isa
from .instruction import Instruction
from .operands import Imm, Mem, Reg, Sym
from .registers import CLASS_BITS, RegClass, RegTable


def bit_type(regs: RegTable, v: int) -> str:
    """The untyped PTX type that moves register ``v`` whole: ``.b32``, ``.v4.b32``, ``.pred``."""
    c = regs.classes[v]
    if c == RegClass.PRED:
        return ".pred"
    bits = CLASS_BITS[c]
    vec = regs.vec[v]
    return f".v{vec}.b{bits}" if vec > 1 else f".b{bits}"


def width_bytes(regs: RegTable, v: int) -> int:
    """Bytes register ``v`` occupies in memory (its spill-slot size)."""
    return CLASS_BITS[regs.classes[v]] // 8 * max(1, regs.vec[v])


def copy(regs: RegTable, dst: int, src: int, line: int = 0) -> Instruction:
    """``mov.b32 dst, src`` (the type that moves ``dst`` whole)."""
    ins = Instruction("mov" + bit_type(regs, dst), [Reg(dst), Reg(src)], line=line)
    isa.classify(ins, regs)
    return ins


def spill_store(regs: RegTable, src: int, array: str, line: int = 0,
                base: int = -1) -> Instruction:
    """``st.local.b32 [array], src``, or with a ``base`` register ``st.shared.b32 [base],
    src`` (:mod:`ptxalloc.spill.shared`) — the offset is filled in once slots are assigned."""
    ins = Instruction(("st.shared" if base >= 0 else "st.local") + bit_type(regs, src),
                      [_slot_address(array, base), Reg(src)], line=line)
    isa.classify(ins, regs)
    return ins


def spill_reload(regs: RegTable, dst: int, array: str, line: int = 0,
                 base: int = -1) -> Instruction:
    """``ld.local.b32 dst, [array]``, or ``ld.shared.b32 dst, [base]`` with a ``base``
    register — the offset is filled in once slots are assigned."""
    ins = Instruction(("ld.shared" if base >= 0 else "ld.local") + bit_type(regs, dst),
                      [Reg(dst), _slot_address(array, base)], line=line)
    isa.classify(ins, regs)
    return ins


def stored(ins: Instruction) -> int:
    """The register a spill store writes to memory: its second operand (the first is the
    address, whose base may be a register of its own: :mod:`ptxalloc.spill.shared`)."""
    return ins.ops[1].v


def _slot_address(array: str, base: int) -> Mem:
    """A spill slot's address before its offset: the ``.local`` array, or the register holding
    this thread's shared spill frame."""
    return Mem(Reg(base)) if base >= 0 else Mem(Sym(array))


def pred_save(regs: RegTable, dst: int, pred: int, line: int = 0) -> Instruction:
    """``selp.u32 dst, 1, 0, pred`` — a predicate saved in a 32-bit register."""
    ins = Instruction("selp.u32", [Reg(dst), Imm("1"), Imm("0"), Reg(pred)], line=line)
    isa.classify(ins, regs)
    return ins


def pred_restore(regs: RegTable, pred: int, src: int, line: int = 0) -> Instruction:
    """``setp.ne.u32 pred, src, 0`` — a predicate restored from its 32-bit register."""
    ins = Instruction("setp.ne.u32", [Reg(pred), Reg(src), Imm("0")], line=line)
    isa.classify(ins, regs)
    return ins
