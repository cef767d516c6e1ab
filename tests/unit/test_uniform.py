"""Uniform registers (issue 17, seed 004 "Register Classes": UR0-UR62, UP0-UP6): the
uniformity analysis on hand-written kernels (special registers, parameters, uniform and
divergent branches, loops with uniform and divergent exits, early exits, warp collectives,
loads), the allocation to %UR/%URD/%UP proven by the checker and assembled by ptxas, the
checker's own refutations, the class limits, the switch and the report."""

from __future__ import annotations

import json
import re

import pytest

from ptxalloc import ptxas
from ptxalloc.alloc.uniform import UR_REGS, place_uniform
from ptxalloc.analysis.uniformity import DATAPATH_RULE, VALUE_RULE, uniform_registers
from ptxalloc.errors import VerificationError
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse
from ptxalloc.verify import parse_allocated, verify_modules

DECLS = """\t.reg .pred %p<8>;
\t.reg .b32 %r<80>;
\t.reg .b64 %rd<16>;
\t.reg .f32 %f<8>;
"""


def kernel(body: str, target: str = "sm_80") -> str:
    return (f".version 8.0\n.target {target}\n.address_size 64\n\n"
            f".visible .entry k(.param .u64 k_p, .param .u32 k_n)\n{{\n{DECLS}{body}\n}}\n")


def uniform_names(text: str, rule=VALUE_RULE) -> set[str]:
    fn = parse(text, "k.ptx").functions[0]
    u = uniform_registers(fn, rule=rule)
    return {fn.regs.names[v] for v in range(len(fn.regs)) if u >> v & 1}


SOURCES = kernel("""
\tld.param.u64 %rd1, [k_p];
\tld.param.u32 %r1, [k_n];
\tmov.u32 %r2, %ctaid.x;
\tmov.u32 %r3, %ntid.x;
\tmov.u32 %r4, %tid.x;
\tmov.u32 %r5, %laneid;
\tmad.lo.s32 %r6, %r2, %r3, %r4;
\tmul.lo.s32 %r7, %r2, %r3;
\tcvta.to.global.u64 %rd2, %rd1;
\tld.global.u32 %r8, [%rd2];
\tatom.global.add.u32 %r9, [%rd2], 1;
\tmov.u32 %r10, %clock;
\tmov.u32 %r11, %lanemask_lt;
\tsetp.lt.u32 %p1, %r7, %r1;
\tsetp.lt.u32 %p2, %r6, %r1;
\tvote.sync.ballot.b32 %r12, %p2, 0xffffffff;
\tvote.sync.ballot.b32 %r13, %p2, %r1;
\tredux.sync.add.u32 %r14, %r4, 0xffffffff;
\tshfl.sync.idx.b32 %r15, %r2, 0, 31, 0xffffffff;
\tcvt.rn.f32.u32 %f1, %r7;
\tadd.f32 %f2, %f1, %f1;
\tadd.s32 %r16, %r8, %r9;
\tadd.s32 %r17, %r16, %r10;
\tadd.s32 %r18, %r17, %r11;
\tadd.s32 %r19, %r18, %r12;
\tadd.s32 %r19, %r19, %r13;
\tadd.s32 %r19, %r19, %r14;
\tadd.s32 %r19, %r19, %r15;
\tadd.s32 %r19, %r19, %r5;
\tselp.b32 %r20, 1, 2, %p1;
\tselp.b32 %r21, 1, 2, %p2;
\tmov.b32 %r22, %f2;
\tadd.s32 %r19, %r19, %r22;
\tadd.s32 %r19, %r19, %r20;
\tadd.s32 %r19, %r19, %r21;
\tst.global.u32 [%rd2], %r19;
\tret;""")


def test_sources_of_uniformity_and_divergence():
    u = uniform_names(SOURCES)
    # parameters, %ctaid/%ntid and what is computed from them alone
    assert {"%rd1", "%r1", "%r2", "%r3", "%r7", "%rd2", "%p1", "%r20"} <= u
    # a ballot and a reduction over the whole warp are uniform whatever they read
    assert {"%r12", "%r14"} <= u
    # %tid, %laneid, %clock, %lanemask_*, global loads, atomics, shuffles, a ballot with a
    # membermask that is not the full warp, and whatever reads them, are divergent
    for name in ("%r4", "%r5", "%r6", "%r8", "%r9", "%r10", "%r11", "%r13", "%r15", "%p2",
                 "%r16", "%r19", "%r21"):
        assert name not in u, name


