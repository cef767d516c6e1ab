"""Spill costs (issue 3, SPEC 4.5): def_freq x use_freq x mem_latency x avg(1.5^depth), 64-bit
values 1.2 times more, unused values free, rematerializable values at their recompute cost,
spill temporaries infinite; the memory latency from the working-set estimate."""

from __future__ import annotations

import math

import pytest

from conftest import DATA
from ptxalloc.analysis import analyze_function
from ptxalloc.analysis.costs import (LOOP_DEPTH_BASE, MAX_COST, WIDE_FACTOR, memory_latency,
                                     spill_costs)
from ptxalloc.analysis.liveness import Liveness
from ptxalloc.ir.cfg import CFG
from ptxalloc.ptx import parse, parse_file
from ptxalloc.target.sm import PROFILES, profile_for

HDR = ".version 7.0\n.target sm_80\n.address_size 64\n\n"

LOOP = """\
	mov.u32 %r2, 0;
	add.s32 %r5, %r1, 3;
	add.s64 %rd5, %rd1, 3;
	add.s32 %r8, %r1, 4;
	add.s32 %r9, %r1, 1;
$L_loop:
	add.s32 %r2, %r2, %r5;
	add.s64 %rd6, %rd5, 1;
	setp.lt.s32 %p1, %r2, 100;
	@%p1 bra $L_loop;
	st.global.u32 [%rd1], %r2;
	st.global.u32 [%rd1+4], %r8;
	add.s32 %r7, %r1, 5;
	st.global.u32 [%rd1+8], %r7;
	st.global.u32 [%rd1+12], %r11;
	ret;
"""


def kernel(body: str) -> str:
    return (HDR + ".visible .entry k(.param .u64 k_out, .param .u32 k_n)\n{\n"
            "\t.reg .pred %p<8>;\n\t.reg .b32 %r<20>;\n\t.reg .b64 %rd<8>;\n"
            "\tld.param.u32 %r1, [k_n];\n\tld.param.u64 %rd1, [k_out];\n" + body + "}\n")


class C:
    def __init__(self, body: str = LOOP, latency: float = 4.0, **kw):
        self.fn = parse(kernel(body), "k.ptx").functions[0]
        self.cfg = CFG(self.fn)
        self.lv = Liveness(self.cfg)
        self.latency = latency
        self.costs = spill_costs(self.cfg, self.lv, latency, **kw)

    def v(self, name: str) -> int:
        return self.fn.regs.lookup(name)

    def __getitem__(self, name: str) -> float:
        return self.costs[self.v(name)]


def formula(c: C, v: int) -> float:
    """The cost by the SPEC's formula, computed here from the CFG's block frequencies."""
    def_f = use_f = 0.0
    mult_num = mult_den = 0.0
    for b in c.cfg.blocks:
        mention = c.lv.live_in[b.id] | c.lv.live_out[b.id]
        for ins in b.instrs:
            def_f += b.freq * ins.defs.count(v)
            use_f += b.freq * ins.uses.count(v)
            if v in ins.defs or v in ins.uses:
                mention |= 1 << v
        if mention >> v & 1 and b.freq > 0:
            mult_num += b.freq * LOOP_DEPTH_BASE ** b.depth
            mult_den += b.freq
    mult = mult_num / mult_den if mult_den else 1.0
    return min(def_f * use_f * c.latency * mult, MAX_COST)


def test_loop_shape():
    c = C()
    assert [b.freq for b in c.cfg.blocks] == pytest.approx([1.0, 10.0, 1.0])
    assert [b.depth for b in c.cfg.blocks] == [0, 1, 0]


def test_value_used_in_a_loop_costs_more_than_one_used_once_outside():
    c = C()
    # %r5 and %r8 are both defined once before the loop; %r5 is read in it, %r8 after it
    assert c["%r5"] > c["%r8"] > 0
    # by the formula: %r5 1 def x 10 uses x 4 cycles x (1 + 10 x 1.5) / 11
    assert c["%r5"] == pytest.approx(1 * 10 * 4 * (1 + 10 * 1.5) / 11)
    # %r8 is live through the loop (which raises its average depth) but read once
    assert c["%r8"] == pytest.approx(1 * 1 * 4 * (1 + 15 + 1) / 12)


def test_costs_follow_the_formula():
    c = C()
    for v in range(len(c.fn.regs)):
        expect = formula(c, v)
        if c.fn.regs.classes[v].name in ("GPR64", "B128"):
            expect *= WIDE_FACTOR
        assert c.costs[v] == pytest.approx(expect), c.fn.regs.names[v]


def test_loop_carried_value():
    c = C()
    # %r2: defined before (1) and in (10) the loop, read in it twice (20) and after it (1)
    assert c["%r2"] == pytest.approx(11 * 21 * 4 * (1 + 15 + 1) / 12)


def test_sixty_four_bit_factor():
    c = C()
    # %rd5 is used exactly like %r5, in a 64-bit register
    assert c["%rd5"] == pytest.approx(WIDE_FACTOR * c["%r5"])
    assert WIDE_FACTOR == 1.2


def test_unused_and_undefined_values_cost_nothing():
    c = C()
    assert c["%r9"] == 0.0            # defined, never read
    assert c["%rd6"] == 0.0           # defined in the loop, never read
    assert c["%r11"] == 0.0           # read, never defined (live on entry)


