"""Register pressure and MaxLive (issue 3): per-instruction pressure in 32-bit registers
(16-bit values count half, 64-bit two, a tuple group its whole width while any member lives),
predicates counted apart, copies counted once, dead definitions counted at their definition,
the peak and the values live there."""

from __future__ import annotations

import pytest

from conftest import DATA
from ptxalloc.analysis import analyze_function
from ptxalloc.analysis.explain_peak import peak_values
from ptxalloc.analysis.liveness import Liveness
from ptxalloc.analysis.pressure import Pressure
from ptxalloc.analysis.tuples import find_tuples
from ptxalloc.ir.cfg import CFG
from ptxalloc.ir.registers import RegClass
from ptxalloc.ptx import parse, parse_file
from ptxalloc.target.sm import profile_for
from ptxalloc.util import bits

HDR = ".version 7.0\n.target sm_80\n.address_size 64\n\n"
UNITS = {RegClass.H16: 1, RegClass.GPR32: 2, RegClass.GPR64: 4, RegClass.B128: 8}


def kernel(body: str, loads: bool = True) -> str:
    return (HDR + ".visible .entry k(.param .u64 k_out, .param .u32 k_n)\n{\n"
            "\t.reg .pred %p<8>;\n\t.reg .b32 %r<20>;\n\t.reg .b64 %rd<8>;\n"
            "\t.reg .b16 %rs<8>;\n"
            + ("\tld.param.u32 %r1, [k_n];\n\tld.param.u64 %rd1, [k_out];\n" if loads else "")
            + body + "}\n")


class P:
    def __init__(self, fn, tuples: bool = True):
        self.fn = fn
        self.cfg = CFG(fn)
        self.lv = Liveness(self.cfg)
        self.tuples = find_tuples(fn, self.cfg.instrs) if tuples else None
        self.p = Pressure(self.cfg, self.lv, self.tuples)

    def index(self, prefix: str) -> int:
        names = self.fn.regs.names.__getitem__
        for i, ins in enumerate(self.cfg.instrs):
            if ins.render(names).replace("\t", " ").startswith(prefix):
                return i
        raise KeyError(prefix)

    def at(self, prefix: str) -> float:
        return self.p.gpr[self.index(prefix)]


def of_text(body: str, tuples: bool = True, loads: bool = True) -> P:
    return P(parse(kernel(body, loads), "k.ptx").functions[0], tuples)


def fn_of(path, name=None):
    m = parse_file(str(path))
    return m.function(name) if name else m.functions[0]


# --- counting rules ---------------------------------------------------------------------------


def test_straight_line_counts():
    x = of_text("\tadd.s32 %r2, %r1, 1;\n"
                "\tmul.lo.s32 %r3, %r2, %r1;\n"
                "\tadd.s32 %r4, %r3, %r2;\n"
                "\tst.global.u32 [%rd1], %r4;\n"
                "\tret;\n")
    # after ld %r1: {r1}; after ld %rd1: {r1, rd1}; then {rd1, r1, r2}; {rd1, r2, r3}; {rd1, r4}
    assert x.p.gpr == [1.0, 3.0, 4.0, 4.0, 3.0, 0.0, 0.0]
    assert x.p.max_regs == 4.0 and x.p.max_live == 4
    assert x.p.max_preds == 0 and x.p.pred == [0] * 7
    assert x.p.by_class["GPR64"][1:5] == [2.0] * 4
    assert x.p.by_class["GPR32"][:5] == [1.0, 1.0, 2.0, 2.0, 1.0]


def test_dead_definition_counts_at_its_definition():
    x = of_text("\tadd.s32 %r2, %r1, 1;\n"
                "\tadd.s32 %r9, %r1, 2;\n"         # never used
                "\tadd.s32 %r3, %r2, %r1;\n"
                "\tst.global.u32 [%rd1], %r3;\n"
                "\tret;\n")
    assert x.at("add.s32 %r9") == 5.0               # rd1 (2) + r1 + r2 + r9
    assert x.at("add.s32 %r3") == 3.0               # r1 and r2 die here: rd1 + r3


