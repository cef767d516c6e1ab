"""The target model (SPEC 2): register units and placements for a budget K, the blocking
weights of mixed widths, tuple and vector-register shapes, SM profiles and occupancy."""

from __future__ import annotations

import pytest

from ptxalloc.errors import UsageError
from ptxalloc.ir.registers import RegClass
from ptxalloc.target.occupancy import block_size, occupancy
from ptxalloc.target.sm import DEFAULT, PROFILES, profile_for
from ptxalloc.target.units import (B128, GPR, GPR32, GPR64, H16, PRED, PRED1, PRED_REGS, RegFile,
                                   Shape, blocking_weight, tuple_shape, vreg_shape)


def pairs(rf: RegFile, shape: Shape) -> list[tuple[int, ...]]:
    """Each placement as the 32-bit registers it touches."""
    out = []
    for start, mask in rf.placements(shape):
        units = [u for u in range(2 * rf.k + 8) if mask >> u & 1]
        assert units == list(range(start, start + shape.units))      # contiguous from start
        out.append(tuple(sorted({u // 2 for u in units})))
    return out


# --- placements -------------------------------------------------------------------------------


def test_gpr64_at_k15_is_exactly_seven_pairs():
    rf = RegFile(15)
    assert pairs(rf, GPR64) == [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9), (10, 11), (12, 13)]
    assert rf.count(GPR64) == 7
    assert [s for s, _ in rf.placements(GPR64)] == [0, 4, 8, 12, 16, 20, 24]
    assert [m for _, m in rf.placements(GPR64)][-1] == 0xF << 24
    # nothing reaches R14's partner R15
    assert all(m >> 30 == 0 for _, m in rf.placements(GPR64))


@pytest.mark.parametrize("k", [1, 2, 3, 4, 7, 8, 15, 16, 32, 63, 255])
def test_placement_counts(k):
    rf = RegFile(k)
    assert rf.count(H16) == 2 * k
    assert rf.count(GPR32) == k
    assert rf.count(GPR64) == k // 2
    assert rf.count(B128) == k // 4
    assert rf.count(PRED1) == PRED_REGS == 7
    for shape in (H16, GPR32, GPR64, B128):
        for start, mask in rf.placements(shape):
            assert start % shape.align == 0
            assert mask == ((1 << shape.units) - 1) << start
            assert mask >> (2 * k) == 0                       # within R0 .. R(K-1)


def test_placements_at_k15_by_register():
    rf = RegFile(15)
    assert pairs(rf, GPR32) == [(i,) for i in range(15)]
    assert pairs(rf, B128) == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11)]
    h16 = rf.placements(H16)
    assert [s for s, _ in h16] == list(range(30))
    # two halves share one 32-bit register
    assert pairs(rf, H16)[:4] == [(0,), (0,), (1,), (1,)]


def test_placements_lowest_first_and_cached():
    rf = RegFile(8)
    first = rf.placements(GPR32)
    assert first == sorted(first)
    assert rf.placements(GPR32) is first


def test_aliasing_by_units():
    """A 32-bit value in R4 blocks the pair R4:R5 and the quad R4..R7, and a half of R4."""
    rf = RegFile(15)
    r4 = dict(rf.placements(GPR32))[8]
    overlapping = {str(s): [st for st, m in rf.placements(s) if m & r4]
                   for s in (H16, GPR32, GPR64, B128)}
    assert overlapping == {"H16": [8, 9], "GPR32": [8], "GPR64": [8], "B128": [8]}


def test_predicate_file():
    rf = RegFile(15)
    assert rf.size(PRED1) == 7 and rf.size(GPR32) == 30
    assert [s for s, _ in rf.placements(PRED1)] == list(range(7))
    assert RegFile(15, pred_regs=3).count(PRED1) == 3


# --- blocking weights -------------------------------------------------------------------------


@pytest.mark.parametrize("node, neighbour, weight", [
    (GPR32, GPR32, 1), (GPR64, GPR64, 1), (B128, B128, 1), (H16, H16, 1),
    (H16, GPR32, 2),      # a 32-bit register holds both halves
    (H16, GPR64, 4), (H16, B128, 8),
    (GPR32, H16, 1), (GPR32, GPR64, 2), (GPR32, B128, 4),
    (GPR64, H16, 1), (GPR64, GPR32, 1), (GPR64, B128, 2),
    (B128, H16, 1), (B128, GPR32, 1), (B128, GPR64, 1),
    (GPR32, PRED1, 0), (PRED1, GPR32, 0), (PRED1, PRED1, 1),
])
def test_blocking_weight(node, neighbour, weight):
    assert blocking_weight(node, neighbour) == weight


def test_blocking_weight_of_unaligned_tuple():
    # a 3-register tuple aligned to 1 register can straddle two pairs
    t3 = Shape(GPR, 6, 2)
    assert blocking_weight(GPR64, t3) == 2
    assert blocking_weight(GPR32, t3) == 3
    assert blocking_weight(t3, GPR32) == 3


def test_blocking_weight_is_exact_by_brute_force():
    """The most placements of ``node`` one placement of the neighbour overlaps, anywhere in a
    file large enough that its ends do not matter."""
    rf = RegFile(64)
    shapes = [H16, GPR32, GPR64, B128, tuple_shape(6, 1), tuple_shape(16, 8)]
    for node in shapes:
        for nb in shapes:
            worst = max(sum(1 for _, m in rf.placements(node) if m & nm)
                        for _, nm in rf.placements(nb))
            assert blocking_weight(node, nb) == worst, (node, nb)


# --- shapes -----------------------------------------------------------------------------------


def test_class_shapes():
    assert (H16.units, H16.align, H16.regs) == (1, 1, 0.5)
    assert (GPR32.units, GPR32.align, GPR32.regs) == (2, 2, 1.0)
    assert (GPR64.units, GPR64.align, GPR64.regs) == (4, 4, 2.0)
    assert (B128.units, B128.align, B128.regs) == (8, 8, 4.0)
    assert (PRED1.file, PRED1.regs) == (PRED, 1.0)
    assert [str(s) for s in (H16, GPR32, GPR64, B128, PRED1)] == [
        "H16", "GPR32", "GPR64", "B128", "PRED"]


@pytest.mark.parametrize("units, align_regs, expect", [
    (8, 4, (8, 8)),        # .v4.b32: a 4-aligned quad (B128)
    (4, 2, (4, 4)),        # .v2.b32: an even pair
    (2, 1, (2, 2)),        # .v2.f16: one register
    (2, 2, (2, 2)),        # capped by its own size rounded up
    (16, 4, (16, 8)),      # an mma fragment of 8 registers, alignment capped at 4
    (16, 8, (16, 16)),     # wgmma: 8-aligned
    (6, 4, (6, 8)),        # 3 registers: rounded up to 4
    (2, 0, (2, 1)),
])
def test_tuple_shape(units, align_regs, expect):
    s = tuple_shape(units, align_regs)
    assert (s.units, s.align) == expect and s.file == GPR


def test_tuple_shape_names():
    assert str(tuple_shape(8, 4)) == "B128"
    assert str(tuple_shape(16, 4)) == "TUPLE8x4"


@pytest.mark.parametrize("rclass, vec, expect", [
    (RegClass.GPR32, 0, GPR32), (RegClass.GPR32, 1, GPR32),
    (RegClass.GPR32, 4, B128),                    # .reg .v4 .u32: a 4-aligned quad
    (RegClass.GPR32, 2, GPR64),
    (RegClass.GPR64, 2, Shape(GPR, 8, 8)),        # .reg .v2 .f64: a 4-aligned quad
    (RegClass.H16, 2, GPR32),
    (RegClass.H16, 4, GPR64),
    (RegClass.PRED, 4, PRED1),
    (RegClass.B128, 0, B128),
])
def test_vreg_shape(rclass, vec, expect):
    assert vreg_shape(rclass, vec) == expect


# --- SM profiles ------------------------------------------------------------------------------


def test_profiles_of_the_seeds():
    assert list(PROFILES) == ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100",
                              "sm_120"]
    for name, p in PROFILES.items():
        assert p.name == name and p.regs_per_thread == 255
        assert p.regs_per_sm == 65536          # the hardware's, not the seeds' 131072 (sm_90+)
        assert p.wgmma == (p.sm >= 90)
    assert PROFILES["sm_75"].max_threads == 1024
    assert PROFILES["sm_80"].max_threads == 2048
    assert PROFILES["sm_86"].max_threads == 1536


