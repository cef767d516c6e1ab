"""Pre-pass: serialize ``wgmma`` groups whose registers in flight exceed the budget (PTX ISA
9.7.15.7.3 "wgmma.wait_group"; ptxas's "wgmma.mma_async instructions are serialized" warning).

The registers of asynchronous instructions in flight (:mod:`asynchrony`) can be neither spilled
nor shared, so at every instruction they must fit in the budget together with the
instruction's own operands. Software-pipelined code (Triton's fused attention: the P·V
``wgmma`` of one iteration still running while the next iteration's Q·Kᵀ ``wgmma`` issues)
keeps several groups' accumulators in flight at once; when they do not fit, this pass does what
ptxas does: it waits for every committed group right after each ``wgmma.commit_group``
(``wgmma.wait_group.sync.aligned 0``, annotated ``//@serialize``), so that at most one group —
the one being issued — is in flight, and says so in a warning. Waiting earlier is always legal:
``wait_group`` only blocks until earlier groups complete, and one placed right after a
``commit_group`` (itself ``.sync.aligned``) is executed by exactly the threads that executed the
commit.

When one group alone still does not fit (Triton's attention backward: two 32-register
accumulators in one group), each ``wgmma.mma_async`` followed by another one in its group is
made a group of its own, as ptxas serializes: ``wgmma.commit_group``, ``wgmma.wait_group 0`` and
``wgmma.fence`` right after it, all ``//@serialize``. The extra group is complete at once, so
every later ``wait_group N`` waits for what it waited for before (the rest of the original
group is still committed by the original commit); the fence orders any register write before
the next ``wgmma`` (a reload: :mod:`ptxalloc.spill.windows`). The three are ``.sync.aligned``
and placed where the unguarded ``wgmma.mma_async`` before them was executed: by the same
threads. Only a budget that one ``wgmma.mma_async``'s registers and one instruction's operands
exceed after that is refused, naming the instruction.
"""

from __future__ import annotations

from typing import Callable

from ..analysis.in_flight import WGMMA_WAIT, in_flight, retires
from ..analysis.need import group_shapes, operand_shapes
from ..errors import AllocationError
from ..ir import isa
from ..ir.edits import Edit, EditKind
from ..ir.instruction import Instruction, Label
from ..ir.module import Function
from ..ir.operands import Imm
from ..target.units import RegFile
from ..util import bits

SERIALIZE = "//@serialize"
WARNING = ("warning: wgmma.mma_async instructions are serialized: the registers of the wgmma "
           "groups in flight at once ({need:g} at line {line}) exceed the budget of {k}; a "
           "'wgmma.wait_group.sync.aligned 0' follows each of the {n} wgmma.commit_group "
           "instruction(s)")


WARNING_SPLIT = ("warning: wgmma.mma_async instructions are serialized within their groups: "
                 "the registers one group keeps in flight ({need:g} at line {line}) exceed the "
                 "budget of {k}; {n} wgmma.mma_async instruction(s) are each followed by a "
                 "'wgmma.commit_group', a 'wgmma.wait_group 0' and a 'wgmma.fence'")


def _overflow(fn: Function, regfile: RegFile, pinned: set[int]):
    """The first instruction (in CFG order) where the registers in flight and its operands do
    not fit, as (instruction, registers needed, registers in flight); None when all fit."""
    got = in_flight(fn)
    if got is None:
        return None
    cfg, before = got
    groups = group_shapes(fn)
    for ins, mask in zip(cfg.instrs, before):
        if not mask:
            continue
        flying = bits(mask)
        after = [] if retires(ins) == WGMMA_WAIT else flying
        used = ins.uses + ins.defs if ins.guard >= 0 else ins.uses
        for values in (flying + list(used), after + list(ins.defs)):
            shapes = operand_shapes(fn, values, groups, pinned)
            if not regfile.fits(shapes):
                need = sum(s.units for s in shapes) / 2
                return ins, need, sum(s.units for s in operand_shapes(
                    fn, flying, groups, pinned)) / 2
    return None


