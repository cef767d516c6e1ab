"""The ISA table: which register operands each PTX instruction defines and which it uses
(SPEC section 3, PTX ISA 9.0 chapter 9.7 "Instructions"), which vector operands must sit in
consecutive registers (SPEC section 2, seed 000 "Alignment Constraints Summary"), and which
register operands an asynchronous instruction keeps accessing after it issues.

``tests/unit/test_isa.py`` checks this table against every syntax form in
``shared/ptx_syntax`` (one file per PTX 9.0 instruction) with its own, separately written list of
destination operands per instruction, and checks that every opcode of the real-PTX corpus is
known.

Definitions and uses
--------------------

* The first operand is the destination when it is a register, a vector, a ``p|q`` pair or the
  sink ``_``: ``add d, a, b``; ``ld.v4 {..}, [a]``; ``setp p|q, a, b``; ``shfl.sync d|p, ..``;
  ``elect.sync d|p, m``; ``match.all.sync d|p, ..``; ``lop3.or.b32 d|p, a, b, c, lut, q``;
  ``vote.ballot d, ..``; ``atom d, [a], b``; ``mma d, a, b, c``; ``alloca ptr, size``;
  ``createpolicy policy, ..``; ``mbarrier.arrive state, [a]``; ``mbarrier.test_wait
  waitComplete, [a], state``; ``mbarrier.pending_count count, state``;
  ``clusterlaunchcontrol.query_cancel pred|{x, y, z, _}|reg, response``; ``bar.red d|p, ..``.
  Every other operand is a use.
* An instruction whose first operand is an address (``st``, ``red``, ``cp.async*``,
  ``cp.reduce.async*``, ``st.async``, ``red.async``, ``multimem.st/red``, ``wmma.store``,
  ``stmatrix``, ``tcgen05.st/mma/cp/commit/shift/alloc``, ``mbarrier.init/inval/expect_tx/
  complete_tx``, ``tensormap.*``, ``sust``, ``sured``, ``prefetch``, ``applypriority``,
  ``discard``), an immediate, a label or a symbol defines nothing.
* Families whose first register operand is read, not written: ``bar``/``barrier`` ``.sync``/
  ``.arrive`` (only ``.red`` defines), ``bar.warp.sync``, ``brx.idx``, ``nanosleep``,
  ``stackrestore``, ``tcgen05.dealloc``, ``setmaxnreg``, ``pmevent``, ``griddepcontrol``,
  ``trap``, ``exit``, ``ret``, ``bra``.
* ``tcgen05.ld.red r, redval, [taddr]`` defines its second operand too: "The result of the
  reduction operation is written into the corresponding thread's 32-bit destination register
  operand redVal" (PTX ISA 9.0, section 9.7.16.8.3 "tcgen05.ld").
* ``call``: registers in the return list are defined, the function-pointer operand and the
  argument list are used (``call (%fd2), f, (%rl8);`` in the old ABI).
* ``wgmma.mma_async`` reads its accumulator ``d`` too, unless its scale-d operand is the literal
  ``0`` (SPEC section 3). "The operation of the form D = A*B is issued when the input predicate
  argument scale-d is false"; "Register operand d represents the accumulator matrix as well as
  the destination matrix" (PTX ISA, "wgmma.mma_async"). scale-d is a predicate register or a
  constant (the corpus's ptxbench attention kernel passes a predicate), so with a register
  there ``d`` is read. It is operand 3, or 5 in the ``.sp`` form (``d, a, b-desc, sp-meta,
  sp-sel, scale-d, ...``).
* ``add.cc``/``sub.cc``/``mad.cc``/``addc``/``subc``/``madc`` also write or read the carry flag
  CC. It is not a virtual register; code inserted between a ``.cc`` instruction and the one
  consuming the carry must not itself write CC (spill code never does: ``ld``/``st``/``mov``).
* A register written with a component or byte/half selector (``v.x``, ``d.h1``) in a defined
  position counts as defined and used (:meth:`Instruction.set_roles`). That is exact for ``mov``
  into one component of a vector register, and conservative for the video instructions: their
  ``d.dsel``/``d{.mask}`` merges the result with operand ``c`` and writes all 32 bits of ``d``
  (section 9.7.18.1 "optMerge", 9.7.18.2).

Unknown opcodes are never guessed at: every register operand of an instruction whose opcode
the table does not know is treated as both used and defined. That is safe — it keeps every
value live across the instruction and never lets two values share a register wrongly — and the
instruction is marked ``known = False`` so reports can list it. (SPEC section 3 leaves the
choice between this and rejecting the instruction to the project; this is the choice.)

Register tuples
---------------

:func:`tuple_operands` lists the vector operands that occupy consecutive registers, with their
alignment in 32-bit registers: the tuple's size rounded up to a power of two (a ``.v2.f32`` pair
2, a ``.v4.f32`` quad 4, a ``.v2.f64`` quad 4 — a 128-bit access needs a 4-aligned register
quad, a ``.v2.f16`` pair of halves 1), capped for tensor-core fragments by seed 000's table: 4
for ``mma``/``wmma`` (its WMMA row says 4 for SM70-80 and SM90+), ``ldmatrix``/``stmatrix``;
8 for ``wgmma`` and ``tcgen05``. A fragment smaller than the cap is aligned to its own size
(``ldmatrix .x2`` on an even register, a one-register ``mma`` B fragment anywhere).

Asynchronous register access
----------------------------

:func:`async_operands` names the registers an instruction keeps reading or writing after it
issues, and the wait that ends it. "Accessing the accumulator register or the input register
containing the fragments of matrix A of a wgmma.mma_async instruction without first performing
a wgmma.wait_group instruction that waits on a wgmma-group including that wgmma.mma_async
instruction is undefined behavior" (section 9.7.15.7.3 "wgmma.wait_group"); ``tcgen05.ld`` and
``tcgen05.st`` are asynchronous and complete at ``tcgen05.wait::ld``/``tcgen05.wait::st``
(sections 9.7.16.8.3 and 9.7.16.8.4). An allocator must not give those registers to another
value between the instruction and its wait, even where their own value's live range has ended
(a dead ``tcgen05.ld`` destination is still written late).
"""

