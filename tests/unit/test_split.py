"""Live-range splitting of spilled values (issue 13; spill/split.py): one reload serves a
block's run of uses, one reload before a loop serves the loop's uses, a value a loop does not
use stays in memory across it, a run temporary spilled again keeps its home slot; every
allocation with splitting is proven by the checker and assembles with ptxas."""

from __future__ import annotations

import re

import pytest

from conftest import assert_verified
from ptxalloc import ptxas
from ptxalloc.alloc import api
from ptxalloc.analysis import analyze_function
from ptxalloc.ir.cfg import CFG
from ptxalloc.ir.edits import EditKind, value_slot
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse
from ptxalloc.spill.rewrite import SpillState, rewrite_spills
from ptxalloc.spill.split import SplitPlan, plan_splits
from ptxalloc.target.sm import profile_for

HDR = ".version 7.0\n.target sm_80\n.address_size 64\n\n"

#: %r1 (the trip count) is read three times per iteration; %r3 is live across the loop and
#: read only after it
LOOP = HDR + """.visible .entry loopk(.param .u64 out, .param .u32 n)
{
	.reg .pred %p<2>;
	.reg .b32 %r<30>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [out];
	ld.param.u32 %r1, [n];
	ld.global.u32 %r2, [%rd1];
	ld.global.u32 %r3, [%rd1+4];
	ld.global.u32 %r4, [%rd1+8];
	ld.global.u32 %r5, [%rd1+12];
	ld.global.u32 %r6, [%rd1+16];
	add.s32 %r10, %r2, %r4;
	add.s32 %r10, %r10, %r5;
	add.s32 %r10, %r10, %r6;
	mov.u32 %r21, 0;
	mov.u32 %r22, %r10;
L:
	add.s32 %r22, %r22, %r1;
	xor.b32 %r22, %r22, %r1;
	add.s32 %r21, %r21, 1;
	setp.lt.s32 %p1, %r21, %r1;
	@%p1 bra L;
	add.s32 %r22, %r22, %r3;
	st.global.u32 [%rd1], %r22;
	ret;
}
"""

#: %r1 is read four times in one block after a crowded stretch
USES = HDR + """.visible .entry uses(.param .u64 out, .param .u32 x)
{
	.reg .b32 %r<12>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [out];
	ld.param.u32 %r1, [x];
	ld.global.u32 %r2, [%rd1];
	ld.global.u32 %r3, [%rd1+4];
	ld.global.u32 %r4, [%rd1+8];
	add.s32 %r5, %r2, %r3;
	add.s32 %r5, %r5, %r4;
	add.s32 %r6, %r5, %r1;
	mul.lo.s32 %r6, %r6, %r1;
	xor.b32 %r6, %r6, %r1;
	add.s32 %r6, %r6, %r1;
	st.global.u32 [%rd1], %r6;
	ret;
}
"""

SPLIT_OFF = {"SpillSplitRegions": 0, "SpillSplitLoops": 0}


def _function(text: str):
    module = parse(text)
    return module.functions[0], profile_for(None, module.sm)


def _reg(fn, name: str) -> int:
    return fn.regs.names.index(name)


def _spill(text: str, names: list[str], limit: float, regions=True, loops=True):
    """The function with ``names`` spilled (split where ``limit`` leaves room), its state."""
    fn, sm = _function(text)
    spill = {_reg(fn, n) for n in names}
    plan = plan_splits(analyze_function(fn, sm), spill, set(), limit,
                       regions=regions, loops=loops)
    state = SpillState("__spill", {v: v for v in range(len(fn.regs))})
    return rewrite_spills(fn, spill, {}, state, plan), state, fn


def _accesses(fn, value: int, kind: EditKind) -> list[tuple[int, int]]:
    """(block, loop depth) of each inserted instruction of ``kind`` for ``value``."""
    cfg = CFG(fn)
    return [(b.id, b.depth) for b in cfg.blocks for ins in b.instrs
            if ins.origin is not None and ins.origin.kind is kind and ins.origin.value == value]


def test_uses_in_a_block_share_one_reload():
    out, _, fn = _spill(USES, ["%r1"], limit=16)
    r1 = _reg(fn, "%r1")
    assert len(_accesses(out, r1, EditKind.RELOAD)) == 0      # the definition's register serves
    assert len(_accesses(out, r1, EditKind.SPILL)) == 1
    out, _, _ = _spill(USES, ["%r1", "%r5"], limit=16)
    assert len(_accesses(out, r1, EditKind.RELOAD)) == 0


def test_without_room_every_use_reloads():
    """At a limit the rest of the code already fills, spill-everywhere is what is left."""
    out, _, fn = _spill(USES, ["%r1"], limit=1)
    assert len(_accesses(out, _reg(fn, "%r1"), EditKind.RELOAD)) == 4
    out, _, fn = _spill(USES, ["%r1"], limit=16, regions=False, loops=False)
    assert len(_accesses(out, _reg(fn, "%r1"), EditKind.RELOAD)) == 4


