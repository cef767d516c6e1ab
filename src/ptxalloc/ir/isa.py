"""The ISA table: which register operands each PTX instruction defines and which it uses
(SPEC section 3, PTX ISA 9.0 "Instruction Set"), and which vector operands must sit in
consecutive registers (SPEC section 2, seed 000 "Alignment Constraints Summary").

The rule, checked against every syntax form in ``shared/ptx_syntax`` by the test suite:

* The first operand is the destination when it is a register, a vector, a ``p|q`` pair or the
  sink ``_`` — ``add d, a, b``, ``ld.v4 {..}, [a]``, ``setp p|q, a, b``, ``shfl.sync d|p, ..``,
  ``vote.ballot d, ..``, ``atom d, [a], b``, ``mma d, a, b, c``, ``mbarrier.arrive state, [a]``.
  Every other operand is a use.
* An instruction whose first operand is an address (``st``, ``red``, ``cp.async``,
  ``wmma.store``, ``stmatrix``, ``tcgen05.mma`` ...), an immediate, a label or a symbol defines
  nothing.
* Families whose first register operand is read, not written: ``bar``/``barrier`` (but
  ``bar.red`` defines), ``bar.warp.sync``, ``brx.idx``, ``nanosleep``, ``stackrestore``,
  ``tcgen05.dealloc``, ``setmaxnreg``, ``pmevent``, ``griddepcontrol``, ``trap``, ``exit``,
  ``ret``, ``bra``.
* ``call``: registers in the return list are defined, the function-pointer operand and the
  argument list are used (``call (%fd2), f, (%rl8);`` in the old ABI).
* ``wgmma.mma_async`` reads its accumulator ``d`` too, unless its scale-d operand is the literal
  ``0`` (SPEC section 3): then ``d`` is only written.
* A register written with a component or byte/half selector (``v.x``, ``d.h1``) in a defined
  position is a partial definition: defined and used.

Unknown opcodes are never guessed at: every register operand of an instruction whose opcode
the table does not know is treated as both used and defined. That is safe — it keeps every
value live across the instruction and never lets two values share a register wrongly — and the
instruction is marked ``known = False`` so reports can list it (docs/decisions.md).
"""

from __future__ import annotations

from .instruction import DEF, NONE, USE, USEDEF, Instruction
from .operands import Args, Imm, Mem, Pair, Reg, Sink, Vec
from .registers import RegTable

#: Base opcodes (text before the first '.') of every PTX 9.0 instruction, plus the deprecated
#: ones older PTX still uses.
KNOWN_BASES = frozenset("""
abs activemask add addc alloca and applypriority atom bar barrier bfe bfi bfind bmsk bra brev
brkpt brx call clusterlaunchcontrol clz cnot copysign cos cp createpolicy cvt cvta discard div
dp2a dp4a elect ex2 exit fence fma fns getctarank griddepcontrol isspacep istypep ld ldmatrix ldu
lg2 lop3 mad mad24 madc mapa match max mbarrier membar min mma mov movmatrix mul mul24 multimem
nanosleep neg not or pmevent popc prefetch prefetchu prmt rcp red redux rem ret rsqrt sad selp
set setmaxnreg setp shf shfl shl shr sin slct sqrt st stackrestore stacksave stmatrix sub subc
suld suq sured sust szext tanh tcgen05 tensormap testp tex tld4 trap txq vabsdiff vabsdiff2
vabsdiff4 vadd vadd2 vadd4 vavrg2 vavrg4 vmad vmax vmax2 vmax4 vmin vmin2 vmin4 vote vset vset2
vset4 vshl vshr vsub vsub2 vsub4 wgmma wmma xor
""".split())

#: Families whose first register operand is a use.
_FIRST_IS_USE = ("bar.", "barrier.", "bar.warp.sync", "brx.idx", "nanosleep", "stackrestore",
                 "tcgen05.dealloc", "setmaxnreg", "pmevent")

_NO_DEF_BASES = frozenset(("st", "red", "bra", "brx", "ret", "exit", "trap", "brkpt", "membar",
                           "fence", "prefetch", "prefetchu", "discard", "applypriority", "sust",
                           "sured", "nanosleep", "stackrestore", "pmevent", "griddepcontrol",
                           "setmaxnreg", "stmatrix"))

