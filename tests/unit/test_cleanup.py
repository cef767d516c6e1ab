"""Copy propagation and dead-code elimination after allocation (issue 13; seed 002
"Post-Allocation Passes"; ``alloc/cleanup.py``, knob ``PostAllocCleanup``): the pass on
hand-written code with inserted copies marked as the allocator marks them, and whole
allocations of hand-written PTX proven by the checker and assembled by ptxas."""

from __future__ import annotations

from conftest import DATA, assert_verified
from ptxalloc import ptxas
from ptxalloc.alloc.cleanup import clean_up
from ptxalloc.ir.cfg import CFG
from ptxalloc.ir.edits import Edit, EditKind
from ptxalloc.ir.instruction import Instruction, Removed
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse
from ptxalloc.verify import parse_allocated, verify_modules

HDR = ".version 8.0\n.target sm_80\n.address_size 64\n"


def _kernel(body: str) -> str:
    return (f"{HDR}.visible .entry k(.param .u64 k_p)\n{{\n\t.reg .pred %p<4>;\n"
            f"\t.reg .b32 %r<9>;\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [k_p];\n"
            f"\tld.global.u32 %r1, [%rd1];\n{body}\n\tret;\n}}\n")


def _clean(body: str, moves: int = 1, in_place: bool = False):
    """The pass on ``body`` with every register in a register of its own and the first
    ``moves`` ``mov`` instructions marked as inserted copies (``in_place``: the other copies
    taken for original copies within one register, to be written ``//@removed``); returns the
    body after (as text lines, removed ones as ``//@removed``) and the figures."""
    fn = parse(_kernel(body), "k.ptx").functions[0]
    regs = fn.regs
    kept = set()
    for s in fn.body:
        if type(s) is Instruction and s.is_copy:
            if moves:
                s.origin = Edit(EditKind.MOVE, s.uses[0])
                moves -= 1
            elif in_place:
                kept.add(id(s))
    mask_of = {v: (1 if c.name == "PRED" else 3) << (4 * v) for v, c in enumerate(regs.classes)}
    _, done = clean_up(fn, CFG(fn), mask_of, lambda v: (regs.classes[v], regs.vec[v]), kept)
    lines = []
    for s in fn.body:
        if type(s) is Instruction:
            lines.append(s.render(regs.names.__getitem__))
        elif type(s) is Removed:
            lines.append("//@removed " + s.instr.render(regs.names.__getitem__))
    return lines, done


def test_a_copy_propagated_and_removed():
    lines, done = _clean("\tmov.b32 %r2, %r1;\n\tadd.s32 %r3, %r2, 1;\n"
                         "\tst.global.u32 [%rd1], %r3;")
    assert "add.s32\t%r3, %r1, 1;" in lines
    assert not any(line.startswith("mov.b32") for line in lines), lines
    assert (done.uses_propagated, done.moves_removed) == (1, 1)


def test_a_copy_back_goes_too():
    """``mov D, S; mov S, D``: the copy back reads S itself, copies within one register and
    goes; the first copy is then dead."""
    lines, done = _clean("\tmov.b32 %r2, %r1;\n\tmov.b32 %r1, %r2;\n"
                         "\tst.global.u32 [%rd1], %r1;\n\tst.global.u32 [%rd1+4], %r2;",
                         moves=2)
    assert not any(line.startswith("mov.b32") for line in lines), lines
    assert "st.global.u32\t[%rd1+4], %r1;" in lines
    assert done.moves_removed == 2


def test_an_original_copy_written_removed_is_not_rewritten():
    """An original copy within one register is written ``//@removed`` after the pass: it keeps
    reading the inserted copy's destination (rewritten, it would become a real copy), so the
    inserted copy stays."""
    lines, done = _clean("\tmov.b32 %r2, %r1;\n\tmov.b32 %r3, %r2;\n"
                         "\tst.global.u32 [%rd1], %r3;", in_place=True)
    assert lines[2:4] == ["mov.b32\t%r2, %r1;", "mov.b32\t%r3, %r2;"], lines
    assert not done


