"""Typed records of inserted code (issue 12, item 4; ir/edits.py): every instruction an
allocation inserts carries an :class:`~ptxalloc.ir.edits.Edit` whose annotation is the ``//@``
comment written to the output (the text the checker reads, docs/allocated-ptx.md), and spill
slots are laid out in the order their keys always had. Inputs: the calling-convention files of
tests/data/abi/, tests/data/hand/many_preds.ptx, tests/data/pressure_sm80.ptx and the sm_90a
``wgmma`` kernel of tests/data/wgmma/."""

from __future__ import annotations

import pytest

from conftest import DATA, assert_verified
from ptxalloc.ir.edits import Edit, EditKind, Merged, Slot, callee_slot, save_slot, value_slot
from ptxalloc.ir.instruction import Instruction
from ptxalloc.pipeline import allocate

#: (file, budget): together they insert every kind of code (pressure_sm80.ptx's predicate
#: spills need its order as written: scheduled, its loads pass each other and fewer are live)
CASES = [("abi/live_across.ptx", 15, {}), ("abi/fib.ptx", 64, {}),
         ("hand/many_preds.ptx", 8, {}), ("pressure_sm80.ptx", 15, {"knobs": {"schedule": 0}}),
         ("wgmma/wgmma_serialize_sm90a.ptx", 32, {}),
         ("hand/many_preds.ptx", 8, {"spill_to": "shared", "block_size": 128}),
         ("hand/spill_vectorize.ptx", 8, {"knobs": {"schedule": 0, "recompute": 0}})]


def test_every_inserted_instruction_carries_an_edit_written_as_its_annotation():
    seen = set()
    merged = set()
    for name, k, more in CASES:
        path = DATA / name
        res = allocate(path.read_text(), registers=k, filename=str(path), **more)
        assert_verified(res)
        for fr in res.functions:
            for s in fr.function.body:
                if type(s) is not Instruction or s.origin is None:
                    continue
                assert type(s.origin) in (Edit, Merged), (name, s.origin)
                assert s.comment == s.origin.annotation(fr.function.regs.names)
                assert (s.origin.slot is not None) == (s.origin.stores or s.origin.loads)
                seen.add(s.origin.kind)
                if type(s.origin) is Merged:
                    merged.add(s.origin.kind)
    assert seen == set(EditKind)
    # SpillVectorize (on by default) merges stores, reloads, saves and callee saves
    assert merged >= {EditKind.SPILL, EditKind.RELOAD, EditKind.CSAVE, EditKind.CRESTORE}, merged


@pytest.mark.parametrize("edit, text", [
    (Edit(EditKind.SPILL, 3, value_slot(7)), "//@spill %r3#3"),
    (Edit(EditKind.RELOAD, 3, value_slot(7)), "//@reload %r3#3"),
    (Edit(EditKind.REMAT, 0), "//@remat %r0#0"),
    (Edit(EditKind.PSPILL, 1), "//@pspill %r1#1"),
    (Edit(EditKind.PRELOAD, 1), "//@preload %r1#1"),
    (Edit(EditKind.SAVE, 2, save_slot(9)), "//@save %r2#2"),
    (Edit(EditKind.RESTORE, 2, save_slot(9)), "//@restore %r2#2"),
    (Edit(EditKind.CSAVE, slot=callee_slot(24), register=24), "//@csave R24"),
    (Edit(EditKind.CRESTORE, slot=callee_slot(24), register=24), "//@crestore R24"),
    (Edit(EditKind.MOVE, 4), "//@move %r4#4"),
    (Edit(EditKind.SERIALIZE), "//@serialize"),
    (Edit(EditKind.SBASE), "//@sbase"),
])
def test_annotation_text(edit, text):
    assert edit.annotation([f"%r{i}" for i in range(8)]) == text


def test_slots_are_ordered_as_their_key_text_was():
    """The frame layout depends on the order slots are considered in: by kind, then by the
    decimal text of the id (``('value', 12)`` before ``('value', 3)``)."""
    slots = [value_slot(12), value_slot(3), save_slot(100), callee_slot(24), value_slot(1),
             save_slot(2), value_slot(120)]
    assert sorted(slots, key=Slot.order) == sorted(slots, key=lambda s: repr(tuple(s)))
    assert value_slot(3) == ("value", 3) and hash(value_slot(3)) == hash(("value", 3))