def test_floating_point_is_uniform_but_not_for_the_datapath():
    assert {"%f1", "%f2", "%r22"} <= uniform_names(SOURCES, VALUE_RULE)
    dp = uniform_names(SOURCES, DATAPATH_RULE)
    assert not {"%f1", "%f2", "%r22"} & dp        # no floating point on the uniform datapath
    assert {"%r7", "%rd2", "%p1", "%r12"} <= dp


def diamond(cond: str) -> str:
    """x defined differently on the two sides of a branch on ``cond``, read after the join."""
    return kernel(f"""
\tld.param.u32 %r1, [k_n];
\tmov.u32 %r2, %tid.x;
\tsetp.lt.u32 %p1, {cond}, 16;
\t@%p1 bra $L_else;
\tmov.u32 %r3, 1;
\tadd.s32 %r4, %r1, 7;
\tbra.uni $L_join;
$L_else:
\tmov.u32 %r3, 2;
$L_join:
\tadd.s32 %r5, %r3, %r1;
\tld.param.u64 %rd1, [k_p];
\tst.global.u32 [%rd1], %r5;
\tret;""")


def test_value_merged_after_a_divergent_branch_is_divergent():
    u = uniform_names(diamond("%r2"))
    assert "%p1" not in u
    # defined on both sides (sync dependence), and what reads it after the join
    assert "%r3" not in u and "%r5" not in u
    # defined under the divergent branch from uniform inputs: not uniform either (the
    # definition may run for part of the warp only)
    assert "%r4" not in u
    # after the join: uniform again
    assert {"%r1", "%rd1"} <= u


def test_value_merged_after_a_uniform_branch_is_uniform():
    u = uniform_names(diamond("%r1"))
    assert {"%p1", "%r3", "%r4", "%r5"} <= u


def loop(exit_cond: str) -> str:
    return kernel(f"""
\tld.param.u32 %r1, [k_n];
\tmov.u32 %r2, %tid.x;
\tmov.u32 %r3, 0;
$L_loop:
\tadd.s32 %r3, %r3, 1;
\tsetp.lt.u32 %p1, {exit_cond}, %r1;
\t@%p1 bra $L_loop;
\tadd.s32 %r4, %r3, 5;
\tld.param.u64 %rd1, [k_p];
\tst.global.u32 [%rd1], %r4;
\tret;""")


def test_loop_with_uniform_exit_keeps_its_counter_uniform():
    assert {"%r3", "%r4", "%p1"} <= uniform_names(loop("%r3"))


def test_counter_of_a_loop_with_divergent_exit_is_divergent_after_it():
    # threads leave the loop after different trip counts (temporal divergence)
    u = uniform_names(loop("%r2"))
    assert "%r3" not in u and "%r4" not in u
    assert "%r1" in u


EARLY_EXIT = kernel("""
\tld.param.u32 %r1, [k_n];
\tmov.u32 %r2, %tid.x;
\tsetp.ge.u32 %p1, %r2, %r1;
\t@%p1 bra $L_exit;
\tmov.u32 %r3, %ctaid.x;
\tshl.b32 %r4, %r3, 2;
\tld.param.u64 %rd1, [k_p];
\tst.global.u32 [%rd1], %r4;
$L_exit:
\tret;""")


def test_an_early_exit_does_not_make_the_rest_divergent():
    u = uniform_names(EARLY_EXIT)
    assert "%p1" not in u
    assert {"%r3", "%r4", "%rd1"} <= u


def test_a_register_read_before_any_definition_is_divergent():
    text = kernel("""
\tld.param.u32 %r1, [k_n];
\tsetp.eq.u32 %p1, %r1, 0;
\t@%p1 bra $L_join;
\tmov.u32 %r3, 1;
$L_join:
\tadd.s32 %r4, %r3, 1;
\tld.param.u64 %rd1, [k_p];
\tst.global.u32 [%rd1], %r4;
\tret;""")
    u = uniform_names(text)
    assert "%r3" not in u and "%r4" not in u
    assert "%p1" in u