@pytest.mark.parametrize("target, expect", [
    ("sm_10", "sm_70"), ("sm_13", "sm_70"), ("sm_20", "sm_70"), ("sm_30", "sm_70"), ("sm_52", "sm_70"), ("sm_61", "sm_70"),
    ("sm_70", "sm_70"), ("sm_72", "sm_70"), ("sm_75", "sm_75"), ("sm_80", "sm_80"),
    ("sm_87", "sm_86"), ("sm_89", "sm_89"), ("sm_90", "sm_90"), ("sm_90a", "sm_90"),
    ("sm_100a", "sm_100"), ("sm_101", "sm_100"), ("sm_103f", "sm_100"),
    ("sm_120", "sm_120"), ("sm_121a", "sm_120"),
    (None, DEFAULT), ("", DEFAULT),
])
def test_profile_for_module_target(target, expect):
    assert profile_for(None, target).name == expect


def test_arch_overrides_the_target():
    assert profile_for("sm_75", "sm_90").name == "sm_75"
    assert profile_for("sm_100", None).name == "sm_100"


@pytest.mark.parametrize("arch", ["sm_99", "sm_42", "80", "SM_80", "compute_80", ""])
def test_unknown_arch_is_a_usage_error(arch):
    with pytest.raises(UsageError, match="unknown architecture"):
        profile_for(arch, "sm_80")


