"""Results written into the registers of a register tuple's dying members (alloc/tuple_reuse.py,
knob ``TupleReuse``), on hand-written sm_90a kernels (tests/data/wgmma) and Triton 3.9's
fused-attention forward kernels (tests/data/triton): the allocation gives fewer registers, the
checker proves it from the original text, ptxas assembles it, and a value live where the tuple
is written again never shares a member's register.

Measured (``ptxalloc allocate F -v``, both allocators, K = 255): the hand kernel 18 -> 15
registers; attn_fwd_tma_64x64_d64 116 -> 103 and attn_fwd_tma_128x128_d128 215 -> 186 on main
after session 6's merges (128 -> 116 and 233 -> 209 on the branch that built it; ptxas -v: 106
and 188; docs/decisions.md, "A tuple's registers reused member by member").
"""

from __future__ import annotations

import re

import pytest

from conftest import DATA, assert_chain_proven_and_assembles, assert_verified
from ptxalloc.alloc.tuple_reuse import affinities
from ptxalloc.analysis import analyze_function
from ptxalloc.pipeline import allocate, allocate_module
from ptxalloc.ptx import parse
from ptxalloc.target.sm import profile_for

WGMMA = DATA / "wgmma"
IN_PLACE = WGMMA / "wgmma_scores_in_place_sm90a.ptx"
ACROSS = WGMMA / "wgmma_score_across_redefinition_sm90a.ptx"
ALLOCATORS = ["briggs", "fatpoint"]


def _allocate(path, reuse: int, allocator: str, k=None, knobs=None):
    module = parse(path.read_text(), str(path))
    from ptxalloc.alloc.driver import Options
    res = allocate_module(module, k, allocator=allocator, verify=True,
                          options=Options(allocator=allocator,
                                          knobs={"TupleReuse": reuse, **(knobs or {})}))
    assert_verified(res)
    return module, res


def _register_of(text: str, opcode_line: str) -> list[str]:
    """The physical registers of the first output line starting with ``opcode_line``."""
    line = next(l for l in text.splitlines() if l.strip().startswith(opcode_line))
    return re.findall(r"%R\d+", line)


def test_affinities_are_last_reads_of_the_same_class():
    module = parse(IN_PLACE.read_text(), str(IN_PLACE))
    fn = module.functions[0]
    found = affinities(analyze_function(fn, profile_for(None, module.sm)))
    names = fn.regs.names
    pairs = {(names[d], names[s]) for _, d, s in found}
    # each score's fma reads it for the last time; %f30 (the scale) is read again, never an end
    assert {(f"%f{8 + i}", f"%f{i}") for i in range(8)} <= pairs
    assert ("%f15", "%f30") in pairs and ("%f14", "%f30") not in pairs
    # the ex2 chain and both operands of each add
    assert ("%f16", "%f8") in pairs and ("%f24", "%f16") in pairs and ("%f24", "%f17") in pairs


def test_no_affinities_without_tuples():
    path = DATA / "hand" / "recompute_chain.ptx"
    module = parse(path.read_text(), str(path))
    fn = module.functions[0]
    assert affinities(analyze_function(fn, profile_for(None, module.sm))) == []


@pytest.mark.parametrize("allocator", ALLOCATORS)
def test_scores_written_into_their_members_registers(allocator):
    module, on = _allocate(IN_PLACE, 1, allocator)
    _, off = _allocate(IN_PLACE, 0, allocator)
    assert (on.functions[0].registers, off.functions[0].registers) == (15, 18)
    # the report: how many values were merged, and the bound counting live members only,
    # which the allocation reaches (whole tuples: 18)
    row = on.functions[0].report()["tuple_reuse"]
    assert row["values"] > 8 and row["max_live_members"] == 15
    assert "tuple_reuse" not in off.functions[0].report()
    assert any(n.startswith("tuple reuse: ") for n in on.functions[0].notes)
    # fma %f8, %f0, ...: the result takes %f0's register, as ptxas's FFMA R24, R24, ...
    dest, score, *_ = _register_of(on.ptx, "fma.rn.f32")
    assert dest == score
    assert_chain_proven_and_assembles(module, on, "sm_90a")


@pytest.mark.parametrize("allocator", ALLOCATORS)
def test_value_live_across_the_tuples_next_write_keeps_its_own_register(allocator):
    # the schedule's first order alone: the stores-last order puts %f9's fma (its sum is
    # stored before the second wgmma) before %f8's, which the text matching below assumes
    first_order = {"ScheduleStoresLast": 0}
    module, on = _allocate(ACROSS, 1, allocator, knobs=first_order)
    _, off = _allocate(ACROSS, 0, allocator, knobs=first_order)
    assert on.functions[0].registers < off.functions[0].registers
    text = on.ptx
    fmas = [l for l in text.splitlines() if l.strip().startswith("fma.rn.f32")]
    f8, f0 = re.findall(r"%R\d+", fmas[0])[:2]
    f9, f1 = re.findall(r"%R\d+", fmas[1])[:2]
    # %f8 lives across the second wgmma, which writes %f0's register: never the same register
    accumulator = re.findall(r"%R\d+", next(l for l in text.splitlines()
                                             if "wgmma.mma_async" in l).split("}")[0])
    assert f8 not in accumulator and f8 != f0
    assert f9 == f1                 # read before the second wgmma: may take %f1's register
    assert_chain_proven_and_assembles(module, on, "sm_90a")


@pytest.mark.ptxas
@pytest.mark.parametrize("allocator", ALLOCATORS)
@pytest.mark.parametrize("stem", ["attn_fwd_tma_64x64_d64", "attn_fwd_tma_128x128_d128"])
def test_triton_tma_attention_scores_reuse_their_registers(stem, allocator):
    """The softmax's fma/ex2 chains over the scores of Q K^T land on the scores' registers:
    13 and 29 registers fewer on main (116 -> 103, 215 -> 186), proven and assembled."""
    path = DATA / "triton" / f"{stem}.ptx"
    module, on = _allocate(path, 1, allocator)
    _, off = _allocate(path, 0, allocator)
    assert on.functions[0].registers <= off.functions[0].registers - 10
    # at the bound counting live tuple members (registers in flight held until their wait)
    assert on.functions[0].registers == on.functions[0].extra["tuple_reuse"]["max_live_members"]
    assert_chain_proven_and_assembles(module, on, "sm_90a")


@pytest.mark.parametrize("k", [12, 14])
def test_fatpoint_logs_one_round_per_round_kept(k):
    """The first spilling round is colored with and without the merges; fat-point's session
    logs only the coloring kept (``Session.forget``), so ``-v`` shows one line per round."""
    text = (DATA / "wgmma" / "wgmma_scores_in_place_sm90a.ptx").read_text()
    fr = allocate(text, k, allocator="fatpoint").functions[0]
    assert fr.spilled_values and fr.rounds >= 2
    assert sum(n.startswith("fat-point round") for n in fr.notes) == fr.rounds