# -- allocation, proof, ptxas ---------------------------------------------------------------

def allocated(text: str, **kw):
    res = allocate(text, uniform=True, filename="k.ptx", **kw)
    assert {f.verified for f in res.functions} == {True}
    return res


def assembles(text: str, arch: str = "sm_80") -> None:
    if not ptxas.available():
        pytest.skip("ptxas is not on the PATH")
    got = ptxas.assemble(text, arch)
    assert got.ok, got.output


@pytest.mark.parametrize("text", [SOURCES, diamond("%r2"), diamond("%r1"), loop("%r3"),
                                  loop("%r2"), EARLY_EXIT],
                         ids=["sources", "divergent-diamond", "uniform-diamond",
                              "uniform-loop", "divergent-loop", "early-exit"])
def test_allocation_is_proven_and_assembles(text):
    res = allocated(text)
    ptx = res.ptx
    assert re.search(r"%UR\d|%URD\d", ptx)
    assert ".reg .b32 %UR<" in ptx or ".reg .b64 %URD<" in ptx
    assembles(ptx)
    again = verify_modules(parse(text, "k.ptx"), parse_allocated(ptx, "a.ptx"))
    assert len(again) == 1


def test_uniform_values_are_the_ones_in_uniform_registers():
    res = allocated(diamond("%r2"))
    ptx = res.ptx
    assert re.search(r"ld\.param\.u32\s+%UR\d+, \[k_n\]", ptx)
    assert re.search(r"mov\.u32\s+%R\d+, %tid\.x", ptx)
    # x is merged after a divergent branch: it stays in R on both sides
    assert re.search(r"mov\.u32\s+%R\d+, 1;", ptx) and re.search(r"mov\.u32\s+%R\d+, 2;", ptx)


def test_uniform_predicate_guards_the_loop_branch():
    ptx = allocated(loop("%r3")).ptx
    assert re.search(r"@%UP\d+ bra", ptx)
    assert "@%P" not in ptx


def test_off_by_default_and_before_sm_75():
    assert "%UR" not in allocate(SOURCES, filename="k.ptx").ptx
    res = allocated(kernel(SOURCES.split("{", 1)[1].rsplit("}", 1)[0].replace(DECLS, ""),
                           target="sm_70"))
    assert "%UR" not in res.ptx and "%UP" not in res.ptx
    assert res.functions[0].uniform_registers == 0


def test_report_counts_uniform_registers():
    res = allocated(SOURCES)
    row = res.report()["functions"][0]
    assert row["uniform_registers"] >= 1
    ur = {int(n) for n in re.findall(r"%URD?(\d+)", res.ptx)}
    assert row["uniform_registers"] <= UR_REGS
    assert row["uniform_registers"] >= max(ur) + 1
    info = row["uniform_values"]
    assert info["placed"] <= info["found"] <= info["of"]
    assert info["max_live_registers"] < row["max_live_legalized"]
    json.dumps(row)


def test_uniform_class_limit_sends_the_rest_to_r():
    # 70 uniform 32-bit values live at once: 63 fit UR0-UR62, the rest go to R
    body = "\tld.param.u32 %r1, [k_n];\n"
    body += "".join(f"\tadd.s32 %r{i + 2}, %r1, {i};\n" for i in range(70))
    body += "\tmov.u32 %r75, %tid.x;\n"
    body += "".join(f"\tadd.s32 %r75, %r75, %r{i + 2};\n" for i in range(70))
    body += "\tld.param.u64 %rd1, [k_p];\n\tst.global.u32 [%rd1], %r75;\n\tret;"
    text = kernel(body)
    fn = parse(text, "k.ptx").functions[0]
    placed = place_uniform(fn)
    assert placed.registers(fn) == UR_REGS
    assert placed.found > len(placed.start)
    # in the order written: the schedule would interleave the definitions with their uses, and
    # recomputation would form each value at its use from %r1 (3 registers at once)
    res = allocated(text, knobs={"schedule": 0, "recompute": 0})
    assert res.functions[0].uniform_registers == UR_REGS
    assert not re.search(r"%UR(6[3-9]|[7-9]\d)", res.ptx)
    assembles(res.ptx)


# -- the checker's own uniformity check ------------------------------------------------------