from __future__ import annotations

from .instruction import DEF, NONE, USE, USEDEF, Instruction
from .operands import Args, Imm, Mem, Pair, Reg, Sink, Sym, Vec
from .registers import RegClass, RegTable

#: Base opcodes (text before the first '.') of every PTX 9.0 instruction, plus the deprecated
#: ones older PTX still uses.
# the instruction that orders a warpgroup's register writes before its wgmma.mma_async reads
# them (PTX ISA 9.7.15.5.1): the allocator's interference and spill windows key on it
WGMMA_FENCE = "wgmma.fence"

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

#: Load, store, atomic and texture instructions: every vector operand (texture coordinates,
#: offsets and gradients inside or beside the address included) is a register tuple.
_MEMORY_TUPLES = frozenset(("ld", "ldu", "st", "atom", "red", "tex", "tld4", "suld", "sust",
                            "sured", "multimem"))

#: Tensor-core families: the alignment cap of their fragments (seed 000's table).
_FRAGMENT_ALIGN = {"mma": 4, "wmma": 4, "ldmatrix": 4, "stmatrix": 4, "movmatrix": 4,
                   "wgmma": 8, "tcgen05": 8}

#: Size of one register of each class in 16-bit register units (SPEC section 2).
_CLASS_UNITS = {RegClass.H16: 1, RegClass.GPR32: 2, RegClass.GPR64: 4, RegClass.B128: 8,
                RegClass.PRED: 2}

_ROLES: dict[tuple[int, ...], tuple[int, ...]] = {}


def _opcode_may_define(opc: str, base: str) -> bool:
    """Whether the opcode defines its first operand when that operand is a register."""
    if base in _NO_DEF_BASES:
        return False
    if base in ("bar", "barrier"):
        return ".red" in opc
    return not opc.startswith(_FIRST_IS_USE)


#: Instructions whose every syntax form in PTX ISA 9.0 (``shared/ptx_syntax``) has the same
#: number of operands; the parser warns about another count. Families with forms of different
#: counts (``min``/``max`` with three inputs, ``cvt`` packing two sources, ``setp`` with a
#: boolean operator, ``lop3``...) are left out.
EXACT_OPERAND_COUNTS = {
    "add": 3, "sub": 3, "mul": 3, "div": 3, "rem": 3, "and": 3, "or": 3, "xor": 3, "shl": 3,
    "shr": 3, "addc": 3, "subc": 3, "copysign": 3,
    "mad": 4, "fma": 4, "selp": 4, "madc": 4, "prmt": 4, "bfe": 4,
    "bfi": 5,
    "neg": 2, "not": 2, "abs": 2, "cnot": 2, "popc": 2, "clz": 2, "brev": 2, "mov": 2,
    "rcp": 2, "sqrt": 2, "rsqrt": 2, "sin": 2, "cos": 2, "lg2": 2, "ex2": 2,
}


def opcode_check(opcode: str) -> tuple[bool, int | None]:
    """Whether the table knows ``opcode``'s base, and the exact operand count it requires
    (None where forms differ)."""
    base, known, _ = _opcode_facts(opcode)
    return known, EXACT_OPERAND_COUNTS.get(base)


