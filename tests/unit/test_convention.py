"""The GPU calling convention (issue 7, SPEC section 7, docs/allocated-ptx.md "The calling
convention") on the hand-made PTX of tests/data/abi/: saves around calls at K = 15, callee-saved
registers at K = 64 with their prologue and epilogues, argument and return registers (eight
and nine 32-bit arguments, 64-bit pairs, a 64-bit return), recursion, a tail call, leaf
functions, R31 reserved, and the ``-v`` lines. Placements are checked in the output text."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import DATA, assert_verified
from ptxalloc import ptxas
from ptxalloc.pipeline import allocate
from ptxalloc.target.abi import Convention, assign_arguments, return_register

ABI = DATA / "abi"
ABI_FILES = sorted(ABI.glob("*.ptx"))



def alloc(name: str, k: int, verify: bool = False):
    return allocate((ABI / name).read_text(), registers=k, verify=verify, filename=str(ABI / name))


def fn_result(res, name: str):
    return next(f for f in res.functions if f.name == name)


def lines_of(text: str) -> list[str]:
    return [re.sub(r"\s+", " ", ln).strip() for ln in text.splitlines()]


def physical(fr, reg: str) -> str:
    """The physical register the allocation gave the original register ``reg``."""
    orig = fr.function.regs.names
    return fr.names[orig.index(reg)]



# -- the files themselves -----------------------------------------------------------------

@pytest.mark.parametrize("path", ABI_FILES, ids=[p.name for p in ABI_FILES])
def test_abi_file_has_a_header_and_assembles(path):
    text = path.read_text()
    first = text.splitlines()[0]
    assert first.startswith(f"// {path.name} -- "), first
    assert ".target sm_80" in text
    if not ptxas.available():
        pytest.skip("ptxas is not on the PATH")
    out = ptxas.assemble_file(str(path), "sm_80")
    assert out.ok, out.output


# -- the convention's registers for a budget --------------------------------------------

def test_ranges_are_clipped_to_the_budget():
    c15, c28, c64 = Convention(15), Convention(28), Convention(64)
    assert c15.arg_regs == 8 and list(c15.caller_saved) == list(range(15))
    assert len(c15.callee_saved) == 0 and c15.callee_saved_units() == 0
    assert list(c28.callee_saved) == [24, 25, 26, 27]
    assert list(c64.caller_saved) == list(range(24))
    assert list(c64.callee_saved) == list(range(24, 31))        # R31 is the frame pointer
    assert c64.reserves_frame_pointer and not Convention(31).reserves_frame_pointer
    assert Convention(4).arg_regs == 4


def test_argument_assignment():
    c = Convention(64)
    assert assign_arguments([4] * 8, c) == list(range(8))
    assert assign_arguments([4] * 9, c) == list(range(8)) + [None]          # ninth: stack
    assert assign_arguments([8] * 5, c) == [0, 2, 4, 6, None]               # RD0..RD6
    assert assign_arguments([4, 8, 4], c) == [0, 2, 4]                      # pair skips R1
    assert assign_arguments([16, 4], c) == [None, 2]        # aggregate: by reference, a pair slot
    assert return_register(4, c) == 0 and return_register(8, c) == 0
    assert return_register(16, c) is None


# -- a value live across a call ------------------------------------------------------------

def _around_call(lines: list[str], call: str | int):
    """(saves just before, restores just after) the call starting with ``call`` (a line
    prefix: its first occurrence) or at line index ``call``."""
    i = call if isinstance(call, int) else next(
        i for i, ln in enumerate(lines) if ln.startswith(call))
    before, after = [], []
    j = i - 1
    while "//@save" in lines[j]:
        before.append(lines[j])
        j -= 1
    j = i + 1
    while "//@restore" in lines[j]:
        after.append(lines[j])
        j += 1
    return before, after


def test_k15_saves_values_live_across_the_call():
    res = alloc("live_across.ptx", 15, verify=True)
    kern = fn_result(res, "live_across")
    lines = lines_of(kern.text)
    before, after = _around_call(lines, "call.uni (retval0), mid,")
    saved = {re.search(r"//@save (%\w+)#", ln).group(1) for ln in before}
    restored = {re.search(r"//@restore (%\w+)#", ln).group(1) for ln in after}
    assert saved == restored == {"%r1", "%rd2"}
    # each save and its restore use the same register and the same slot
    for s in before:
        reg, slot = re.search(r"st\.local\.b\d+ (\[[^]]+\]), (%R\w+);", s).group(2, 1)
        v = re.search(r"//@save (\S+)", s).group(1)
        r = next(x for x in after if x.endswith(f"//@restore {v}"))
        assert re.search(rf"ld\.local\.b\d+ {reg}, {re.escape(slot)};", r), (s, r)
    # %r1's register is caller-saved (there is no other kind at K = 15)
    assert int(physical(kern, "%r1")[2:]) < 15
    conv = kern.report()["convention"]
    assert conv["leaf"] is False and conv["calls"] == 1
    assert conv["values_live_across_calls"] == 2
    assert conv["callee_saved_used"] == []
    assert conv["save_restore_bytes"] == 2 * (4 + 8)
    assert kern.spill_stores_bytes == 12 and kern.spill_loads_bytes == 12
    # bindings: arguments in R0, R1, the result in R0, on both sides of the call
    assert "st.param.b32 [param0+0], %R0;" in lines and "st.param.b32 [param1+0], %R1;" in lines
    assert "ld.param.b32 %R0, [retval0+0];" in lines
    mid_lines = lines_of(fn_result(res, "mid").text)
    assert "ld.param.u32 %R0, [mid_p0];" in mid_lines
    assert "ld.param.u32 %R1, [mid_p1];" in mid_lines
    assert mid_lines.count("st.param.b32 [mid_ret+0], %R0;") == 2
    # mid keeps %r5 across its call to leaf: saved too, and no callee-saved register
    mid = fn_result(res, "mid")
    before, after = _around_call(lines_of(mid.text), "call.uni (retval0), leaf,")
    assert [re.search(r"//@save (%\w+)#", ln).group(1) for ln in before] == ["%r5"]
    assert len(after) == 1
    assert "//@csave" not in mid.text and "//@crestore" not in mid.text
    assert "abi=1" in mid.text.splitlines()[next(i for i, ln in enumerate(mid.text.splitlines())
                                                 if "//@ptxalloc" in ln)]
    assert_verified(res)


def test_k64_keeps_values_live_across_the_call_in_callee_saved_registers():
    res = alloc("live_across.ptx", 64, verify=True)
    kern = fn_result(res, "live_across")
    assert "//@save" not in kern.text and "//@restore" not in kern.text
    r1 = physical(kern, "%r1")
    assert re.fullmatch(r"%R\d+", r1) and 24 <= int(r1[2:]) <= 30, r1
    rd2 = physical(kern, "%rd2")
    assert 24 <= int(rd2[3:]) <= 29, rd2
    conv = kern.report()["convention"]
    assert conv["save_restore_bytes"] == 0 and conv["values_live_across_calls"] == 2
    assert kern.spill_stores_bytes == kern.spill_loads_bytes == 0
    assert "%R31" not in kern.text
    assert_verified(res)


def test_k64_callee_uses_callee_saved_register_with_prologue_and_epilogues():
    res = alloc("live_across.ptx", 64, verify=True)
    mid = fn_result(res, "mid")
    r5 = physical(mid, "%r5")
    n = int(r5[2:])
    assert 24 <= n <= 30, r5
    lines = lines_of(mid.text)
    body = [ln for ln in lines if ln and not ln.startswith((".reg", ".local", "//@ptxalloc",
                                                            "//@schedule", "{", "}", ".func",
                                                            ".param", ")"))]
    # the prologue: the first instruction stores R<n>
    assert re.fullmatch(rf"st\.local\.b32 \[__ptxalloc_spill\+\d+\], %R{n}; //@csave R{n}",
                        body[0]), body[0]
    slot = re.search(r"\[[^]]+\]", body[0]).group(0)
    rets = [i for i, ln in enumerate(lines) if re.fullmatch(r"ret;", ln)]
    assert len(rets) == 2
    for i in rets:
        assert lines[i - 1] == f"ld.local.b32 %R{n}, {slot}; //@crestore R{n}", lines[i - 1]
    assert mid.text.count("//@csave") == 1 and mid.text.count("//@crestore") == 2
    assert "//@save" not in mid.text
    conv = mid.report()["convention"]
    assert conv["callee_saved_used"] == [f"R{n}"]
    assert conv["save_restore_bytes"] == 4 + 2 * 4
    assert_verified(res)


@pytest.mark.parametrize("k", [15, 64, 255])
def test_leaf_function_has_no_saves(k):
    res = alloc("live_across.ptx", k, verify=True)
    leaf = fn_result(res, "leaf")
    header = next(ln for ln in leaf.text.splitlines() if "//@ptxalloc" in ln)
    assert "abi=1" in header and "leaf=1" in header
    assert not re.search(r"//@(save|restore|csave|crestore|spill|reload)", leaf.text)
    conv = leaf.report()["convention"]
    assert conv == {"leaf": True, "calls": 0, "tail_calls": 0, "values_live_across_calls": 0,
                    "callee_saved_used": [], "save_restore_bytes": 0}
    assert leaf.stack_frame_bytes == 0
    # the non-leaf ones do not say leaf=1
    for name in ("mid", "live_across"):
        h = next(ln for ln in fn_result(res, name).text.splitlines() if "//@ptxalloc" in ln)
        assert "abi=1" in h and "leaf=1" not in h
    assert_verified(res)


# -- arguments and results -------------------------------------------------------------

@pytest.mark.parametrize("k", [15, 64])
def test_eight_and_nine_32bit_arguments(k):
    res = alloc("args.ptx", k)
    for name, n in (("sum8", 8), ("sum9", 9)):
        lines = lines_of(fn_result(res, name).text)
        for i in range(8):
            assert f"ld.param.u32 %R{i}, [{name}_param_{i}];" in lines, (name, i)
        assert f"st.param.b32 [{name}_ret+0], %R0;" in lines
    # the ninth parameter binds nothing: it is not forced into R8 (there is no R8 argument)
    ninth = next(ln for ln in lines_of(fn_result(res, "sum9").text) if "[sum9_param_8]" in ln)
    assert re.fullmatch(r"ld\.param\.u32 %R\d+, \[sum9_param_8\];", ninth)
    kern = lines_of(fn_result(res, "args").text)
    for i in range(8):
        assert kern.count(f"st.param.b32 [param{i}+0], %R{i};") == 2, i
    assert kern.count("ld.param.b32 %R0, [retval0+0];") == 2


@pytest.mark.parametrize("k", [15, 64])
def test_64bit_arguments_take_even_pairs(k):
    res = alloc("args64.ptx", k, verify=True)
    wide = lines_of(fn_result(res, "wide").text)
    for i, rd in enumerate((0, 2, 4, 6)):
        assert f"ld.param.u64 %RD{rd}, [wide_p{i}];" in wide
    assert "st.param.b64 [wide_ret+0], %RD0;" in wide
    mixed = lines_of(fn_result(res, "mixed").text)
    assert "ld.param.u32 %R0, [mixed_p0];" in mixed
    assert "ld.param.u64 %RD2, [mixed_p1];" in mixed
    assert "ld.param.u32 %R4, [mixed_p2];" in mixed
    assert "st.param.b64 [mixed_ret+0], %RD0;" in mixed
    kw = lines_of(fn_result(res, "k_wide").text)
    for i, rd in enumerate((0, 2, 4, 6)):
        assert f"st.param.b64 [param{i}+0], %RD{rd};" in kw
    assert "ld.param.b64 %RD0, [retval0+0];" in kw
    km = lines_of(fn_result(res, "k_mixed").text)
    assert "st.param.b32 [param0+0], %R0;" in km
    assert "st.param.b64 [param1+0], %RD2;" in km
    assert "st.param.b32 [param2+0], %R4;" in km
    assert "ld.param.b64 %RD0, [retval0+0];" in km
    assert_verified(res)


def test_param_size_comes_from_the_declaration_in_scope():
    res = alloc("param_scopes.ptx", 15)
    k = lines_of(fn_result(res, "k_scopes").text)
    assert "st.param.b64 [param1+0], %RD2;" in k
    assert "st.param.b32 [param1+0], %R1;" in k


# -- recursion and tail calls -------------------------------------------------------------

def test_recursion_k15_saves_around_both_calls():
    res = alloc("fib.ptx", 15, verify=True)
    fib = fn_result(res, "fib")
    lines = lines_of(fib.text)
    assert "ld.param.u32 %R0, [fib_param_0];" in lines
    assert "st.param.b32 [func_retval0+0], %R0;" in lines
    assert lines.count("st.param.b32 [param0+0], %R0;") == 2
    assert lines.count("ld.param.b32 %R0, [retval0+0];") == 2
    calls = [i for i, ln in enumerate(lines) if ln.startswith("call.uni (retval0), fib,")]
    assert len(calls) == 2
    saved = []
    for c in calls:
        before, after = _around_call(lines, c)
        saved.append({re.search(r"//@save (%\w+)#", ln).group(1) for ln in before})
        assert len(after) == len(before)
    assert saved == [{"%r8"}, {"%r5"}]
    assert_verified(res)


def test_recursion_k64_uses_callee_saved_registers():
    res = alloc("fib.ptx", 64, verify=True)
    fib = fn_result(res, "fib")
    assert "//@save" not in fib.text
    used = fib.report()["convention"]["callee_saved_used"]
    assert len(used) == 2 and all(24 <= int(r[1:]) <= 30 for r in used)
    # one merged store and one merged reload of both (SpillVectorize, on by default)
    assert re.findall(r"//@(csave|crestore) (R\d+ R\d+)$", fib.text, re.M) == [
        ("csave", " ".join(used)), ("crestore", " ".join(used))]
    assert_verified(res)


def test_tail_call_is_detected_and_reported():
    res = alloc("tail.ptx", 15, verify=True)
    rep = {f["name"]: f["convention"] for f in res.report()["functions"]}
    assert rep["tail_f"]["tail_calls"] == 1 and rep["tail_f"]["calls"] == 1
    assert rep["not_tail"]["tail_calls"] == 0 and rep["not_tail"]["calls"] == 1
    assert rep["k_tail"]["tail_calls"] == 0 and rep["k_tail"]["calls"] == 2
    assert rep["tail_g"]["leaf"] is True
    # the call stays a call
    assert "call.uni (retval0), tail_g, (param0);" in lines_of(fn_result(res, "tail_f").text)
    assert_verified(res)


# -- R31 and registers beyond the convention's ranges ----------------------------------------

def test_registers_above_r31_are_preserved_across_calls_by_someone():
    """R32 and up are caller-saved (docs/decisions.md): a .func may write them without a
    prologue save, and a caller saves what it keeps there across a call."""
    res = alloc("r31.ptx", 64, verify=True)
    wide = fn_result(res, "wide")
    written = {int(n) for n in re.findall(r"^\s*[a-z][\w.]*\s+%R(\d+),", wide.text, re.M)}
    csaved = {int(n) for regs in re.findall(r"//@csave ((?:R\d+ ?)+)$", wide.text, re.M)
              for n in re.findall(r"R(\d+)", regs)}
    assert {n for n in written if 24 <= n <= 30} <= csaved
    many = fn_result(res, "many_live")
    saved_regs = {int(n) for regs in re.findall(
        r"st\.local(?:\.v[24])?\.b(?:32|64)\s+\[[^\]]+\],\s*([^;]+);\s*//@save", many.text)
        for n in re.findall(r"%RD?(\d+)", regs)}
    assert any(r >= 32 for r in saved_regs), many.text
    assert_verified(res)


# -- verification over every ABI file and budget -------------------------------------------

def _abi_params():
    out = []
    for p in ABI_FILES:
        for k in (15, 32, 64, 255):
            out.append(pytest.param(p, k, id=f"{p.name}-K{k}"))
    return out


@pytest.mark.parametrize("path,k", _abi_params())
def test_abi_allocations_assemble_and_verify(path, k):
    """Every function of every ABI file at K = 15, 32, 64, 255: within the budget, R31 never
    used above K = 31 (r31.ptx needs more than 31 registers there, so it would be reached),
    no callee-saved register below K = 25, ptxas accepts the output, the checker proves it."""
    from ptxalloc.pipeline import allocate_module
    from ptxalloc.ptx import parse
    from ptxalloc.verify import verify_module_text

    text = path.read_text()
    module = parse(text, str(path))
    res = allocate_module(module, k, verify=False)
    for fr in res.functions:
        assert fr.registers <= k
        conv = fr.report()["convention"]             # every function here is under the convention
        if k > 31:
            assert not re.search(r"%R31\b|%RD30\b|%RQ28\b", fr.text), fr.name
        if k <= 24:
            assert conv["callee_saved_used"] == [] and "//@csave" not in fr.text
        if path.name == "r31.ptx" and fr.name in ("wide", "many_live") and k >= 32:
            # R0..R30 at K = 32; beyond R31 (skipping it) at K = 64 and 255
            assert fr.registers == 31 if k == 32 else fr.registers > 32
    if ptxas.available():
        out = ptxas.assemble(res.ptx, "sm_80")
        assert out.ok, out.output
    verify_module_text(module, res.ptx, res.functions)
    assert_verified(res)


# -- the -v lines -------------------------------------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptxalloc.cli", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("k,clip", [
    (15, "(budget 15: no callee-saved registers; values live across calls are saved around "
         "them)"),
    (28, "(budget 28: only R24-R27 callee-saved registers; values live across calls are saved "
         "around them)"),
    (64, None)])
def test_verbose_lines_describe_the_convention(tmp_path, k, clip):
    out = tmp_path / "out.ptx"
    p = _cli("allocate", str(ABI / "live_across.ptx"), "-o", str(out), "--registers", str(k),
             "-v")
    assert p.returncode == 0, p.stderr
    notes = [ln.strip() for ln in p.stdout.splitlines() if "calling convention:" in ln]
    assert len(notes) == 3
    assert any(n.startswith("calling convention: leaf, 0 call(s)") for n in notes)
    kern = next(n for n in notes if "non-leaf" in n and "2 value(s) live across calls" in n)
    assert "1 call(s)" in kern and "0 tail call(s)" in kern
    if clip:
        assert all(n.endswith(clip) for n in notes), notes
        if k == 15:
            assert "callee-saved used: none" in kern and "24 bytes saved and restored" in kern
    else:
        assert not any("budget" in n for n in notes)
        assert "0 bytes saved and restored" in kern
        assert re.search(r"callee-saved used: R2\d", kern)


def test_a_predicate_register_argument_is_not_bound():
    """Predicates are outside the convention (target/abi.py), as the checker counts them
    (verify/bindings.py). The convention's binding tied an old-ABI call's 8th argument, a
    predicate, to predicate register 7 (there are P0-P6): the allocation then used more
    predicates than exist and the CLI reported an internal error. It keeps its place in the
    numbering and is left to the allocator."""
    from ptxalloc.pipeline import allocate

    text = (".version 7.0\n.target sm_80\n.address_size 64\n"
            ".func (.reg .u32 %ret) pf (.reg .u32 %a0, .reg .u32 %a1, .reg .u32 %a2, "
            ".reg .u32 %a3, .reg .u32 %a4, .reg .u32 %a5, .reg .u32 %a6, .reg .pred %a)\n"
            "{\n\tselp.u32 %ret, 1, 0, %a;\n\tret;\n}\n"
            ".visible .entry k(.param .u64 k_out, .param .u32 k_x)\n{\n"
            "\t.reg .b32 %r<6>;\n\t.reg .pred %p<3>;\n\t.reg .b64 %rd<3>;\n"
            "\tld.param.u64 %rd1, [k_out];\n\tld.param.u32 %r1, [k_x];\n"
            "\tsetp.eq.u32 %p1, %r1, 3;\n"
            "\tcall (%r2), pf, (%r1, %r1, %r1, %r1, %r1, %r1, %r1, %p1);\n"
            "\tst.global.u32 [%rd1], %r2;\n\tret;\n}\n")
    for k in (15, 32):
        res = allocate(text, registers=k, filename="pred8.ptx")
        assert_verified(res)
        assert all(fr.predicates <= 7 for fr in res.functions)