def test_sixteen_bit_values_count_half():
    x = of_text("\tmov.u16 %rs1, 1;\n"
                "\tmov.u16 %rs2, 2;\n"
                "\tmov.u16 %rs3, 3;\n"
                "\tst.global.u16 [%rd1], %rs1;\n"
                "\tst.global.u16 [%rd1+2], %rs2;\n"
                "\tst.global.u16 [%rd1+4], %rs3;\n"
                "\tret;\n")
    assert x.at("mov.u16 %rs3") == 3.5
    assert x.p.by_class["H16"][x.index("mov.u16 %rs3")] == 1.5
    assert x.p.max_regs == 3.5
    assert x.p.max_live == 4                          # whole registers: ceil


def test_sixty_four_bit_values_count_two():
    x = of_text("\tadd.s64 %rd2, %rd1, 8;\n"
                "\tadd.s64 %rd3, %rd1, 16;\n"
                "\tst.global.u64 [%rd2], %rd3;\n"
                "\tst.global.u64 [%rd1], %rd2;\n"
                "\tret;\n")
    assert x.at("add.s64 %rd3") == 6.0
    assert x.p.max_live == 6


def test_tuple_group_counts_its_whole_width_while_any_member_lives():
    body = ("\tld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd1];\n"
            "\tadd.s32 %r6, %r2, 1;\n"
            "\tadd.s32 %r7, %r6, %r2;\n"
            "\tst.global.u32 [%rd1], %r7;\n"
            "\tret;\n")
    with_groups = of_text(body)
    plain = of_text(body, tuples=False)
    assert len(with_groups.tuples.groups) == 1
    g = with_groups.tuples.groups[0]
    assert g.units == 8 and g.align_regs == 4 and str(g.shape) == "B128"
    # at the load both count the four destinations (dead ones too) and %rd1
    assert with_groups.at("ld.global.v4") == plain.at("ld.global.v4") == 6.0
    # after it only %r2 of the quad lives: the group still holds four registers
    assert plain.at("add.s32 %r6") == 4.0
    assert with_groups.at("add.s32 %r6") == 7.0
    assert with_groups.p.max_live == 7 and plain.p.max_live == 6


def test_copy_whose_source_stays_live_counts_once():
    x = of_text("\tadd.s32 %r2, %r1, 1;\n"
                "\tmov.u32 %r3, %r2;\n"
                "\tadd.s32 %r4, %r2, %r3;\n"
                "\tst.global.u32 [%rd1], %r4;\n"
                "\tret;\n")
    assert x.cfg.instrs[x.index("mov.u32")].is_copy
    assert x.at("mov.u32 %r3") == 3.0                 # rd1 + one register for r2 == r3
    assert x.p.max_live == 3


def test_predicates_are_counted_apart():
    x = of_text("\tsetp.lt.s32 %p1|%p2, %r1, 5;\n"
                "\tsetp.gt.s32 %p3, %r1, 9;\n"
                "\t@%p1 st.global.u32 [%rd1], %r1;\n"
                "\t@%p2 st.global.u32 [%rd1+4], %r1;\n"
                "\t@%p3 st.global.u32 [%rd1+8], %r1;\n"
                "\tret;\n")
    assert x.p.pred[x.index("setp.gt")] == 3
    assert x.p.max_preds == 3
    assert x.p.max_regs == 3.0                         # predicates are not registers


def test_peak_at_function_entry():
    """Registers read before any definition are live at the entry; that point counts."""
    x = of_text("\tadd.s32 %r3, %r10, %r11;\n"
                "\tst.shared.u32 [%r3], %r3;\n"
                "\tret;\n", loads=False)
    assert x.p.gpr == [1.0, 0.0, 0.0]
    assert x.p.max_regs == 2.0
    peak = x.p.peak
    assert (peak.instr, peak.block) == (-1, 0)
    assert sorted(x.fn.regs.names[v] for v in peak.live) == ["%r10", "%r11"]


