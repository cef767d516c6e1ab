"""The ``wgmma.fence`` stretch over the CFG (ir/fence_stretch.py, PTX ISA 9.7.15.5.1): the one
definition the checker's rule (verify/fences.py), the interference graph's fence edges and slot
promotion's busy units (analysis/interference.py ``fenced_after``) share.

Where the text order and the CFG disagree — a loop's back edge into the stretch, a branch over
a fence (tests/data/wgmma/wgmma_fence_back_edge_sm90a.ptx, wgmma_fence_skipped_sm90a.ptx) —
the text-order rule let the allocator put a value into a wgmma's accumulator on that path and
the checker proved it: every one of the eight allocations below (two files, two allocators,
K = 255 and 24) was such an allocation before. On straight-line code and on every other wgmma
file of tests/data the stretch is the text-order one, instruction for instruction."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import DATA, assert_verified
from ptxalloc import ptxas
from ptxalloc.errors import VerificationError
from ptxalloc.ir import isa
from ptxalloc.ir.cfg import CFG
from ptxalloc.ir.fence_stretch import fence_free_ahead
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse, parse_file
from ptxalloc.verify import parse_allocated, verify_module_text, verify_modules

BACK_EDGE = DATA / "wgmma" / "wgmma_fence_back_edge_sm90a.ptx"
SKIPPED = DATA / "wgmma" / "wgmma_fence_skipped_sm90a.ptx"
GUARDED = DATA / "wgmma" / "wgmma_fence_guarded_sm90a.ptx"     # @!%p1 wgmma.fence
# per file: the wgmma (0-based, in the text) whose accumulator the loop-path write must avoid
CFG_ONLY = {BACK_EDGE: 0, SKIPPED: 1, GUARDED: 1}

FENCE, MMA = -1, -2                     # instruction kinds of the generated programs


def _text_order(kinds: list[int], marks: dict[int, int]) -> list[int]:
    """The stretch read backwards in the text: what the rule was before the CFG."""
    ahead, cur = [0] * len(kinds), 0
    for p in range(len(kinds) - 1, -1, -1):
        ahead[p] = cur
        if kinds[p] == FENCE:
            cur = 0
        elif p in marks:
            cur |= marks[p]
    return ahead


def _searched(n, ranges, succs, fences, marks) -> list[int]:
    """Per instruction, the marks of the wgmmas a fence-free path from just after it reaches:
    a search over the instructions, the obvious way."""
    block_of = {p: b for b, (f, c) in enumerate(ranges) for p in range(f, f + c)}
    out = [0] * n
    for p in range(n):
        b = block_of[p]
        todo, seen = [(b, p + 1)], set()
        while todo:
            blk, q = todo.pop()
            first, count = ranges[blk]
            while q < first + count:
                if q in fences:
                    break
                out[p] |= marks.get(q, 0)
                q += 1
            else:
                for s in succs[blk]:
                    if s not in seen:
                        seen.add(s)
                        todo.append((s, ranges[s][0]))
    return out


@st.composite
def _programs(draw, blocks=st.integers(1, 7)):
    nb = draw(blocks)
    sizes = [draw(st.integers(0, 5)) for _ in range(nb)]
    ranges, p = [], 0
    for size in sizes:
        ranges.append((p, size))
        p += size
    kinds = [draw(st.sampled_from([0, 0, FENCE, MMA])) for _ in range(p)]
    succs = [draw(st.lists(st.integers(0, nb - 1), max_size=3, unique=True)) for _ in range(nb)]
    fences = {q for q, k in enumerate(kinds) if k == FENCE}
    marks = {q: 1 << draw(st.integers(0, 5)) for q, k in enumerate(kinds) if k == MMA}
    return p, ranges, succs, fences, marks, kinds


@settings(max_examples=300, deadline=None)
@given(_programs())
def test_the_dataflow_is_the_path_search(program):
    """On any CFG (loops, branches into the stretch, over fences, unreachable blocks) the
    fixpoint gives what a search of the fence-free paths finds."""
    n, ranges, succs, fences, marks, _ = program
    assert fence_free_ahead(n, ranges, succs, fences, marks) == \
        _searched(n, ranges, succs, fences, marks)


@settings(max_examples=200, deadline=None)
@given(_programs(blocks=st.just(1)))
def test_straight_line_code_is_the_text_order(program):
    """One block that falls off its end: the stretch is the text-order one."""
    n, ranges, _, fences, marks, kinds = program
    assert fence_free_ahead(n, ranges, [[]], fences, marks) == _text_order(kinds, marks)


def _wgmma_files():
    return sorted(p for p in DATA.glob("*/*.ptx") if "wgmma.mma_async" in p.read_text())


def _kinds(cfg):
    kinds, marks = [], {}
    for p, ins in enumerate(cfg.instrs):
        if ins.opcode.startswith(isa.WGMMA_FENCE):
            kinds.append(FENCE)
        else:
            kinds.append(0)
            if ins.opcode.startswith("wgmma.mma_async"):
                marks[p] = sum(1 << v for v in isa.async_operands(ins)[0])
    return kinds, marks


@pytest.mark.parametrize("path", _wgmma_files(), ids=lambda p: p.name)
def test_fenced_after_is_the_text_order_except_where_the_cfg_differs(path):
    """On every wgmma file of tests/data the CFG stretch is the text-order one at every
    instruction (so the fence edges are the same as before: the Triton TMA and backward
    attention kernels, the hand-written groups), except on the two files made to tell them
    apart, where it is strictly more."""
    from ptxalloc.analysis.interference import fenced_after
    for fn in parse_file(str(path)).functions:
        cfg = CFG(fn)
        kinds, marks = _kinds(cfg)
        text = _text_order(kinds, marks)
        got = fenced_after(cfg)
        if path in CFG_ONLY:
            assert got != text and all(t & ~g == 0 for t, g in zip(text, got))
        else:
            assert got == text


def _accumulator(line: str) -> list[str]:
    return re.search(r"\{([^}]*)\}", line).group(1).replace(" ", "").split(",")


def _write_line(out: list[str]) -> int:
    """The line of the loop-path write ``add.s32 %r4, %r5, 7`` in an allocated text."""
    return next(i for i, line in enumerate(out) if re.match(r"\s*add\.s32\s.*, 7;", line))


def _register_and_accumulator(path, name: str, wgmma: int):
    """The analysis of ``path``'s kernel, the id of its register ``name`` and the eight
    accumulator registers of its ``wgmma``-th ``wgmma.mma_async`` (0-based, in the text)."""
    from ptxalloc.analysis import analyze_function
    from ptxalloc.target.sm import profile_for
    module = parse_file(str(path))
    fn = module.functions[0]
    a = analyze_function(fn, profile_for(None, module.sm))
    names = fn.regs.names
    mma = [ins for ins in a.cfg.instrs if ins.opcode.startswith("wgmma.mma_async")]
    acc = [v for v in isa.async_operands(mma[wgmma])[0] if names[v].startswith("%f")]
    assert len(acc) == 8
    return a, names.index(name), acc


@pytest.mark.parametrize("path", list(CFG_ONLY), ids=lambda p: p.name)
def test_the_write_on_the_path_interferes_with_the_accumulator(path):
    """``%r4`` is dead where the wgmma writes its accumulator, and comes after the wgmma (the
    loop) or before the fence (the skipped fence) in the text: only the CFG path gives the
    edges between it and the accumulator."""
    a, r4, acc = _register_and_accumulator(path, "%r4", CFG_ONLY[path])
    block = next(b for b in a.cfg.blocks for ins in b.instrs if r4 in ins.defs)
    k = next(k for k, ins in enumerate(block.instrs) if r4 in ins.defs)
    live = a.liveness.live_after(block.id)[k]
    assert not any(live >> v & 1 for v in acc)          # liveness alone gives no edge
    assert all(a.graph.interferes(r4, v) for v in acc)


def _allocate(path, k, allocator):
    module = parse(path.read_text(), str(path))
    res = allocate_module(module, k, allocator=allocator, verify=True)
    assert_verified(res)
    verify_module_text(module, res.ptx, res.functions)
    return module, res


@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
@pytest.mark.parametrize("k", [255, 24])
@pytest.mark.parametrize("path", list(CFG_ONLY), ids=lambda p: p.name)
def test_no_accumulator_register_written_on_the_path_and_a_tampered_one_is_refuted(
        path, k, allocator):
    """The allocation keeps the loop-path write out of the wgmma's accumulator, is proven and
    assembles; the same text with that write (and its store) moved into the accumulator's
    first register is refuted by the fence rule, on the CFG path the text order misses (the
    accumulator is dead there, so nothing else refutes it)."""
    module, res = _allocate(path, k, allocator)
    out = res.ptx.split("\n")
    mmas = [line for line in out if line.strip().startswith("wgmma.mma_async")]
    acc = _accumulator(mmas[CFG_ONLY[path]])
    w = _write_line(out)
    reg = re.match(r"\s*add\.s32\s+(%R\d+),", out[w]).group(1)
    assert reg not in acc
    if ptxas.available():
        got = ptxas.assemble(res.ptx, "sm_90a")
        assert got.ok, got.output
    store = next(i for i in range(w + 1, len(out)) if reg in out[i])
    assert out[store].strip().startswith("st.global.b32")
    bad = out[:]
    for i in (w, store):
        bad[i] = re.sub(re.escape(reg) + r"\b", acc[0], out[i])
    with pytest.raises(VerificationError, match=r"writes %R\d+ after a wgmma\.fence and before "
                                                r"a wgmma\.mma_async .* \(on a path with no "
                                                r"wgmma\.fence between"):
        verify_modules(module, parse_allocated("\n".join(bad)))


def test_a_value_read_on_the_path_interferes_with_the_accumulator():
    """The fence must come between any access of a register and a wgmma accessing it, reads
    included (PTX ISA 9.7.15.5.1): ``%r5`` is read by the ``add`` and the ``setp`` on the path
    that skips the second fence and dies there, before the second wgmma writes its
    accumulator; only the read gives the edges (nothing defines ``%r5`` in the stretch)."""
    a, r5, acc = _register_and_accumulator(SKIPPED, "%r5", 1)
    assert all(a.graph.interferes(r5, v) for v in acc)


@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
@pytest.mark.parametrize("k", [255, 24])
def test_a_read_of_an_accumulator_register_on_the_path_is_refuted(k, allocator):
    """The allocation keeps ``%r5`` out of the second wgmma's accumulator (before reads
    counted, both allocators put it in ``%R10`` at both budgets and the checker proved it);
    the same text with ``%r5``'s register renamed to the accumulator's first register is
    refuted at the first read on the path, not at the write (made before the first fence)."""
    module, res = _allocate(SKIPPED, k, allocator)
    out = res.ptx.split("\n")
    mmas = [line for line in out if line.strip().startswith("wgmma.mma_async")]
    acc = _accumulator(mmas[1])
    load = next(i for i, line in enumerate(out) if "fence_skipped_param_2" in line
                and line.strip().startswith("ld.param"))
    reg = re.match(r"\s*ld\.param\.u32\s+(%R\d+),", out[load]).group(1)
    assert reg not in acc
    readers = [i for i in range(load + 1, len(out)) if re.search(re.escape(reg) + r"\b", out[i])]
    assert [out[i].split()[0] for i in readers] == ["add.s32", "setp.eq.s32"]
    bad = out[:]
    for i in [load] + readers:
        bad[i] = re.sub(re.escape(reg) + r"\b", acc[0], out[i])
    with pytest.raises(VerificationError, match=r"'add\.s32 .*': reads %R\d+ after a "
                                                r"wgmma\.fence and before a wgmma\.mma_async"):
        verify_modules(module, parse_allocated("\n".join(bad)))


@pytest.mark.parametrize("name,why", [
    ("wgmma_a_fragment_sm90a.ptx", r"'wgmma\.mma_async[^']*': reads %R\d+ after a wgmma\.fence "
                                   r"and before a wgmma\.mma_async"),
    ("wgmma_a_fragment_fenced_sm90a.ptx", r"writes %R\d+ while the asynchronous instruction "
                                          r"of line \d+ still uses"),
])
def test_an_accumulator_over_another_wgmmas_a_fragment_is_refuted(name, why):
    """The second wgmma's write-only accumulator may not take the first's A fragment
    registers while the first is in flight: the allocation keeps them apart (proven), and the
    same text with the second accumulator renamed onto the first A fragment is refuted — by
    the fence rule where no fence lies between the two (the first wgmma's A-fragment reads
    count; only its accumulator's are exempt), by the rule on registers in flight where one
    does (only an accumulator a chained wgmma reads may be written there)."""
    path = DATA / "wgmma" / name
    module, res = _allocate(path, 255, "briggs")
    out = res.ptx.split("\n")
    mmas = [i for i, line in enumerate(out) if line.strip().startswith("wgmma.mma_async")]
    frag = re.findall(r"\{([^}]*)\}", out[mmas[0]])[1].replace(" ", "").split(",")
    acc = _accumulator(out[mmas[1]])
    assert not set(frag) & set(acc)
    bad = out[:]
    for i in range(mmas[1], len(bad)):
        for a, f in zip(acc, frag):
            bad[i] = re.sub(re.escape(a) + r"\b", f, bad[i])
    with pytest.raises(VerificationError, match=why):
        verify_modules(module, parse_allocated("\n".join(bad)))


def test_inserted_code_reading_an_a_fragment_after_the_fence_is_refuted():
    """Inserted code may not access a register a wgmma accesses asynchronously between the
    fence and the wgmma, whatever value it copies: a ``//@move`` of the very A-fragment value
    into a fresh register there is refuted at its read (its write goes to a register no
    wgmma accesses)."""
    module, res = _allocate(SKIPPED, 255, "briggs")
    out = res.ptx.split("\n")
    vid = module.functions[0].regs.names.index("%r0")
    mma = next(i for i, line in enumerate(out) if line.strip().startswith("wgmma.mma_async"))
    frag = re.findall(r"\{([^}]*)\}", out[mma])[1].replace(" ", "").split(",")
    assert out[mma - 1].strip().startswith("wgmma.fence")
    decl = next(i for i, line in enumerate(out) if ".reg .b32 %R<" in line)
    n = int(re.search(r"%R<(\d+)>", out[decl]).group(1))
    bad = out[:]
    bad[decl] = out[decl].replace(f"%R<{n}>", f"%R<{n + 1}>")
    bad.insert(mma, f"\tmov.b32\t%R{n}, {frag[0]};\t//@move %r0#{vid}")
    with pytest.raises(VerificationError, match=rf"reads {re.escape(frag[0])} after a "
                                                r"wgmma\.fence and before a wgmma\.mma_async"):
        verify_modules(module, parse_allocated("\n".join(bad)))