def test_a_copy_whose_source_is_redefined_is_not_propagated():
    lines, done = _clean("\tmov.b32 %r2, %r1;\n\tadd.s32 %r1, %r1, 1;\n"
                         "\tst.global.u32 [%rd1], %r2;\n\tst.global.u32 [%rd1+4], %r1;")
    assert "mov.b32\t%r2, %r1;" in lines and "st.global.u32\t[%rd1], %r2;" in lines
    assert not done


def test_a_copy_is_not_propagated_past_a_call():
    _, done = _clean("\tmov.b32 %r2, %r1;\n\tcall.uni f, ();\n\tst.global.u32 [%rd1], %r2;")
    assert not done


def test_dead_definitions():
    """A dead pure definition goes (``//@removed``); a dead volatile load, a dead plain load
    and a dead guarded definition stay; a dead inserted copy goes."""
    lines, done = _clean("\tadd.s32 %r2, %r1, 7;\n\tld.volatile.global.u32 %r3, [%rd1];\n"
                         "\tld.global.u32 %r4, [%rd1+4];\n\tsetp.gt.s32 %p1, %r1, 0;\n"
                         "\t@%p1 add.s32 %r5, %r1, 3;\n\tmov.b32 %r6, %r1;\n"
                         "\tst.global.u32 [%rd1], %r1;")
    assert "//@removed add.s32\t%r2, %r1, 7;" in lines
    assert "ld.volatile.global.u32\t%r3, [%rd1];" in lines
    assert "ld.global.u32\t%r4, [%rd1+4];" in lines
    assert "@%p1 add.s32\t%r5, %r1, 3;" in lines
    # the setp is read by the guarded add only, which stays: so does the setp
    assert "setp.gt.s32\t%p1, %r1, 0;" in lines
    assert not any(line.startswith("mov.b32") for line in lines), lines
    assert (done.original_removed, done.moves_removed) == (1, 1)


def test_dead_chains_go_in_rounds_across_blocks():
    """A chain of dead definitions spread over blocks goes a link a round, down to a block
    left without instructions; the CFG returned is the one of the body after. A definition
    read by itself around a loop only is not dead (dead code, not faint code)."""
    body = ("\tadd.s32 %r2, %r1, 7;\n\tsetp.gt.s32 %p1, %r1, 0;\n\t@%p1 bra L1;\n"
            "\tadd.s32 %r5, %r1, 1;\nL1:\n\tadd.s32 %r3, %r2, 1;\nL2:\n"
            "\tadd.s32 %r4, %r3, 1;\n\tadd.s32 %r6, %r6, 1;\n\tsetp.lt.s32 %p2, %r1, 9;\n"
            "\t@%p2 bra L2;\n\tst.global.u32 [%rd1], %r1;")
    fn = parse(_kernel(body), "k.ptx").functions[0]
    regs = fn.regs
    mask_of = {v: (1 if c.name == "PRED" else 3) << (4 * v) for v, c in enumerate(regs.classes)}
    cfg, done = clean_up(fn, CFG(fn), mask_of, lambda v: (regs.classes[v], regs.vec[v]), set())
    removed = [s.instr.render(regs.names.__getitem__) for s in fn.body if type(s) is Removed]
    assert removed == ["add.s32\t%r2, %r1, 7;", "add.s32\t%r5, %r1, 1;",
                       "add.s32\t%r3, %r2, 1;", "add.s32\t%r4, %r3, 1;"]
    assert done.original_removed == 4
    kept = [s.render(regs.names.__getitem__) for s in fn.instructions()]
    assert "add.s32\t%r6, %r6, 1;" in kept
    fresh = CFG(fn)
    assert [b.instrs for b in cfg.blocks] == [b.instrs for b in fresh.blocks]
    assert [b.succs for b in cfg.blocks] == [b.succs for b in fresh.blocks]


def test_a_guarded_ret_reads_its_guard():
    """``@%p ret`` reads %p: the setp before it stays (found by tests/property/test_fuzz_alloc:
    the end of the function was taken to read only what is live on exit)."""
    lines, done = _clean("\tsetp.gt.s32 %p1, %r1, 0;\n\t@%p1 ret;\n"
                         "\tst.global.u32 [%rd1], %r1;", moves=0)
    assert "setp.gt.s32\t%p1, %r1, 0;" in lines and not done


