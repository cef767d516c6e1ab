"""Spill slots promoted to a register the allocation left free (issue 13; spill/promote.py):
the stores and reloads become ``//@move`` copies, proven by the checker, without raising the
register count (``SpillSlotsToRegisters=1``) or up to the budget (``=2``, the default); a
slot nothing accesses any more takes no frame bytes."""

from __future__ import annotations

import pytest

from conftest import DATA, assert_verified
from ptxalloc import ptxas
from ptxalloc.pipeline import allocate

# the spill choice of the seeds' cost, for which the cases below were chosen (with giving way,
# briggs's SpillEvictGroup, three of them leave no register free to promote a slot into; with
# results written into tuples' dead members, TupleReuse, texture_sm80's k_tex at K = 8 none:
# 64 bytes either way)
SEEDS_COST = {"SpillStaticWeight": 0, "SpillEvictGroup": 0, "TupleReuse": 0}
OFF = {"SpillSlotsToRegisters": 0, "SpillReloadsToRegisters": 0, **SEEDS_COST}
# registers below the high-water mark only, whole slots only
BELOW_MARK = {"SpillSlotsToRegisters": 1, "SpillReloadsToRegisters": 0, **SEEDS_COST}


def _bytes(res) -> int:
    return sum(f.spill_stores_bytes + f.spill_loads_bytes for f in res.functions)


def test_a_slot_with_a_free_register_becomes_copies():
    """At K = 3, %r3 (the result of the second call) is spilled while R2 stays free over its
    whole slot range: the store and reload become copies and the frame disappears."""
    text = (DATA / "abi" / "tail.ptx").read_text()
    off = allocate(text, registers=3, knobs=OFF)
    on = allocate(text, registers=3, knobs=BELOW_MARK)
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


#: these files spill at these budgets (or spill what the test is about) only in the order
#: written: the pressure-aware schedule (on by default) takes their spills away
WRITTEN = {"schedule": 0}


@pytest.mark.parametrize("name,k,knobs", [("hand/guarded_def.ptx", 3, WRITTEN),
                                          ("hand/guarded_def.ptx", 4, WRITTEN),
                                          ("hand/sched_loads.ptx", 6, WRITTEN),
                                          ("texture_sm80.ptx", 8, WRITTEN),
                                          ("abi/fib.ptx", 3, {}), ("diff/acc16_sm90.ptx", 6, {})])
def test_promotion_lowers_spill_bytes_and_is_proven(name, k, knobs):
    text = (DATA / name).read_text()
    on = allocate(text, registers=k, knobs={**BELOW_MARK, **knobs})
    off = allocate(text, registers=k, knobs={**OFF, **knobs})
    assert _bytes(on) < _bytes(off)
    assert [f.registers for f in on.functions] == [f.registers for f in off.functions]
    assert_verified(on)


@pytest.mark.parametrize("allocator,name,k,function,knobs", [
    ("fatpoint", "abi/param_scopes.ptx", 3, "pair", WRITTEN),
    ("briggs", "hand/many_preds.ptx", 5, "many_preds", {}),
    # recomputation without chains: with them (the default) the code this needs is gone
    ("briggs", "loops_sm80.ptx", 5, "_Z7k_earlyPiPKiii", {"recompute": 1}),
])
def test_promotion_up_to_the_budget(allocator, name, k, function, knobs):
    """A function that spills with registers of its budget unused (fat-point's ``pair`` at
    K = 3 uses 2 and spills 8 bytes): ``SpillSlotsToRegisters=2`` (the default) puts slots in
    those registers, so spill bytes fall (``pair``: to none) and the registers used rise, never
    above the budget; the checker proves it and ptxas assembles it."""
    text = (DATA / name).read_text()
    below = allocate(text, registers=k, allocator=allocator, knobs={**BELOW_MARK, **knobs})
    budget = allocate(text, registers=k, allocator=allocator,
                      knobs={"SpillReloadsToRegisters": 0, **SEEDS_COST, **knobs})
    f_below = next(f for f in below.functions if f.name == function)
    f_budget = next(f for f in budget.functions if f.name == function)
    assert f_below.registers < k
    got = f_budget.spill_stores_bytes + f_budget.spill_loads_bytes
    assert got < f_below.spill_stores_bytes + f_below.spill_loads_bytes
    assert f_below.registers < f_budget.registers <= k
    if function == "pair":
        assert got == 0 and "//@move" in f_budget.text
    assert_verified(budget)
    if ptxas.available():
        out = ptxas.assemble(budget.ptx, "sm_80")
        assert out.ok, out.output


@pytest.mark.parametrize("allocator,name,k,function,knobs", [
    ("fatpoint", "hand/recompute_chain.ptx", 4, "narrow", {}),
    ("briggs", "loops_sm80.ptx", 6, "_Z7k_earlyPiPKiii", {**WRITTEN, "recompute": 1}),
    # the schedule's first order alone: with the stores-last order k_vec spills 88 bytes at
    # K = 8 (96 before) and no reload is left to forward
    ("briggs", "vectors_sm80.ptx", 8, "_Z5k_vecP6float4PKS_P4int4PKS3_P7double2PKS7_",
     {"ScheduleStoresLast": 0}),
])
def test_reload_forwarded_through_a_free_register(allocator, name, k, function, knobs):
    """A slot reloaded twice in one block, with a register free between the two accesses
    (but not over the slot's whole range, which whole-slot promotion needs): with
    ``SpillReloadsToRegisters`` (the default) the second reload becomes ``//@move`` copies
    through that register, so spill bytes fall, registers stay within the budget, and the
    checker proves it."""
    text = (DATA / name).read_text()
    off = allocate(text, registers=k, allocator=allocator,
                   knobs={"SpillReloadsToRegisters": 0, **knobs})
    on = allocate(text, registers=k, allocator=allocator, knobs=knobs)
    f_off = next(f for f in off.functions if f.name == function)
    f_on = next(f for f in on.functions if f.name == function)
    assert (f_on.spill_stores_bytes + f_on.spill_loads_bytes
            < f_off.spill_stores_bytes + f_off.spill_loads_bytes)
    assert f_on.text.count("ld.local") < f_off.text.count("ld.local")
    assert f_on.text.count("//@move") > f_off.text.count("//@move")
    assert f_on.registers <= k
    assert_verified(on)
    if ptxas.available():
        out = ptxas.assemble(on.ptx, "sm_80")
        assert out.ok, out.output


