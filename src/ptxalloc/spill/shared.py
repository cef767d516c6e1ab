"""Spilling to shared memory, ``--spill-to shared`` (seed 004 "Spilling Overview": LMEM the
default spill destination, SMEM the alternative; docs/allocated-ptx.md, "Spilling to shared
memory").

The spill slots are laid out as for local memory (:mod:`slots`: one frame per thread), and the
frames of a block's threads sit side by side in one ``.shared`` array of ``frame x threads``
bytes, declared in the function under a name nothing else in the module uses. Each thread finds
its frame at ``array + linear thread index x frame``; the linear index is
``(%tid.z x %ntid.y + %tid.y) x %ntid.x + %tid.x`` (just ``%tid.x`` when ``.reqntid`` makes the
block one-dimensional; ``.maxntid`` bounds only the product: CUDA's ``__launch_bounds__(N)``
writes ``.maxntid N, 1, 1`` and still launches 2-D blocks of N threads). A short sequence at the function's entry computes that address
once into a register of its own (the *base*), which every spill store and reload then uses as
``[base+offset]``. The base is an ordinary value to the allocator — live from entry to the last
spill access, never spilled — so the register it costs is counted like any other; the
sequence's two scratch registers are live only at entry. The frame size is known only once
the slots are laid out: the sequence carries a placeholder until :func:`set_frame`.

The threads per block come from ``.reqntid``, else ``.maxntid`` (the linear index stays below
the product of its dimensions), else ``--block-size N`` (the user's word for
a kernel without launch bounds), which the output then makes a launch bound of its own:
``.maxntid N, 1, 1`` is added to the function's header (:func:`bound_launches`), so a launch
with more threads than the area has frames fails instead of sharing frames; with none, the
function is refused with an error naming it.
So is any function the calling convention applies to (a ``.func``, a kernel that calls), with
the seed's reason: "Smem spilling should not be enabled when functions use abi" — a callee's
frame would have to be addressed from its caller's.
"""

from __future__ import annotations

import re

from ..errors import AllocationError
from ..ir import isa
from ..ir.edits import Edit, EditKind
from ..ir.instruction import DIRECTIVE, Instruction, Raw
from ..ir.module import Function
from ..ir.operands import Imm, Reg, Sym
from ..ir.registers import RegClass, RegTable

SHARED_ARRAY = "__ptxalloc_smem"
FRAME_PLACEHOLDER = "0"            # the frame operand of the last ``mad`` until set_frame
ABI_REASON = "Smem spilling should not be enabled when functions use abi (seed 004)"
MAX_STATIC_SHARED = 48 * 1024      # static .shared bytes one block may declare


def check_allowed(fn: Function) -> None:
    """Refuse a function the calling convention applies to, with the seed's reason."""
    from ..alloc.convention import applies

    if applies(fn):
        why = "a .func" if fn.kind == "func" else "a kernel that makes calls"
        raise AllocationError(f"function '{fn.name}': --spill-to shared refused: it is {why}, "
                              f"and {ABI_REASON}")


def block_threads(fn: Function, block_size: int | None) -> tuple[int, str, bool]:
    """Threads per block for the shared spill area: (count, where it came from, whether the
    block is one-dimensional). Refuses a function whose block size is unknown."""
    for key in ("reqntid", "maxntid"):
        val = fn.directives.get(key)
        if val:
            dims = [max(1, int(d)) for d in (val if isinstance(val, list) else [val])]
            n = 1
            for d in dims:
                n *= d
            # only .reqntid fixes the shape: a kernel with .maxntid N, 1, 1 (CUDA's
            # __launch_bounds__(N)) may be launched with a 2-D or 3-D block of N threads
            one_dim = key == "reqntid" and all(d == 1 for d in dims[1:])
            return n, f".{key} {', '.join(map(str, dims))}", one_dim
    if block_size is not None:
        return block_size, f"--block-size {block_size}", False
    raise AllocationError(f"function '{fn.name}': --spill-to shared needs the threads per "
                          f"block: the function has no .reqntid or .maxntid; give "
                          f"--block-size N")