#: the fuzz example: recomputed setps before guarded adds and a guarded ret, at K = 4
FUZZ_GUARDED_RET = (HDR + ".visible .entry fz_k(.param .u64 fz_k_in, .param .u64 fz_k_out)\n{\n"
                    "\t.reg .pred %p<2>;\n\t.reg .b32 %r<3>;\n\t.reg .f32 %f<1>;\n"
                    "\t.reg .b64 %ra<2>;\n\tld.param.u64 %ra0, [fz_k_in];\n"
                    "\tld.param.u64 %ra1, [fz_k_out];\n\tcvta.to.global.u64 %ra0, %ra0;\n"
                    "\tcvta.to.global.u64 %ra1, %ra1;\n\tsetp.ne.s32 %p0, 0, 0;\n"
                    "\t@%p0 add.s32 %r0, %r0, %r0;\n\tadd.s32 %r0, %r0, %r0;\n"
                    "\tadd.f32 %f0, %f0, %f0;\n\t@%p0 add.s32 %r0, %r0, %r0;\n"
                    "\t@%p0 ret;\n\tst.global.u32 [%ra1+0], %r0;\n"
                    "\tst.global.u32 [%ra1+4], %r1;\n\tret;\n}\n")


def test_the_fuzz_example_with_a_guarded_ret_is_proven():
    res = allocate(FUZZ_GUARDED_RET, registers=4)
    assert res.functions[0].extra["cleanup"]["original_removed"] >= 2    # the cvta, the add.f32
    _proven_from_the_original(FUZZ_GUARDED_RET, res)


DEAD_PTX = _kernel("\tadd.s32 %r2, %r1, 7;\n\tmul.lo.s32 %r7, %r2, %r2;\n"
                   "\tld.volatile.global.u32 %r3, [%rd1];\n\tsetp.gt.s32 %p1, %r1, 0;\n"
                   "\t@%p1 add.s32 %r5, %r1, 3;\n\tst.global.u32 [%rd1], %r1;")


def _proven_from_the_original(text: str, res) -> None:
    """What ``ptxalloc verify ORIGINAL ALLOCATED`` does, then ptxas."""
    assert_verified(res)
    verify_modules(parse(text, "orig.ptx"), parse_allocated(res.ptx, "alloc.ptx"))
    if ptxas.available():
        got = ptxas.assemble(res.ptx, "sm_80")
        assert got.ok, got.output


def test_an_allocation_with_dead_code_removed_is_proven():
    """A chain of two dead pure definitions both go (the iteration), the rest stays."""
    res = allocate(DEAD_PTX, registers=24)
    (fr,) = res.functions
    assert "//@removed add.s32" in fr.text and "//@removed mul.lo.s32" in fr.text
    assert "\tld.volatile.global.u32" in fr.text and "\n\t@%P" in fr.text
    assert fr.extra["cleanup"]["original_removed"] == 2
    _proven_from_the_original(DEAD_PTX, res)
    (off,) = allocate(DEAD_PTX, registers=24, knobs={"PostAllocCleanup": 0}).functions
    assert "//@removed" not in off.text and "cleanup" not in off.extra


def test_inserted_copies_propagated_and_removed_in_an_allocation():
    """give_way at K = 3 moves values between registers; with the pass fewer copies are
    emitted, spill bytes and registers are unchanged, and the allocation is proven from the
    original and assembled."""
    text = (DATA / "hand" / "give_way.ptx").read_text()
    on = allocate(text, registers=3)
    off = allocate(text, registers=3, knobs={"PostAllocCleanup": 0})
    (a,), (b,) = on.functions, off.functions
    assert a.extra["cleanup"]["moves_removed"] >= 1
    assert a.text.count("//@move") == b.text.count("//@move") - a.extra["cleanup"]["moves_removed"]
    assert (a.registers, a.spill_stores_bytes, a.spill_loads_bytes) == \
        (b.registers, b.spill_stores_bytes, b.spill_loads_bytes)
    _proven_from_the_original(text, on)


def test_a_function_with_wgmma_is_left_alone():
    text = (DATA / "triton" / "attn_fwd_tma_64x64_d64.ptx").read_text()
    fn = parse(text, "attn.ptx").functions[0]
    from ptxalloc.alloc.cleanup import untouchable
    assert "asynchronous" in untouchable(fn)