_DESTINATION_TYPES = (Reg, Vec, Pair, Sink)
#: opcode -> (base, known, may define its first operand); filled on first sight
_OPCODES: dict[str, tuple[str, bool, bool]] = {}


def _opcode_facts(opc: str) -> tuple[str, bool, bool]:
    facts = _OPCODES.get(opc)
    if facts is None:
        dot = opc.find(".")
        base = opc if dot < 0 else opc[:dot]
        facts = (base, base in KNOWN_BASES, _opcode_may_define(opc, base))
        _OPCODES[opc] = facts
    return facts


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


def plain_first_role(opc: str) -> int:
    """The role of ``opc``'s first operand when that operand is a register and the
    instruction's roles follow the common rule (the first operand defined or used, every
    other used): DEF or USE; 0 for what :func:`classify` decides otherwise (an unknown opcode,
    ``call``, ``wgmma``, ``tcgen05.ld.red``)."""
    base, known, may_define = _OPCODES.get(opc) or _opcode_facts(opc)
    if not known or base in ("call", "wgmma") or opc.startswith("tcgen05.ld.red"):
        return 0
    return DEF if may_define else USE


def set_plain_roles(instr: Instruction, reads: list[int], first: int, regs: RegTable) -> None:
    """Roles, ``defs``, ``uses`` and ``is_copy`` of an instruction whose operands are all
    plain -- a register without component, an immediate, a symbol, an address ``[reg+off]`` --
    and whose opcode follows the common rule: ``first`` is :func:`plain_first_role` when the
    first operand is a register (USE otherwise), ``reads`` every register its operands name,
    in order (an address's base included). The parser calls it with the registers it found
    while splitting the operands; :func:`classify` with those it collects."""
    ops = instr.ops
    n = len(ops)
    key = n if first == DEF else -n
    roles = _PLAIN_ROLES.get(key)
    if roles is None:
        roles = _PLAIN_ROLES[key] = (first,) + (USE,) * (n - 1)
    instr.roles = roles
    guard = instr.guard
    if first == DEF:
        d = reads[0]
        instr.defs = (d,)
        if n == 2 and guard < 0 and len(reads) == 2 and instr.base == "mov":
            s = reads[1]
            instr.uses = (s,)
            if type(ops[1]) is Reg:
                instr.is_copy = (regs.classes[d] == regs.classes[s]
                                 and regs.vec[d] == regs.vec[s])
            return
        del reads[0]
        uses = reads
    else:
        instr.defs = ()
        uses = reads
    if guard >= 0:
        uses.append(guard)
    k = len(uses)
    if k < 2 or k == 2 and uses[0] != uses[1]:
        instr.uses = tuple(uses)
    else:
        instr.uses = tuple(dict.fromkeys(uses))


#: the roles set_plain_roles gives n operands: key n when the first is defined, -n when used
_PLAIN_ROLES: dict[int, tuple[int, ...]] = {}


def _plain_reads(ops: list) -> list[int] | None:
    """The registers the operands name when every one is plain (see :func:`set_plain_roles`),
    else None."""
    reads = []
    for op in ops:
        t = type(op)
        if t is Reg:
            if op.comp:
                return None
            reads.append(op.v)
        elif t is Mem:
            if op.rest:
                return None
            if type(op.base) is Reg:
                reads.append(op.base.v)
        elif t is not Imm and t is not Sym:
            return None
    return reads


def classify(instr: Instruction, regs: RegTable) -> None:
    """Give every operand of ``instr`` its role and derive ``defs``/``uses``/``is_copy``."""
    ops = instr.ops
    opc = instr.opcode
    base, known, may_define = _OPCODES.get(opc) or _opcode_facts(opc)
    if not known:
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
    first = DEF if may_define and type(ops[0]) in _DESTINATION_TYPES else USE
    n_defs = 1
    if first == DEF and base == "wgmma" and _wgmma_reads_accumulator(instr):
        first = USEDEF
    elif base == "tcgen05" and opc.startswith("tcgen05.ld.red") and len(ops) > 1:
        n_defs = 2          # r and redval (section 9.7.16.8.3)
    if n_defs == 1 and first != USEDEF:
        reads = _plain_reads(ops)
        if reads is not None:
            set_plain_roles(instr, reads, first if type(ops[0]) is Reg else USE, regs)
            return
    key = (first, n_defs, len(ops))
    roles = _ROLES.get(key)
    if roles is None:
        roles = _ROLES[key] = (first,) * n_defs + (USE,) * (len(ops) - n_defs)
    instr.set_roles(roles)
    if (base == "mov" and len(ops) == 2 and instr.guard < 0 and type(ops[0]) is Reg
            and type(ops[1]) is Reg and not ops[0].comp and not ops[1].comp):
        d, s = ops[0].v, ops[1].v
        instr.is_copy = (regs.classes[d] == regs.classes[s] and regs.vec[d] == regs.vec[s])


