"""What an instruction does besides reading and writing its registers: the facts an in-block
scheduler (seed 002 "Instruction Scheduling Interaction", :mod:`ptxalloc.passes.schedule`) and
its validator (:mod:`ptxalloc.verify.schedule`) both need, and nothing else. Like the ISA
table (:mod:`isa`) it is shared as a fact of the instruction set; each of the two modules
derives its own dependences from it.

Every instruction is one of three kinds:

* ``PURE`` — a computation on registers alone (``add``, ``mad``, ``setp``, ``selp``, ``cvt``,
  ``cvta``, ``mov`` of a register, an immediate, a symbol's address or a special register fixed
  for the thread, ``mma``/``wmma.mma``/``movmatrix``, whose ``.aligned`` form every thread of
  the warp executes alike): it may move, bounded by its register dependences only;
* ``ORDERED`` — a plain memory access (``ld``/``st`` without ``.volatile``, ``.relaxed``,
  ``.acquire``, ``.release`` or ``.mmio``; ``ldu``, ``ldmatrix``, ``stmatrix``, ``wmma.load``/
  ``store``, textures and surfaces, ``prefetch``) or a warp collective that is not ``.aligned``
  (``shfl``, ``vote``, ``match``, ``redux``, ``activemask``, ``elect``): these keep their order
  relative to each other; pure instructions may pass them;
* ``BARRIER`` — everything else: barriers and fences (``bar``, ``barrier``, ``membar``,
  ``fence``), atomics and strong or volatile accesses, asynchronous operations and their waits
  (``cp.async*``, ``cp.reduce.async*``, ``wgmma*``, ``mbarrier*``, ``tcgen05*``,
  ``st.async``/``red.async``), control transfers and calls, ``alloca``/``stack*``,
  ``nanosleep``, ``setmaxnreg``, ``griddepcontrol``, a read of a special register that changes
  under the thread (``%clock``, ``%globaltimer``, ``%warpid``, ``%smid``, ``%pm*`` ...), and
  every opcode the ISA table does not know. Nothing moves across a barrier.

Of the ``ORDERED`` instructions, a *load* (:func:`reads_memory_only`: ``ld``, ``ldu``,
``ldmatrix``, ``wmma.load``, textures and surface loads and queries, ``prefetch``) only reads
memory, so two loads with no other ``ORDERED`` instruction between them may trade places: what
a weak load returns depends on the stores before it, not on the loads (the PTX memory model
orders weak accesses of one thread only through the stores and synchronisation around them;
LLVM's NVVM intrinsics for ``wmma.load`` are ``IntrReadMem``, for ``wmma.mma`` ``IntrNoMem``).
A store, a surface store or a warp collective keeps its place relative to every load and to
every other ``ORDERED`` instruction.

An instruction that writes or reads the carry flag (``add.cc``, ``addc`` ... ``madc``) also
belongs to the carry chain: those keep their order relative to each other.

An instruction is *speculatable* (:func:`speculatable`; what loop-invariant hoisting,
:mod:`ptxalloc.passes.hoist` and :mod:`ptxalloc.verify.hoist`, may execute where the original
did not) when it is ``PURE``, unguarded, outside the carry chain and not warp-synchronous: the
``.aligned`` matrix instructions (``mma``, ``wmma.mma``, ``movmatrix``) need every thread of
the warp to execute them together, so they may not move to where control flow differs. PTX
arithmetic does not trap (an integer division by zero gives an unspecified value), so a pure
instruction executed early is observable only through the register it writes.
"""

from __future__ import annotations

import re

from .instruction import Instruction
from .operands import Sym

PURE, ORDERED, BARRIER = 0, 1, 2

_PURE_BASES = frozenset("""
abs add addc and bfe bfi bfind bmsk brev clz cnot copysign cos cvt cvta div dp2a dp4a ex2 fma
fns isspacep istypep lg2 lop3 mad mad24 madc mapa max min mma mov movmatrix mul mul24 neg not
or popc prmt rcp rem rsqrt sad selp set setp shf shl shr sin slct sqrt sub subc szext tanh
testp xor vabsdiff vabsdiff2 vabsdiff4 vadd vadd2 vadd4 vavrg2 vavrg4 vmad vmax vmax2 vmax4
vmin vmin2 vmin4 vset vset2 vset4 vshl vshr vsub vsub2 vsub4
""".split())