#: Instructions whose vector operands are register tuples, with the tuple alignment in 32-bit
#: registers for a vector of n members: None means "n" (the arity: 2 for .v2, 4 for .v4).
_MEMORY_TUPLES = frozenset(("ld", "ldu", "st", "atom", "red", "tex", "tld4", "suld", "sust",
                            "sured", "multimem"))


_ROLES: dict[tuple[int, int], tuple[int, ...]] = {}


def _first_operand_defines(instr: Instruction, op, base: str) -> bool:
    opc = instr.opcode
    if base in _NO_DEF_BASES:
        return False
    if base in ("bar", "barrier"):
        return ".red" in opc
    if opc.startswith(_FIRST_IS_USE):
        return False
    return type(op) in (Reg, Vec, Pair, Sink)


def _wgmma_reads_accumulator(instr: Instruction) -> bool:
    """``wgmma.mma_async`` reads ``d`` unless scale-d is the literal 0."""
    ops = instr.ops
    # d, a|a-desc, b-desc, [sp-meta, sp-sel,] scale-d, ...
    idx = 5 if ".sp." in instr.opcode else 3
    if idx < len(ops) and type(ops[idx]) is Imm:
        try:
            return int(ops[idx].text, 0) != 0
        except ValueError:
            return True
    return True


def _call_roles(instr: Instruction) -> tuple[int, ...]:
    roles = []
    seen_target = False
    for op in instr.ops:
        if type(op) is Args:
            roles.append(USE if seen_target else DEF)
        else:
            # the function or function pointer; a trailing target list or prototype is a symbol
            roles.append(USE if type(op) is Reg else NONE)
            seen_target = True
    return tuple(roles)


def classify(instr: Instruction, regs: RegTable) -> None:
    """Give every operand of ``instr`` its role and derive ``defs``/``uses``/``is_copy``."""
    ops = instr.ops
    opc = instr.opcode
    dot = opc.find(".")
    base = opc if dot < 0 else opc[:dot]
    if base not in KNOWN_BASES:
        instr.known = False
        instr.set_roles(tuple(USEDEF if type(op) is not Mem else USE for op in ops))
        return
    instr.known = True
    if base == "call":
        instr.set_roles(_call_roles(instr))
        return
    if not ops:
        instr.set_roles(())
        return
    first = DEF if _first_operand_defines(instr, ops[0], base) else USE
    if first == DEF and base == "wgmma" and _wgmma_reads_accumulator(instr):
        first = USEDEF
    key = (first, len(ops))
    roles = _ROLES.get(key)
    if roles is None:
        roles = _ROLES[key] = (first,) + (USE,) * (len(ops) - 1)
    instr.set_roles(roles)
    if (base == "mov" and len(ops) == 2 and instr.guard < 0 and type(ops[0]) is Reg
            and type(ops[1]) is Reg and not ops[0].comp and not ops[1].comp):
        d, s = ops[0].v, ops[1].v
        instr.is_copy = (regs.classes[d] == regs.classes[s] and regs.vec[d] == regs.vec[s])


def tuple_operands(instr: Instruction) -> list[tuple[Vec, int]]:
    """The vector operands of ``instr`` that must occupy consecutive registers, each with its
    alignment in 32-bit registers (seed 000 "Alignment Constraints Summary", SPEC section 2).

    Memory and texture instructions: the vector's arity (2 for .v2, 4 for .v4, 8 for .v8),
    texture coordinates included. ``mma``/``wmma``/``ldmatrix``/``stmatrix``/``movmatrix``
    fragments: 4 (accumulators and fragments on 4-register boundaries). ``wgmma`` and
    ``tcgen05`` fragments: 8. ``mov`` pack/unpack vectors and call lists are not tuples.
    """
    opc = instr.opcode
    base = opc.split(".", 1)[0]
    out: list[tuple[Vec, int]] = []
    if base in _MEMORY_TUPLES:
        for op in instr.ops:
            if type(op) is Vec:
                out.append((op, len(op.items)))
            elif type(op) is Mem:
                out.extend((v, len(v.items)) for v in op.rest if type(v) is Vec)
        return out
    if base in ("mma", "wmma", "ldmatrix", "stmatrix", "movmatrix"):
        align = 4
    elif base in ("wgmma", "tcgen05"):
        align = 8
    else:
        return out
    for op in instr.ops:
        if type(op) is Vec:
            out.append((op, align))
    return out


__all__ = ["classify", "tuple_operands", "KNOWN_BASES", "DEF", "USE", "USEDEF", "NONE"]