def test_latency_scales_linearly():
    a, b = C(latency=4.0), C(latency=40.0)
    for x, y in zip(a.costs, b.costs):
        assert y == pytest.approx(10 * x)


def test_rematerializable_value_costs_its_recompute_cost():
    c0 = C()
    r5 = c0.v("%r5")
    c = C(remat={r5: 1.0})
    # use_freq x remat cost x depth multiplier: 10 x 1 x 16/11
    assert c.costs[r5] == pytest.approx(10 * 1.0 * 16 / 11)
    assert c.costs[r5] < c0.costs[r5]
    others = [v for v in range(len(c.costs)) if v != r5]
    assert [c.costs[v] for v in others] == [c0.costs[v] for v in others]


def test_spill_temporaries_are_never_spilled_again():
    c0 = C()
    c = C(no_spill={c0.v("%r7"), c0.v("%r9")})
    assert c["%r7"] == math.inf and c["%r9"] == math.inf
    assert c["%r5"] == c0["%r5"]


def test_costs_are_clamped():
    # four nested loops, each with a second back edge (a 'continue'): the innermost block
    # runs 100^4 times per entry
    body = "\tmov.u32 %r2, 0;\n"
    for d in range(4):
        body += f"$L_h{d}:\n\tadd.s32 %r2, %r2, 1;\n"
    for d in reversed(range(4)):
        body += (f"\tsetp.lt.s32 %p1, %r2, {d + 5};\n\t@%p1 bra $L_h{d};\n"
                 f"\tsetp.lt.s32 %p2, %r2, %r1;\n\t@%p2 bra $L_h{d};\n")
    body += "\tst.global.u32 [%rd1], %r2;\n\tret;\n"
    c = C(body)
    assert max(b.freq for b in c.cfg.blocks) >= 1e7
    assert c["%r2"] == MAX_COST
    assert all(0.0 <= x <= MAX_COST for x in c.costs)


# --- memory latency ---------------------------------------------------------------------------


@pytest.mark.parametrize("regs, threads, sm, expect", [
    (16, 256, "sm_80", 4.0),          # 16 KB: within L1
    (64, 256, "sm_80", 4.0),          # exactly 64 KB: still L1
    (65, 256, "sm_80", 10.0),         # just over L1
    (256, 256, "sm_80", 10.0),        # exactly 256 KB: L2
    (257, 256, "sm_80", 100.0),       # beyond L2: main memory (100 up to SM 80)
    (257, 256, "sm_90", 40.0),        # 40 from SM 90
    (32, 1024, "sm_90", 10.0),        # 128 KB
    (8, 32, "sm_70", 4.0),
])
def test_memory_latency(regs, threads, sm, expect):
    assert memory_latency(PROFILES[sm], regs, threads) == expect


def test_memory_latency_picks_from_the_profile_table():
    for name, prof in PROFILES.items():
        assert memory_latency(prof, 1, 1) == prof.latency_l1
        assert memory_latency(prof, prof.l1_bytes // 4 + 1, 1) == prof.latency_l2
        assert memory_latency(prof, prof.l2_bytes // 4 + 1, 1) == prof.latency_l3
        assert prof.latency_l1 < prof.latency_l2 < prof.latency_l3


def test_analyze_function_uses_the_block_size_directive():
    text = kernel("\tadd.s32 %r2, %r1, 1;\n\tst.global.u32 [%rd1], %r2;\n\tret;\n")
    small = parse(text).functions[0]
    big = parse(text.replace("k_n)\n{", "k_n)\n.reqntid 1024, 64\n{")).functions[0]
    assert big.directives["reqntid"] == [1024, 64]
    sm = profile_for("sm_80")
    a, b = analyze_function(small, sm), analyze_function(big, sm)
    assert a.pressure.max_live == b.pressure.max_live == 3
    assert a.mem_latency == 4.0                 # 3 x 4 B x 256 threads
    assert b.mem_latency == 100.0               # 3 x 4 B x 65536 threads
    v = small.regs.lookup("%r2")
    assert b.costs[v] == pytest.approx(25 * a.costs[v])


def test_costs_on_nvcc_loops():
    """On k_nest3, a value used only in the innermost loop costs more than the kernel's
    parameters used only before the loops."""
    fn = parse_file(str(DATA / "loops_sm80.ptx")).function("_Z7k_nest3PfPKfiii")
    a = analyze_function(fn, profile_for("sm_80"))
    inner = max(a.cfg.loops, key=lambda lp: lp.depth)
    inner_only = [v for v in range(len(fn.regs))
                  if a.costs[v] > 0 and all(a.cfg.block_of[i] in inner.blocks
                                            for i, ins in enumerate(a.cfg.instrs)
                                            if v in ins.defs or v in ins.uses)]
    entry_only = [v for v in range(len(fn.regs))
                  if a.costs[v] > 0 and all(a.cfg.block_of[i] == 0
                                            for i, ins in enumerate(a.cfg.instrs)
                                            if v in ins.defs or v in ins.uses)]
    assert inner_only and entry_only
    assert min(a.costs[v] for v in inner_only) > max(a.costs[v] for v in entry_only)