def refute(original: str, allocated_text: str, pattern: str) -> None:
    with pytest.raises(VerificationError) as e:
        verify_modules(parse(original, "k.ptx"), parse_allocated(allocated_text, "a.ptx"))
    assert re.search(pattern, str(e.value)), str(e.value)


def rename(ptx: str, old: str, new: str) -> str:
    """``ptx`` with register ``old`` renamed ``new`` everywhere and ``new`` declared."""
    ptx = re.sub(re.escape(old) + r"\b", new, ptx)
    fam = re.match(r"%(URD|UR|UP)", new).group(1)
    typ = {"UR": ".b32", "URD": ".b64", "UP": ".pred"}[fam]
    return ptx.replace("\t.reg", f"\t.reg {typ} {new};\n\t.reg", 1)


def test_checker_refutes_a_divergent_value_in_a_uniform_register():
    ptx = allocated(diamond("%r2")).ptx
    tid = re.search(r"mov\.u32\s+(%R\d+), %tid\.x", ptx).group(1)
    refute(diamond("%r2"), rename(ptx, tid, "%UR40"), r"%tid\.x differs between the threads")


def test_checker_refutes_a_definition_under_a_divergent_branch():
    ptx = allocated(diamond("%r2")).ptx
    one = re.search(r"mov\.u32\s+(%R\d+), 1;", ptx).group(1)
    refute(diamond("%r2"), rename(ptx, one, "%UR41"), r"under a divergent branch")


def test_checker_refutes_floating_point_and_loads_in_uniform_registers():
    text = kernel("""
\tld.param.u64 %rd1, [k_p];
\tld.global.f32 %f1, [%rd1];
\tadd.f32 %f2, %f1, %f1;
\tst.global.f32 [%rd1], %f2;
\tret;""")
    ptx = allocated(text).ptx
    f2 = re.search(r"add\.f32\s+(%R\d+)", ptx).group(1)
    f1 = re.search(r"ld\.global\.f32\s+(%R\d+)", ptx).group(1)
    if f1 != f2:
        refute(text, rename(ptx, f2, "%UR42"), r"floating-point instruction")
    refute(text, rename(ptx, f1, "%UR43"), r"only \.param and \.const loads")


def test_checker_enforces_the_class_limits_and_the_target():
    text = loop("%r3")
    ptx = allocated(text).ptx
    up = re.search(r"@(%UP\d+) bra", ptx).group(1)
    refute(text, rename(ptx, up, "%UP7"), r"only UP0-UP6 exist")
    ur = re.search(r"ld\.param\.u32\s+(%UR\d+)", ptx).group(1)
    refute(text, rename(ptx, ur, "%UR63"), r"only UR0-UR62 exist")
    refute(text, ptx.replace("arch=sm_80", "arch=sm_70"), r"sm_70 does not have")


def test_checker_refutes_a_uniform_guard_replaced_by_a_divergent_one():
    # the loop branch on a %P predicate makes the loop divergent: the counter's definitions
    # inside it may no longer be uniform
    text = loop("%r3")
    ptx = allocated(text).ptx
    up = re.search(r"@(%UP\d+) bra", ptx).group(1)
    ptx = re.sub(re.escape(up) + r"\b", "%P5", ptx).replace("\t.reg", "\t.reg .pred %P5;\n\t.reg", 1)
    refute(text, ptx, r"under a divergent branch")