# --- occupancy --------------------------------------------------------------------------------


def test_occupancy_worked_example_of_seed_001():
    o = occupancy(profile_for("sm_80"), 32, 256)
    assert (o.registers, o.block, o.blocks_per_sm, o.warps_per_sm) == (32, 256, 8, 64)
    assert o.fraction == 1.0


# the CUDA Occupancy Calculator's figures (cuda_occupancy.h): registers rounded up to 8 per
# thread, warps given registers per sub-partition, the target's warps and blocks per SM
@pytest.mark.parametrize("sm, regs, block, blocks, warps, fraction", [
    ("sm_80", 64, 256, 4, 32, 0.5),
    ("sm_80", 33, 256, 6, 48, 0.75),            # 40 registers: 12 warps per sub-partition
    ("sm_80", 128, 128, 4, 16, 0.25),
    ("sm_80", 255, 1024, 0, 0, 0.0),
    ("sm_90", 32, 256, 8, 64, 1.0),             # 65536 registers, not the seeds' 131072
    ("sm_90", 72, 256, 3, 24, 0.375),
    ("sm_75", 32, 256, 4, 32, 1.0),             # sm_75 holds 32 warps
    ("sm_86", 40, 256, 6, 48, 1.0),
    ("sm_80", 0, 256, 8, 64, 1.0),              # no registers counts as one
    ("sm_80", 50, 128, 9, 36, 0.5625),          # issue 11's check
])
def test_occupancy_table(sm, regs, block, blocks, warps, fraction):
    o = occupancy(PROFILES[sm], regs, block)
    assert (o.blocks_per_sm, o.warps_per_sm) == (blocks, warps)
    assert o.fraction == pytest.approx(fraction)


def test_occupancy_never_rises_with_registers():
    sm = PROFILES["sm_80"]
    fr = [occupancy(sm, r, 256).fraction for r in range(1, 256)]
    assert all(a >= b for a, b in zip(fr, fr[1:]))


@pytest.mark.parametrize("directives, expect", [
    ({}, 256),
    ({"reqntid": [32, 4]}, 128),
    ({"reqntid": 64}, 64),
    ({"maxntid": [128, 1, 1]}, 128),
    ({"reqntid": [16, 16], "maxntid": 1024}, 256),       # reqntid first
    ({"minnctapersm": 2}, 256),
])
def test_block_size(directives, expect):
    assert block_size(directives) == expect


@pytest.mark.parametrize("k, reserved", [(15, 0), (64, 0), (255, 0), (40, 0b11 << 62)])
@pytest.mark.parametrize("shape", [H16, GPR32, GPR64, B128, tuple_shape(6, 2), PRED1])
def test_free_starts_are_the_placements_that_avoid_the_forbidden_units(k, reserved, shape):
    """RegFile.free_starts (Briggs's select, issue 16) is the walk over placements it replaced:
    the starts whose masks take none of the forbidden units, for forbidden sets of every kind."""
    import random
    rf = RegFile(k, reserved=reserved)
    rng = random.Random(k * 31 + shape.units)
    size = 2 * k + 8
    cases = [0, (1 << size) - 1, 0b1, 0b10, 0b1100] + [rng.getrandbits(size) & rng.getrandbits(size)
                                                      for _ in range(50)]
    for forbidden in cases:
        walk = [s for s, mask in rf.placements(shape) if not mask & forbidden]
        free = rf.free_starts(shape, forbidden)
        assert [s for s in range(size) if free >> s & 1] == walk