def test_fenced_after_are_the_registers_of_the_wgmmas_before_the_next_fence():
    """Per instruction, the units of the registers a ``wgmma.mma_async`` after it accesses
    asynchronously, up to the next ``wgmma.fence`` (the kernel is straight-line code, where the
    CFG stretch of ir/fence_stretch.py is the text order): a copy into a promoted register
    written right after that instruction would come after the fence (the checker's rule,
    verify/fences.py), so promotion keeps off them there."""
    from ptxalloc.ir import isa
    from ptxalloc.ir.cfg import CFG
    from ptxalloc.ptx import parse_file
    from ptxalloc.analysis.interference import fenced_after

    fn = parse_file(str(DATA / "wgmma" / "wgmma_two_accumulators_sm90a.ptx")).functions[0]
    cfg = CFG(fn)
    mask_of = [1 << v for v in range(len(fn.regs))]
    after = fenced_after(cfg, mask_of)
    instrs = cfg.instrs
    fences = [p for p, ins in enumerate(instrs) if ins.opcode.startswith(isa.WGMMA_FENCE)]
    mmas = [p for p, ins in enumerate(instrs) if ins.opcode.startswith("wgmma.mma_async")]
    assert fences and mmas
    for p in range(len(instrs)):
        want = 0
        for q in range(p + 1, len(instrs)):
            if q in fences:
                break
            if q in mmas:
                for v in isa.async_operands(instrs[q])[0]:
                    want |= 1 << v
        assert after[p] == want, p
    # right after a fence: the accumulator of the wgmma it orders; right before it: nothing
    assert after[fences[0]] and after[fences[0] - 1] == 0


def test_promoted_copies_keep_off_a_wgmmas_registers_after_its_fence(monkeypatch):
    """Triton's attention backward (sm_90a, tests/data/triton) under Briggs at K = 128: a
    forwarded reload once kept its value in an accumulator register of the next wgmma, dead
    there, between the fence and the wgmma (``mov.b32 %R65, %R124; //@move``) and the checker
    refuted the allocation. With the fence's registers busy the allocation is proven; with
    promotion's :func:`fenced_after` emptied the same run is refuted, by the rule of verify/fences.py."""
    from ptxalloc.errors import VerificationError
    from ptxalloc.spill import promote

    text = (DATA / "triton" / "attn_bwd_d64.ptx").read_text()
    res = allocate(text, 128, allocator="briggs")
    assert_verified(res)
    monkeypatch.setattr(promote, "fenced_after", lambda cfg, mask_of: [0] * len(cfg.instrs))
    with pytest.raises(VerificationError, match="after a wgmma.fence and before a wgmma"):
        allocate(text, 128, allocator="briggs")


@pytest.mark.parametrize("name,k", [("pressure_sm80.ptx", 24), ("tensor_sm80.ptx", 28),
                                    ("triton/sm80_matmul.ptx", 32)])
def test_busy_units_are_the_units_of_the_live_registers(monkeypatch, name, k):
    """:func:`busy_units` keeps the occupied units from one point to the next (issue 16);
    at every point of every call in real spilling allocations they are what the definition
    says: the units of each register live after the instruction, of those it defines, what a
    call destroys there and the fenced units, found here from scratch."""
    from ptxalloc.analysis.interference import fenced_after
    from ptxalloc.analysis.liveness import Liveness
    from ptxalloc.spill import promote
    from ptxalloc.target.units import GPR

    real = promote.busy_units
    checked = []

    def from_scratch(cfg, start, shapes, clobbers):
        mask_of = [0] * len(cfg.fn.regs)
        for v, s in start.items():
            if shapes[v].file == GPR:
                mask_of[v] = shapes[v].mask(s)
        liveness = Liveness(cfg)
        fenced = fenced_after(cfg, mask_of)
        want = []
        for b in cfg.blocks:
            for k_, (ins, live) in enumerate(zip(b.instrs, liveness.live_after(b.id))):
                units = clobbers.get(id(ins), 0) | fenced[b.first + k_]
                for v in list(ins.defs) + [v for v in range(len(mask_of)) if live >> v & 1]:
                    units |= mask_of[v]
                want.append(units)
        return want

    def checking(cfg, start, shapes, clobbers):
        got = real(cfg, start, shapes, clobbers)
        assert got == from_scratch(cfg, start, shapes, clobbers)
        checked.append(len(got))
        return got

    monkeypatch.setattr(promote, "busy_units", checking)
    res = allocate((DATA / name).read_text(), k, allocator="briggs")
    assert_verified(res)
    assert checked and sum(checked) > 50