def test_cli_prints_uniform_registers_and_the_switch(tmp_path, capsys):
    from ptxalloc.cli import main
    src = tmp_path / "k.ptx"
    src.write_text(SOURCES)
    out = tmp_path / "out.ptx"
    assert main(["allocate", str(src), "--uniform", "-v", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    m = re.search(r"ptxas info    : Used (\d+) registers, (\d+) uniform registers", text)
    assert m and int(m.group(2)) >= 1
    assert "%UR" in out.read_text()
    assert main(["verify", str(src), str(out)]) == 0
    capsys.readouterr()
    assert main(["allocate", str(src), "--no-uniform", "-v", "-o", str(out)]) == 0
    assert "uniform registers" not in capsys.readouterr().out
    assert "%UR" not in out.read_text()


def test_input_names_like_uniform_registers_get_a_stem():
    text = diamond("%r1").replace("%r", "%UR")
    res = allocated(text)
    assert "stem=x" in res.ptx and re.search(r"%xURD?\d", res.ptx)
    assembles(res.ptx)


def test_functions_under_the_calling_convention_keep_r_and_p():
    text = (".version 8.0\n.target sm_80\n.address_size 64\n\n"
            ".func (.param .b32 ret) f(.param .b32 a)\n{\n\t.reg .b32 %r<4>;\n"
            "\tld.param.b32 %r1, [a];\n\tmov.u32 %r2, %ctaid.x;\n\tadd.s32 %r3, %r1, %r2;\n"
            "\tst.param.b32 [ret], %r3;\n\tret;\n}\n")
    res = allocated(text)
    assert "%UR" not in res.ptx and "uniform_values" not in res.functions[0].extra


def test_spill_explanations_count_r_pressure_only():
    # 20 uniform values and 12 divergent ones live at once, budget 8: the divergent ones spill,
    # and the pressure the explanation names is R's alone (uniform values are in UR)
    body = "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r2, %tid.x;\n"
    body += "".join(f"\tadd.s32 %r{i + 3}, %r1, {i};\n" for i in range(20))
    body += "".join(f"\tadd.s32 %r{i + 30}, %r2, {i};\n" for i in range(12))
    body += "\tmov.u32 %r70, 0;\n"
    body += "".join(f"\tadd.s32 %r70, %r70, %r{i + 3};\n" for i in range(20))
    body += "".join(f"\tadd.s32 %r70, %r70, %r{i + 30};\n" for i in range(12))
    body += "\tld.param.u64 %rd1, [k_p];\n\tst.global.u32 [%rd1], %r70;\n\tret;"
    # without recomputation chains, in the order written: the chains would form each divergent
    # value from %tid.x at its use and the schedule each sum term next to its use, and nothing
    # would spill
    res = allocated(kernel(body), registers=8, knobs={"recompute": 1, "schedule": 0})
    f = res.functions[0]
    assert f.spilled_values and f.uniform_registers >= 20
    whys = [v["why"] for v in f.extra["spills"]["values"]]
    pressures = [int(m.group(1)) for w in whys for m in [re.search(r"pressure (\d+)", w)] if m]
    assert pressures and max(pressures) <= 15 < f.max_live_legalized


def test_checker_refutes_uniform_registers_under_the_calling_convention():
    # a kernel with a call is under the convention: the allocator keeps it in R and P, and a
    # hand-edited output that puts the kernel's parameter in a uniform register across the call
    # is refused (the convention saves R registers only; the callee may change UR)
    text = (".version 8.0\n.target sm_80\n.address_size 64\n\n"
            ".func (.param .b32 r) g(.param .b32 a)\n{\n\t.reg .b32 %r<3>;\n"
            "\tld.param.b32 %r1, [a];\n\tadd.s32 %r2, %r1, 1;\n\tst.param.b32 [r], %r2;\n"
            "\tret;\n}\n\n"
            ".visible .entry k(.param .u32 k_n, .param .u64 k_p)\n{\n"
            "\t.reg .b32 %r<5>;\n\t.reg .b64 %rd<2>;\n"
            "\tld.param.u32 %r1, [k_n];\n\tmov.u32 %r2, %tid.x;\n"
            "\t{\n\t.param .b32 pa;\n\t.param .b32 pr;\n\tst.param.b32 [pa], %r2;\n"
            "\tcall.uni (pr), g, (pa);\n\tld.param.b32 %r3, [pr];\n\t}\n"
            "\tadd.s32 %r4, %r3, %r1;\n\tld.param.u64 %rd1, [k_p];\n"
            "\tst.global.u32 [%rd1], %r4;\n\tret;\n}\n")
    res = allocated(text)
    assert "%UR" not in res.ptx and "%UP" not in res.ptx
    kernel_ptx = res.ptx[res.ptx.index(".entry k"):]
    n = re.search(r"ld\.param\.u32\s+(%R\d+), \[k_n\]", kernel_ptx).group(1)
    head, body = res.ptx.split(".visible .entry k", 1)
    edited = head + ".visible .entry k" + rename(body, n, "%UR40")
    refute(text, edited, r"%UR40 is a uniform register, but the kernel 'k' is under the "
                         r"calling convention")