def test_peak_and_its_values():
    x = of_text("\tadd.s32 %r2, %r1, 1;\n"
                "\tmul.lo.s32 %r3, %r2, %r1;\n"
                "\tadd.s32 %r4, %r3, %r2;\n"
                "\tst.global.u32 [%rd1], %r4;\n"
                "\tret;\n")
    peak = x.p.peak
    # two points reach 4; the later one (the mul) is reported
    assert peak.instr == x.index("mul.lo.s32")
    assert peak.regs == 4.0
    assert sorted(x.fn.regs.names[v] for v in peak.live) == ["%r2", "%r3", "%rd1"]
    a = analyze_function(x.fn, profile_for("sm_80"))
    desc = {v["name"]: v for v in peak_values(a, {})}
    instrs = a.cfg.instrs
    assert desc["%r2"]["defined_lines"] == [instrs[x.index("add.s32 %r2")].line]
    assert desc["%r2"]["last_use_line"] == instrs[x.index("add.s32 %r4")].line
    assert desc["%rd1"]["class"] == "GPR64" and desc["%rd1"]["registers"] == 2
    assert desc["%r3"]["defined_source"] == [None]       # no .loc in this kernel


def test_top_points_order():
    x = of_text("\tadd.s32 %r2, %r1, 1;\n"
                "\tmul.lo.s32 %r3, %r2, %r1;\n"
                "\tadd.s32 %r4, %r3, %r2;\n"
                "\tst.global.u32 [%rd1], %r4;\n"
                "\tret;\n")
    # highest first, ties by instruction id
    assert x.p.top_points(3) == [2, 3, 1]
    assert x.p.top_points(100) == sorted(range(len(x.cfg.instrs)),
                                         key=lambda i: (-x.p.gpr[i], i))


def test_peak_values_report_loc_source_lines():
    text = kernel("\t.loc 1 7 0\n\tadd.s32 %r2, %r1, 1;\n\t.loc 1 8 0\n"
                  "\tst.global.u32 [%rd1], %r2;\n\tret;\n")
    a = analyze_function(parse(text).functions[0], profile_for("sm_80"))
    (r2,) = [v for v in peak_values(a, {1: "k.cu"}) if v["name"] == "%r2"]
    assert r2["defined_source"] == [{"file": "k.cu", "line": 7, "column": 0}]


# --- real files -------------------------------------------------------------------------------


def test_many_preds_file():
    x = P(fn_of(DATA / "hand" / "many_preds.ptx"))
    assert x.p.max_live == 12
    assert x.p.max_preds == 13
    # %p1..%p12 and %p13 from its setp to the branch that reads it
    assert x.p.pred[x.index("setp.eq.s32 %p13")] == 13
    bra = next(i for i, ins in enumerate(x.cfg.instrs) if ins.opcode == "bra")
    assert x.p.pred[bra] == 12


@pytest.mark.parametrize("name, at_least", [("_Z7k_acc64PfPKfS1_i", 64),
                                            ("_Z8k_acc128PfPKfS1_i", 128),
                                            ("_Z9k_acc_f64PdPKdS1_i", 64)])
def test_accumulator_kernels(name, at_least):
    x = P(fn_of(DATA / "pressure_sm80.ptx", name))
    assert x.p.max_live >= at_least
    # the accumulators are live around the loop's back edge
    lp = x.cfg.loops[0]
    assert x.lv.live_in[lp.header].bit_count() >= at_least // (2 if "f64" in name else 1)


def test_k_preds_twenty_predicates():
    x = P(fn_of(DATA / "pressure_sm80.ptx", "_Z7k_predsPiPKiS1_i"))
    assert x.p.max_preds == 20


def _expected(x: P, i: int, live: int) -> tuple[int, int]:
    classes = x.fn.regs.classes
    ins = x.cfg.instrs[i]
    s = live
    for d in ins.defs:
        s |= 1 << d
    units = sum(UNITS[classes[v]] * max(1, x.fn.regs.vec[v]) for v in bits(s)
                if classes[v] != RegClass.PRED)
    preds = sum(1 for v in bits(s) if classes[v] == RegClass.PRED)
    return units, preds