def bound_launches(fn: Function, threads: int) -> None:
    """Add ``.maxntid threads, 1, 1`` to the allocated ``fn``'s header when it has no launch
    bound (the area was sized for ``--block-size``): the driver then refuses a launch of more
    threads than the area holds frames for."""
    if fn.directives.get("reqntid") or fn.directives.get("maxntid"):
        return
    fn.header += f"\n.maxntid {threads}, 1, 1"
    fn.directives = dict(fn.directives, maxntid=[threads, 1, 1])


def array_name(fn: Function, module_decls: list[str]) -> str:
    """``__ptxalloc_smem``, or ``__ptxalloc_smem_1`` ... the first name that no directive of
    the function or of the module and no symbol the function uses declares or names."""
    names: set[str] = set()
    for text in module_decls:
        names.update(re.findall(r"[\w$]+", text))
    for s in fn.body:
        if type(s) is Raw and s.kind == DIRECTIVE:
            names.update(re.findall(r"[\w$]+", s.text))
        elif type(s) is Instruction:
            names.update(op.text for op in s.ops if type(op) is Sym)
    name, n = SHARED_ARRAY, 0
    while name in names:
        n += 1
        name = f"{SHARED_ARRAY}_{n}"
    return name


def base_sequence(regs: RegTable, array: str, one_dimensional: bool,
                  line: int = 0) -> tuple[int, list[Instruction]]:
    """New registers and the entry sequence that leaves this thread's frame address in the
    base register; returns the base register and the instructions (``//@sbase``), the frame
    operand still the placeholder."""
    base = regs.add("%__ptxalloc_sbase", ".b32", RegClass.GPR32)
    scratch = regs.add("%__ptxalloc_sbase_t", ".b32", RegClass.GPR32)
    other = regs.add("%__ptxalloc_sbase_u", ".b32", RegClass.GPR32)
    if one_dimensional:
        steps = [("mov.u32", [Reg(base), Sym("%tid.x")])]
    else:
        steps = [("mov.u32", [Reg(scratch), Sym("%ntid.y")]),
                 ("mov.u32", [Reg(base), Sym("%tid.z")]),
                 ("mov.u32", [Reg(other), Sym("%tid.y")]),
                 ("mad.lo.u32", [Reg(base), Reg(base), Reg(scratch), Reg(other)]),
                 ("mov.u32", [Reg(scratch), Sym("%ntid.x")]),
                 ("mov.u32", [Reg(other), Sym("%tid.x")]),
                 ("mad.lo.u32", [Reg(base), Reg(base), Reg(scratch), Reg(other)])]
    steps += [("mov.u32", [Reg(scratch), Sym(array)]),
              ("mad.lo.u32", [Reg(base), Reg(base), Imm(FRAME_PLACEHOLDER), Reg(scratch)])]
    out = []
    for opcode, ops in steps:
        ins = Instruction(opcode, ops, line=line)
        isa.classify(ins, regs)
        ins.origin = Edit(EditKind.SBASE)
        out.append(ins)
    return base, out


def insert_at_entry(body: list, sequence: list[Instruction]) -> list:
    """``body`` with ``sequence`` before its first instruction or label (after the
    declarations)."""
    for i, s in enumerate(body):
        if type(s) is not Raw:
            return body[:i] + sequence + body[i:]
    return body + sequence


def set_frame(body: list, frame: int) -> None:
    """Put the frame size into the entry sequence's last ``mad`` (the placeholder)."""
    for s in body:
        if type(s) is Instruction and s.origin is not None and s.origin.kind is EditKind.SBASE \
                and s.opcode == "mad.lo.u32" and type(s.ops[2]) is Imm:
            s.ops[2] = Imm(str(frame))


def declaration(array: str, frame: int, threads: int) -> str:
    """The ``.shared`` declaration of the spill area: ``frame x threads`` bytes."""
    return f".shared .align 16 .b8 {array}[{frame * threads}];"


def check_size(fn: Function, frame: int, threads: int, own: int = 0) -> None:
    """The spill area, with the function's ``own`` static shared bytes, fits the static shared
    memory one block may declare."""
    if frame * threads + own > MAX_STATIC_SHARED:
        raise AllocationError(f"function '{fn.name}': the shared spill area of {frame} bytes x "
                              f"{threads} threads = {frame * threads} bytes with the "
                              f"function's own {own} bytes of .shared exceeds the "
                              f"{MAX_STATIC_SHARED} bytes of static shared memory a block may "
                              f"declare; spill to local memory instead")