def _member_units(reg: Reg, regs: RegTable) -> int:
    units = _CLASS_UNITS.get(regs.classes[reg.v], 2)
    return units if reg.comp else units * max(1, regs.vec[reg.v])   # .reg .v2 members


def _tuple_registers(vec: Vec, regs: RegTable | None) -> int:
    """The number of 32-bit registers a vector occupies: every member (sinks and immediates
    hold a slot too) has the size of the vector's largest register member; without a register
    table every member counts as one 32-bit register."""
    if regs is None:
        return len(vec.items)
    units = max((_member_units(it, regs) for it in vec.items if type(it) is Reg), default=2)
    return max(1, (units * len(vec.items) + 1) // 2)


def _pow2_at_least(n: int) -> int:
    return 1 << (n - 1).bit_length()


#: The base opcodes :func:`tuple_operands` finds tuples in (any other has none).
TUPLE_BASES = _MEMORY_TUPLES | frozenset(_FRAGMENT_ALIGN)


def tuple_operands(instr: Instruction, regs: RegTable | None = None) -> list[tuple[Vec, int]]:
    """The vector operands of ``instr`` that must occupy consecutive registers, each with its
    alignment in 32-bit registers (seed 000 "Alignment Constraints Summary", SPEC section 2).

    Memory and texture instructions (``ld ldu st atom red tex tld4 suld sust sured
    multimem``): every vector with a register in it, texture coordinates included; the
    alignment is the tuple's size rounded up to a power of two. Tensor-core fragments: the same,
    capped at 4 for ``mma``/``wmma``/``ldmatrix``/``stmatrix`` and at 8 for ``wgmma``/
    ``tcgen05``; of ``mma`` only d, a, b and c are fragments (the block-scale selector vectors
    ``{byte-id, thread-id}`` are immediates). ``mov`` pack/unpack vectors, ``cvt``'s source
    vector, ``clusterlaunchcontrol.query_cancel``'s result and call lists are not tuples.

    ``regs`` gives each member's size; without it every member counts as one 32-bit register
    (then a ``.v2.f64`` pair gets alignment 2, not the 4 it needs): pass it.
    """
    base = instr.base
    if base in _MEMORY_TUPLES:
        cap = 0
        candidates: list = []
        for op in instr.ops:
            t = type(op)
            if t is Vec:
                candidates.append(op)
            elif t is Pair and type(op.a) is Vec:          # tex/tld4 d|p
                candidates.append(op.a)
            elif t is Mem:
                candidates.extend(v for v in op.rest if type(v) is Vec)
    elif base in _FRAGMENT_ALIGN:
        cap = _FRAGMENT_ALIGN[base]
        ops = instr.ops[:4] if base == "mma" else instr.ops
        candidates = [op for op in ops if type(op) is Vec]
    else:
        return []
    out: list[tuple[Vec, int]] = []
    for v in candidates:
        if not any(type(it) is Reg for it in v.items):
            continue
        align = _pow2_at_least(_tuple_registers(v, regs))
        out.append((v, min(align, cap) if cap else align))
    return out


def async_operands(instr: Instruction) -> tuple[tuple[int, ...], str] | None:
    """The registers ``instr`` keeps accessing after it issues and the opcode prefix of the
    instruction that ends the access, or None for a synchronous instruction.

    ``wgmma.mma_async``: the accumulator ``d`` and a register A fragment, until
    ``wgmma.wait_group``. ``tcgen05.ld``: the destinations (``redval`` included), until
    ``tcgen05.wait::ld``. ``tcgen05.st``: the source vector, until ``tcgen05.wait::st``.
    """
    opc = instr.opcode
    ops = instr.ops
    if opc.startswith("wgmma.mma_async"):
        # d, and a when it is a register fragment rather than a shared-memory descriptor
        accessed = [op for op in ops[:2] if type(op) is Vec]
        wait = "wgmma.wait_group"
    elif opc.startswith("tcgen05.ld"):
        accessed = ops[:2] if opc.startswith("tcgen05.ld.red") else ops[:1]
        wait = "tcgen05.wait::ld"
    elif opc.startswith("tcgen05.st"):
        accessed = [op for op in ops if type(op) is Vec]
        wait = "tcgen05.wait::st"
    else:
        return None
    out = [r.v for op in accessed if type(op) is not Mem for r in op.regs()]
    return tuple(dict.fromkeys(out)), wait


__all__ = ["classify", "tuple_operands", "async_operands", "KNOWN_BASES", "DEF", "USE",
           "USEDEF", "NONE"]