@pytest.mark.parametrize("path", sorted(DATA.glob("**/*.ptx")), ids=lambda p: p.name)
def test_pressure_is_the_live_set_plus_definitions(path):
    """Without tuple groups, the pressure at a non-copy instruction is the size of what is live
    after it plus what it defines, and MaxLive is the largest of those and the entries."""
    for fn in parse_file(str(path)).functions:
        x = P(fn, tuples=False)
        best = 0
        for b in x.cfg.blocks:
            after = x.lv.live_after(b.id)
            for k, ins in enumerate(b.instrs):
                i = b.first + k
                units, preds = _expected(x, i, after[k])
                assert x.p.pred[i] == preds, (fn.name, ins)
                if ins.is_copy:
                    assert x.p.gpr[i] * 2 <= units
                else:
                    assert x.p.gpr[i] * 2 == units, (fn.name, ins)
                best = max(best, x.p.gpr[i] * 2)
            entry_units = sum(UNITS[fn.regs.classes[v]] * max(1, fn.regs.vec[v])
                              for v in bits(x.lv.live_in[b.id])
                              if fn.regs.classes[v] != RegClass.PRED)
            best = max(best, entry_units)
        assert x.p.max_regs * 2 == best
        # tuple groups only ever add
        with_groups = P(fn)
        assert with_groups.p.max_regs >= x.p.max_regs
        assert all(a >= b for a, b in zip(with_groups.p.gpr, x.p.gpr))


def test_analyze_function_bundle():
    fn = fn_of(DATA / "pressure_sm80.ptx", "_Z7k_acc64PfPKfS1_i")
    a = analyze_function(fn, profile_for("sm_80"))
    assert a.fn is fn and a.cfg.fn is fn
    assert a.pressure.max_live >= 64
    assert len(a.costs) == len(fn.regs)
    assert a.graph.nregs == len(fn.regs)
    # 74 registers x 4 bytes x 256 threads is beyond L1 (64 KB) and within L2 (256 KB)
    assert a.mem_latency == 10.0


def test_tuple_groups_of_vector_memory_operands():
    """Every vector of a load/store is one group whose shape is its size rounded up to a power
    of two: a .v4.f32 and a .v2.f64 are 4-aligned quads (SPEC 2)."""
    fn = fn_of(DATA / "vectors_sm80.ptx", "_Z5k_vecP6float4PKS_P4int4PKS3_P7double2PKS7_")
    info = find_tuples(fn)
    # a stored quad that reuses a loaded member in another position conflicts
    assert all(ins.opcode.startswith("st.") for ins, _ in info.conflicts)
    shapes = {tuple(fn.regs.names[v] for v, _ in g.members): str(g.shape) for g in info.groups}
    assert shapes[("%fd1", "%fd2")] == "B128"
    assert shapes[("%f1", "%f2", "%f3", "%f4")] == "B128"
    for g in info.groups:
        assert g.units == 8 and g.shape.align == 8
        assert [off for _, off in g.members] == [0, 4] or [off for _, off in g.members] == [
            0, 2, 4, 6]
    x = of_text("\tmov.u16 %rs1, 1;\n\tmov.u16 %rs2, 2;\n"
                "\tst.global.v2.u16 [%rd1], {%rs1, %rs2};\n\tret;\n")
    (g,) = x.tuples.groups
    assert g.units == 2 and str(g.shape) == "GPR32"      # two halves of one register


def test_pressure_of_remembers_an_unchanged_function_and_only_that():
    """pressure_of answers the same function again from memory (issue 16: the pre-passes and
    the report ask it twice), but a function whose statements or registers changed since, or
    a copy of it, gets a pressure of its own, and the remembered answer equals a fresh one."""
    from ptxalloc.analysis import pressure_of
    from ptxalloc.ir.instruction import Instruction
    fn = of_text("\tadd.s32 %r2, %r1, 1;\n"
                 "\tmul.lo.s32 %r3, %r2, %r1;\n"
                 "\tst.global.u32 [%rd1], %r3;\n"
                 "\tret;\n").fn
    first = pressure_of(fn)
    assert pressure_of(fn) is first
    fresh = Pressure(CFG(fn), Liveness(CFG(fn)), find_tuples(fn, CFG(fn).instrs))
    assert (fresh.max_live, fresh.max_preds, fresh.gpr) == (first.max_live, first.max_preds,
                                                            first.gpr)
    assert pressure_of(fn.copy()) is not first
    # a statement replaced in place: the body list is the same object, its contents are not
    k = next(i for i, s in enumerate(fn.body) if type(s) is Instruction
             and s.opcode.startswith("mul"))
    fn.body[k] = fn.body[k].copy_with(list(fn.body[k].ops))
    again = pressure_of(fn)
    assert again is not first and again.max_live == first.max_live
    # a statement left out: the pressure follows
    del fn.body[k]
    assert pressure_of(fn) is not again