def test_a_value_the_loop_reads_is_reloaded_once_before_the_loop():
    out, _, fn = _spill(LOOP, ["%r1"], limit=16, regions=False)
    r1 = _reg(fn, "%r1")
    reloads = _accesses(out, r1, EditKind.RELOAD)
    assert len(reloads) == 1 and reloads[0][1] == 0, reloads       # outside the loop
    off, _, _ = _spill(LOOP, ["%r1"], limit=16, regions=False, loops=False)
    assert [d for _, d in _accesses(off, r1, EditKind.RELOAD)] == [1, 1, 1]


def test_a_value_the_loop_does_not_read_stays_in_memory_across_it():
    out, _, fn = _spill(LOOP, ["%r3"], limit=16)
    r3 = _reg(fn, "%r3")
    assert [d for _, d in _accesses(out, r3, EditKind.SPILL)] == [0]
    assert [d for _, d in _accesses(out, r3, EditKind.RELOAD)] == [0]


def test_a_run_temporary_spilled_again_keeps_the_home_slot():
    """The run temporary of %r1 spilled in a later round: no slot of its own, its reload before
    the loop is dropped and every use reloads from %r1's slot."""
    out, state, fn = _spill(LOOP, ["%r1"], limit=16, regions=False)
    r1 = _reg(fn, "%r1")
    (temp,) = [t for t in state.home]
    assert state.home[temp] == value_slot(r1)
    again = rewrite_spills(out, {temp}, {}, state, None)
    reloads = [ins for ins in again.instructions()
               if ins.origin is not None and ins.origin.kind is EditKind.RELOAD]
    assert len(reloads) == 3 and {ins.origin.slot for ins in reloads} == {value_slot(r1)}
    assert set(state.slot_size) == {value_slot(r1)}
    assert len(_accesses(again, r1, EditKind.SPILL)) == 1


@pytest.mark.parametrize("allocator", api.names())
@pytest.mark.parametrize("text", [LOOP, USES], ids=["loop", "uses"])
@pytest.mark.parametrize("k", [3, 4, 5])
def test_allocations_with_splitting_are_proven_and_assemble(text, k, allocator):
    # the programs in the order written, with the pressure they are built to have (scheduled,
    # USES at K = 4 spills 16 bytes with splitting and 8 without under the optimal allocator)
    knobs = {"RematParamLoads": 0, "schedule": 0}
    res = allocate(text, registers=k, allocator=allocator, knobs=knobs)
    assert_verified(res)
    off = allocate(text, registers=k, allocator=allocator, knobs={**knobs, **SPLIT_OFF})
    assert_verified(off)
    on_bytes = sum(f.spill_stores_bytes + f.spill_loads_bytes for f in res.functions)
    off_bytes = sum(f.spill_stores_bytes + f.spill_loads_bytes for f in off.functions)
    assert on_bytes <= off_bytes
    if ptxas.available():
        got = ptxas.assemble(res.ptx, "sm_80")
        assert got.ok, got.output


def test_split_reload_before_the_loop_in_allocated_output():
    """End to end at K = 3: without splitting a value is reloaded inside the loop, with it
    before the loop (in the order written: scheduled, the parameter loads sink and nothing
    is reloaded in the loop either way)."""
    knobs = {"RematParamLoads": 0, "schedule": 0}
    on = allocate(LOOP, registers=3, knobs=knobs).functions[0].text
    off = allocate(LOOP, registers=3, knobs={**knobs, **SPLIT_OFF}).functions[0].text

    def in_loop_reloads(text: str) -> int:
        loop = re.split(r"\n\s*L:\s*\n", text, maxsplit=1)[1].split("bra", 1)[0]
        return loop.count("//@reload")
    assert in_loop_reloads(on) == 0 < in_loop_reloads(off)


def test_a_loop_reload_after_a_dropped_reload_is_kept():
    """The preheader ends with the reload of a run temporary that a later round spills again:
    that reload is dropped, and a loop reload planned after it must stay (regression: it was
    dropped with it, and the loop read a register nothing wrote)."""
    out, state, fn = _spill(LOOP, ["%r1"], limit=16, regions=False)
    (temp,) = list(state.home)
    (preheader_end,) = [ins for ins in out.instructions() if temp in ins.defs]
    r3 = _reg(fn, "%r3")
    plan = SplitPlan()
    run = plan.new_run()
    plan.loop_reloads[id(preheader_end)] = [(r3, run)]
    plan.after.add(id(preheader_end))
    cfg = CFG(out)
    preheader = cfg.block_of[cfg.instrs.index(preheader_end)]
    again = rewrite_spills(out, {temp, r3}, {}, state, plan)
    assert preheader_end not in again.instructions()
    assert (preheader, 0) in _accesses(again, r3, EditKind.RELOAD)