#: Plain memory accesses (unless a strong or volatile qualifier makes them synchronisation).
_MEMORY_BASES = frozenset(("ld", "ldu", "st", "ldmatrix", "stmatrix", "prefetch", "prefetchu",
                           "tex", "tld4", "txq", "suld", "sust", "suq"))

#: Warp collectives without ``.aligned``: kept in order like memory accesses.
_COLLECTIVE_BASES = frozenset(("shfl", "vote", "match", "redux", "activemask", "elect"))

#: ``ORDERED`` opcodes that only read memory (``wmma.load`` is matched apart).
_LOAD_BASES = frozenset(("ld", "ldu", "ldmatrix", "prefetch", "prefetchu", "tex", "tld4",
                         "txq", "suld", "suq"))

_STRONG = re.compile(r"\.(?:volatile|relaxed|acquire|release|mmio|async)\b")

#: Special registers fixed for the thread's lifetime (PTX ISA chapter 10): reading one is pure,
#: and a ``mov`` of one can be recomputed anywhere (:mod:`ptxalloc.spill.remat`). %clock,
#: %warpid, %smid and the like are not. (The checker keeps its own copy, for independence.)
FIXED_SPECIAL = re.compile(
    r"%(?:tid|ntid|ctaid|nctaid|laneid|gridid|nsmid|lanemask_(?:eq|le|lt|ge|gt)"
    r"|clusterid|nclusterid|cluster_ctaid|cluster_nctaid|cluster_ctarank|cluster_nctarank"
    r"|is_explicit_cluster|total_smem_size|aggr_smem_size|dynamic_smem_size)(?:\.[xyzw])?$")

_KIND_CACHE: dict[str, int] = {}


def _opcode_kind(opcode: str) -> int:
    kind = _KIND_CACHE.get(opcode)
    if kind is None:
        base = opcode.split(".", 1)[0]
        if base in _PURE_BASES:
            kind = PURE
        elif base == "wmma":
            kind = PURE if opcode.startswith("wmma.mma") else (
                BARRIER if _STRONG.search(opcode) else ORDERED)
        elif base in _MEMORY_BASES:
            kind = BARRIER if _STRONG.search(opcode) else ORDERED
        elif base in _COLLECTIVE_BASES:
            kind = ORDERED
        else:
            kind = BARRIER
        _KIND_CACHE[opcode] = kind
    return kind


def effect_kind(ins: Instruction) -> int:
    """``PURE``, ``ORDERED`` or ``BARRIER`` (module docstring)."""
    if not ins.known:
        return BARRIER
    kind = _opcode_kind(ins.opcode)
    if kind == PURE:
        for op in ins.ops:
            if type(op) is Sym and op.text.startswith("%") and not FIXED_SPECIAL.match(op.text):
                return BARRIER      # %clock, %warpid, %smid ...: its value depends on when
    return kind


def reads_memory_only(ins: Instruction) -> bool:
    """Whether ``ins`` is an ``ORDERED`` load: it reads memory and writes none (module
    docstring); loads may pass each other, nothing else of kind ``ORDERED`` may."""
    if effect_kind(ins) != ORDERED:
        return False
    op = ins.opcode
    return op.split(".", 1)[0] in _LOAD_BASES or op.startswith("wmma.load")


def uses_carry(ins: Instruction) -> bool:
    """Whether the instruction writes or reads the carry flag CC."""
    op = ins.opcode
    return ".cc" in op or op.startswith(("addc", "subc", "madc"))


#: Pure instructions that every thread of a warp must execute together (``.aligned``).
_WARP_SYNCHRONOUS_BASES = frozenset(("mma", "wmma", "movmatrix"))


def speculatable(ins: Instruction) -> bool:
    """Whether ``ins`` may execute where the original did not (module docstring)."""
    return (ins.guard < 0 and effect_kind(ins) == PURE and not uses_carry(ins)
            and ins.base not in _WARP_SYNCHRONOUS_BASES)