def _insert_waits(fn: Function) -> int:
    """A ``wgmma.wait_group 0`` after every ``wgmma.commit_group`` not already followed by
    one; returns how many were inserted."""
    body = []
    statements = fn.body
    inserted = 0
    for i, s in enumerate(statements):
        body.append(s)
        if type(s) is not Instruction or not s.opcode.startswith("wgmma.commit_group"):
            continue
        nxt = next((t for t in statements[i + 1:] if type(t) is Instruction), None)
        if nxt is not None and retires(nxt) == WGMMA_WAIT and nxt.guard < 0:
            continue
        body.append(_serialization("wgmma.wait_group.sync.aligned", s.line, fn, [Imm("0")]))
        inserted += 1
    fn.body = body
    return inserted


def _serialization(opcode: str, line: int, fn: Function, ops=()) -> Instruction:
    """An inserted ``wgmma`` synchronisation, annotated ``//@serialize``."""
    ins = Instruction(opcode, list(ops), line=line, comment=SERIALIZE)
    ins.origin = Edit(EditKind.SERIALIZE)     # inserted by this run: its annotation is kept
    isa.classify(ins, fn.regs)
    return ins


def _split_groups(fn: Function) -> int:
    """Each ``wgmma.mma_async`` followed, before its group's commit, by another one: a
    ``wgmma.commit_group`` and a ``wgmma.wait_group 0`` right after it and a ``wgmma.fence``
    right after those (the next ``wgmma`` may read registers written meanwhile: a reload).
    Returns how many groups were split off."""
    body = []
    statements = fn.body
    split = 0
    for i, s in enumerate(statements):
        body.append(s)
        if type(s) is not Instruction or not s.opcode.startswith("wgmma.mma_async") \
                or s.guard >= 0:
            continue
        nxt = None
        for t in statements[i + 1:]:
            if type(t) is Label:
                break
            if type(t) is Instruction and t.opcode.startswith(("wgmma.mma_async",
                                                               "wgmma.commit_group")):
                nxt = t
                break
        if nxt is None or not nxt.opcode.startswith("wgmma.mma_async"):
            continue
        body.append(_serialization("wgmma.commit_group.sync.aligned", s.line, fn))
        body.append(_serialization("wgmma.wait_group.sync.aligned", s.line, fn, [Imm("0")]))
        body.append(_serialization("wgmma.fence.sync.aligned", s.line, fn))
        split += 1
    fn.body = body
    return split


def serialize_wgmma(fn: Function, regfile: RegFile, pinned: set[int],
                    name: Callable[[int], str], serialize: bool = True) -> list[str]:
    """Serialize the ``wgmma`` groups of ``fn`` (in place) when the registers in flight do not
    fit the budget (and ``serialize``, knob ``SerializeWgmma``, allows it); returns the
    warnings. Raises :class:`AllocationError` when they still do not fit, naming the
    instruction."""
    over = _overflow(fn, regfile, pinned)
    if over is None:
        return []
    notes = []
    serialized = False
    if serialize and any(s.opcode.startswith("wgmma.commit_group") for s in fn.instructions()):
        first = over
        serialized = True
        n = _insert_waits(fn)
        if n:
            notes.append(WARNING.format(need=first[1], line=first[0].line, k=regfile.k, n=n))
            over = _overflow(fn, regfile, pinned)
            if over is None:
                return notes
        second = over
        n = _split_groups(fn)
        if n:
            notes.append(WARNING_SPLIT.format(need=second[1], line=second[0].line,
                                              k=regfile.k, n=n))
            over = _overflow(fn, regfile, pinned)
            if over is None:
                return notes
    ins, need, flying = over
    if serialized:          # one group alone does not fit: its registers are named
        raise AllocationError(
            f"{fn.filename}:{ins.line}: function '{fn.name}': '{ins.render(name)}' needs "
            f"{need:g} registers at once even with every wgmma.mma_async waited for at once: "
            f"{flying:g} registers of its wgmma.mma_async in flight (accumulators and A "
            f"fragments, which can be neither spilled nor shared before the wait) and its "
            f"operands, more than the budget of {regfile.k} allows")
    raise AllocationError(
        f"{fn.filename}:{ins.line}: function '{fn.name}': '{ins.render(name)}' needs {need:g} "
        f"registers at once (its operands and {flying:g} registers of asynchronous "
        f"instructions in flight), more than the budget of {regfile.k} allows")
