"""Spill slots promoted to a register the allocation left free (issue 13; spill/promote.py):
the stores and reloads become ``//@move`` copies, proven by the checker, without raising the
register count; a slot nothing accesses any more takes no frame bytes."""

from __future__ import annotations

import pytest

from conftest import DATA, assert_verified
from ptxalloc import ptxas
from ptxalloc.pipeline import allocate

OFF = {"SpillSlotsToRegisters": 0}


def _bytes(res) -> int:
    return sum(f.spill_stores_bytes + f.spill_loads_bytes for f in res.functions)


def test_a_slot_with_a_free_register_becomes_copies():
    """At K = 3, %r3 (the result of the second call) is spilled while R2 stays free over its
    whole slot range: the store and reload become copies and the frame disappears."""
    text = (DATA / "abi" / "tail.ptx").read_text()
    off = allocate(text, registers=3, knobs=OFF)
    on = allocate(text, registers=3)
    k_off = next(f for f in off.functions if f.name == "k_tail")
    k_on = next(f for f in on.functions if f.name == "k_tail")
    assert "//@spill %r3#" in k_off.text and "//@reload %r3#" in k_off.text
    assert "ld.local" not in k_on.text and "st.local" not in k_on.text, k_on.text
    assert "//@move %r3#" in k_on.text
    assert k_on.stack_frame_bytes == 0 and "__ptxalloc_spill" not in k_on.text
    assert k_on.registers == k_off.registers
    assert_verified(on)
    if ptxas.available():
        got = ptxas.assemble(on.ptx, "sm_80")
        assert got.ok, got.output


#: the two hand-written files spill at these budgets only in the order written: the
#: pressure-aware schedule (on by default) takes their spills away
WRITTEN = {"schedule": 0}


@pytest.mark.parametrize("name,k,knobs", [("hand/guarded_def.ptx", 3, WRITTEN),
                                          ("hand/guarded_def.ptx", 4, WRITTEN),
                                          ("hand/sched_loads.ptx", 6, WRITTEN),
                                          ("texture_sm80.ptx", 8, {}),
                                          ("abi/fib.ptx", 3, {}), ("diff/acc16_sm90.ptx", 6, {})])
def test_promotion_lowers_spill_bytes_and_is_proven(name, k, knobs):
    text = (DATA / name).read_text()
    on = allocate(text, registers=k, knobs=knobs)
    off = allocate(text, registers=k, knobs={**OFF, **knobs})
    assert _bytes(on) < _bytes(off)
    assert [f.registers for f in on.functions] == [f.registers for f in off.functions]
    assert_verified(on)
