"""Adjacent spill accesses merged into ``.v2``/``.v4`` accesses (seed 002 "Spill Code
Optimization", Optimization 2 "Coalesce Adjacent Loads/Stores"; knob ``SpillVectorize``;
docs/allocated-ptx.md, "Merged spill accesses").

After allocation, a *run* of inserted stores (or of inserted reloads) with nothing between
them — the spill stores after a definition, the ``//@save``s before a call and the
``//@restore``s after it, a ``.func``'s ``//@csave`` prologue and ``//@crestore`` epilogues —
touches distinct slots and so may be written in any order. Where 2 or 4 members of one kind
and one width (32 or 64 bits) cover one aligned 8- or 16-byte piece of the spill array, they
become one vector access, registers in slot order, annotated with every value:

    st.local.v2.b32	[__ptxalloc_spill+8], {%R1, %R7};	//@spill %a#1 %b#2

The slot layout (:mod:`.slots`) puts values stored or reloaded together side by side so that
such pieces exist. The merge rewrites only the text written out: the allocation itself, its
figures (spill bytes are bytes) and the reports keep one instruction per value.
"""

from __future__ import annotations

import re

from ..ir import isa
from ..ir.edits import Merged
from ..ir.instruction import Instruction
from ..ir.operands import Mem, Reg, Sym, Vec
from ..ir.registers import RegTable

# the two patterns are texts, compiled by re on first use: only a function with spill code
# reads them (start-up, issue 16)
#: the scalar spill accesses a merge may take: (store?, space, bits)
_SCALAR = r"(st|ld)\.(local|shared)\.b(32|64)$"
#: the largest vector access of each width: 4 x 32 bits, 2 x 64 bits (16 bytes)
MAX_MEMBERS = {32: 4, 64: 2}
#: a physical general register's family, pair mark and number (alloc/output.py's names)
_PHYSICAL = r"(U?R)(D?)(\d+)$"


def _member(s) -> tuple | None:
    """``(run key, byte offset, register id)`` of an inserted scalar spill access ``s`` that
    a merge may take, or None. The run key (kind, opcode, base) groups what may merge."""
    if type(s) is not Instruction or s.origin is None or s.origin.slot is None or s.guard >= 0:
        return None
    m = re.match(_SCALAR, s.opcode)
    if m is None:
        return None
    store = m.group(1) == "st"
    mem, reg = (s.ops[0], s.ops[1]) if store else (s.ops[1], s.ops[0])
    if type(mem) is not Mem or type(reg) is not Reg or reg.comp or mem.rest or mem.suffix:
        return None
    try:
        off = int(mem.offset.replace(" ", "") or "0", 0)
    except ValueError:
        return None
    base = mem.base.text if type(mem.base) is Sym else ("register", mem.base.v)
    return (s.origin.kind, s.opcode, base), off, reg.v


def _annotation(members: list[Instruction]) -> str:
    """``//@spill %a#1 %b#2``: the members' kind once, then each member's value or register,
    from their annotations (as :meth:`Merged.annotation` writes it from their edits)."""
    words = [m.comment.split(None, 1) for m in members]
    return words[0][0] + " " + " ".join(w[1] for w in words)


def _merged(members: list[Instruction], off: int, regs: RegTable) -> Instruction:
    """One vector access doing what ``members`` (in slot order, from offset ``off``) do."""
    first = members[0]
    store = first.opcode.startswith("st.")
    head, bits = first.opcode.rsplit(".", 1)
    opcode = f"{head}.v{len(members)}.{bits}"
    mem = first.ops[0] if store else first.ops[1]
    address = Mem(mem.base, f"+{off}")
    vec = Vec([Reg(m.ops[1].v if store else m.ops[0].v) for m in members])
    ins = Instruction(opcode, [address, vec] if store else [vec, address], line=first.line,
                      loc=first.loc, comment=_annotation(members))
    ins.origin = Merged(tuple(m.origin for m in members))
    isa.classify(ins, regs)
    return ins


def _units(name: str) -> set:
    """The 32-bit registers a physical name covers (``%RD4``: R4 and R5), or the name itself."""
    m = re.search(_PHYSICAL, name)
    if m is None:
        return {name}
    fam, n = m.group(1), int(m.group(3))
    return {(fam, n), (fam, n + 1)} if m.group(2) else {(fam, n)}


def _pieces(run: list[tuple], names) -> dict[int, tuple[int, list[int]]]:
    """The merges of one run (its members ``(index, key, offset, register, bits)``, all
    stores or all reloads): ``{index of the piece's first member: (offset, member indices in
    slot order)}``, per key the largest aligned pieces first. A merge moves members up to
    the first one's place, so the run must touch every byte once and, for reloads, every
    register once and no shared frame's base register (else it is kept as written)."""
    spans = sorted((m[1][2], m[2], m[2] + m[4] // 8) for m in run)
    if any(a[0] == b[0] and b[1] < a[2] for a, b in zip(spans, spans[1:])):
        return {}
    if not run[0][1][1].startswith("st."):
        # a shared slot's base register is read by every member: no reload may write it
        seen: set = set()
        for m in run:
            if type(m[1][2]) is tuple:
                seen |= _units(names(m[1][2][1]))
        for m in run:
            units = _units(names(m[3]))
            if seen & units:
                return {}
            seen |= units
    out = {}
    for key in dict.fromkeys(m[1] for m in run):
        at = {m[2]: m for m in run if m[1] == key}
        bits = next(iter(at.values()))[4]
        size = bits // 8
        taken: set[int] = set()
        n = MAX_MEMBERS[bits]
        while n >= 2:
            width = n * size
            for off in sorted(at):
                if off % width or any(off + k * size not in at or off + k * size in taken
                                      for k in range(n)):
                    continue
                piece = [at[off + k * size][0] for k in range(n)]
                taken.update(off + k * size for k in range(n))
                out[min(piece)] = (off, piece)
            n //= 2
    return out


def merge_spill_accesses(body: list, regs: RegTable, names) -> tuple[list, int]:
    """``body`` with every mergeable run of inserted spill accesses merged (module
    docstring), and the number of instructions the merges saved. ``names`` maps register ids
    to their physical names."""
    out: list = []
    saved = 0
    k = 0
    n = len(body)
    while k < n:
        got = _member(body[k])
        if got is None:
            out.append(body[k])
            k += 1
            continue
        store = body[k].opcode.startswith("st.")
        run = []
        e = k
        while e < n:
            got = _member(body[e])
            if got is None or body[e].opcode.startswith("st.") != store:
                break
            run.append((e - k, got[0], got[1], got[2], int(body[e].opcode[-2:])))
            e += 1
        pieces = _pieces(run, names) if len(run) > 1 else {}
        skip = {i for _, idx in pieces.values() for i in idx}
        for i in range(e - k):
            if i in pieces:
                off, idx = pieces[i]
                out.append(_merged([body[k + j] for j in idx], off, regs))
                saved += len(idx) - 1
            elif i not in skip:
                out.append(body[k + i])
        k = e
    return out, saved
