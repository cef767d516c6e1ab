"""Registers of asynchronous wgmma instructions in flight (analysis/in_flight.py,
passes/asynchrony.py) and the serialization of wgmma groups that do not fit the budget
(passes/serialize_wgmma.py), on Triton
3.9's fused-attention kernels (tests/data/triton, generate.py there) and a hand-written sm_90a
kernel (tests/data/wgmma).

ptxas (CUDA 13.0, ``ptxas -arch sm_90a -v``) on the Triton files: attn_fwd_tma_64x64_d64 106
registers, no spill; attn_fwd_tma_128x128_d128 188 registers, no spill; attn_bwd_d64 255
registers, 952 bytes spill stores, "wgmma.mma_async instructions are serialized". The hand
kernel: 58 registers.
"""

from __future__ import annotations

import json

import pytest

from conftest import DATA, assert_verified
from ptxalloc import ptxas
from ptxalloc.errors import AllocationError, VerificationError
from ptxalloc.alloc.driver import Options
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse
from ptxalloc.verify import parse_allocated, verify_module_text, verify_modules

TRITON = DATA / "triton"
HAND = DATA / "wgmma" / "wgmma_serialize_sm90a.ptx"
SERIALIZED = "wgmma.mma_async instructions are serialized"


def _allocate(path, k, allocator="briggs"):
    module = parse(path.read_text(), str(path))
    res = allocate_module(module, k, allocator=allocator, verify=True)
    assert_verified(res)
    # the checker proves the output against the original text again, from the text alone
    verify_module_text(module, res.ptx, res.functions)
    return module, res


def _assembles(res):
    if not ptxas.available():
        pytest.skip("ptxas is absent")
    out = ptxas.assemble(res.ptx, "sm_90a")
    assert out.ok, out.output


CASES = [("attn_fwd_tma_64x64_d64", 255), ("attn_fwd_tma_64x64_d64", 128),
         ("attn_fwd_tma_128x128_d128", 255), ("attn_bwd_d64", 255)]


@pytest.mark.ptxas
@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
@pytest.mark.parametrize("stem,k", CASES, ids=[f"{s}-K{k}" for s, k in CASES])
def test_triton_attention_allocates_proven_and_assembles(stem, k, allocator):
    """Before: the 64x64 forward at 255 and 128 reused an in-flight A-fragment register
    ('cvt.rn.f16x2.f32' over a wgmma's %r103, caught by the checker, exit 1); the backward
    was refused ("'wgmma.wait_group.sync.aligned 0;' needs 368 registers at once")."""
    _, res = _allocate(TRITON / f"{stem}.ptx", k, allocator)
    assert all(0 < f.registers <= k for f in res.functions)
    _assembles(res)


SMALL = [("attn_fwd_tma_64x64_d64", 64), ("attn_fwd_tma_128x128_d128", 128),
         ("attn_bwd_d64", 128), ("attn_bwd_d64", 64)]


@pytest.mark.ptxas
@pytest.mark.parametrize("stem,k", SMALL, ids=[f"{s}-K{k}" for s, k in SMALL])
def test_triton_attention_spills_accumulators_around_their_windows(stem, k):
    """Before: refused ("cannot allocate 'mov.b32 %r135, 0f00000000;' within 64 registers"
    for the 64x64 forward; an xfail at K = 128 for the other two; the backward at K = 64
    "'wgmma.mma_async ...' needs 78 registers at once"): the registers of a wgmma
    group were never spilled, even where no group had them in flight. Now they spill around
    their windows (spill/windows.py): reloaded before the group's fence, stored after its
    wait; the checker proves it from the original and ptxas assembles it."""
    _, res = _allocate(TRITON / f"{stem}.ptx", k)
    (fr,) = res.functions
    assert 0 < fr.registers <= k
    assert _fence_to_wait_is_clean(fr.text)
    _assembles(res)


def test_triton_attention_at_k64_is_serialized():
    _, res = _allocate(TRITON / "attn_fwd_tma_64x64_d64.ptx", 64, "fatpoint")
    (fr,) = res.functions
    assert any(SERIALIZED in n for n in fr.notes), fr.notes
    assert fr.text.count("//@serialize") == 2


def test_attention_backward_at_k64_is_serialized_within_its_groups():
    """attn_bwd's groups each hold two 32-register accumulators: at K = 64 one group alone
    does not fit even with a wait after each commit, so each wgmma.mma_async followed by
    another in its group becomes a group of its own, as ptxas serializes (C7511)."""
    _, res = _allocate(TRITON / "attn_bwd_d64.ptx", 64)
    (fr,) = res.functions
    assert any("serialized within their groups" in n for n in fr.notes), fr.notes
    assert fr.text.count("wgmma.fence.sync.aligned;\t//@serialize") == 37


def test_one_wgmma_beyond_the_budget_is_refused_naming_its_registers():
    module = parse(HAND.read_text(), "wgmma_serialize_sm90a.ptx")
    with pytest.raises(AllocationError) as e:
        allocate_module(module, 16)
    assert str(e.value) == (
        "wgmma_serialize_sm90a.ptx:49: function 'four_groups': "
        "'wgmma.commit_group.sync.aligned;' needs 20 registers at once even with every "
        "wgmma.mma_async waited for at once: 20 registers of its wgmma.mma_async in flight "
        "(accumulators and A fragments, which can be neither spilled nor shared before the "
        "wait) and its operands, more than the budget of 16 allows")


TWO = DATA / "wgmma" / "wgmma_two_accumulators_sm90a.ptx"


def _fence_to_wait_is_clean(text: str) -> bool:
    """No spill code of a wgmma register between a fence and the wait that closes the
    group: the windows hold their registers (other values' spill code may be there)."""
    inside = False
    regs: set[str] = set()
    for line in text.splitlines():
        if "wgmma.fence" in line:
            inside = True
        elif "wgmma.mma_async" in line and inside:
            regs.update(line[line.index("{") + 1:line.index("}")].replace(" ", "").split(","))
        elif "wgmma.wait_group" in line:
            inside = False
            regs = set()
        elif inside and ("//@spill" in line or "//@reload" in line or "//@move" in line):
            dest = line.split("\t")[2].split(",")[0].strip("[ ")
            if dest in regs:
                return False
    return True


@pytest.mark.ptxas
@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
@pytest.mark.parametrize("k", [36, 32])
def test_accumulator_spilled_around_the_other_group(k, allocator):
    """Two 16-register accumulators, each its own group: under 36 registers one must leave
    its registers while the other group runs. Refused before (every in-flight register
    unspillable) and with the knob off; now each accumulator is reloaded before its fence and
    stored after its wait, proven and assembled."""
    module = parse(TWO.read_text(), str(TWO))
    with pytest.raises(AllocationError):
        allocate_module(module, k, options=Options(allocator, knobs={"SerializeWgmma": 0}))
    _, res = _allocate(TWO, k, allocator)
    (fr,) = res.functions
    assert fr.registers <= k
    assert fr.text.count("//@serialize") == 1      # the second commit has its wait already
    assert "//@spill %f" in fr.text and "//@reload %f" in fr.text
    assert _fence_to_wait_is_clean(fr.text)
    _assembles(res)


def test_checker_rejects_a_serialize_before_the_commit():
    """A wait before the commit retires nothing real (the wgmma just issued is in no group
    yet): the checker refuses it wherever it is not right after a commit_group."""
    module, res = _allocate(TWO, 32)
    lines = res.ptx.split("\n")
    i = next(k for k, line in enumerate(lines) if line.endswith("//@serialize"))
    assert "wgmma.commit_group" in lines[i - 1]
    lines[i - 1], lines[i] = lines[i], lines[i - 1]
    verify_modules(module, parse_allocated(res.ptx))        # as emitted: proven
    with pytest.raises(VerificationError, match="must follow an unguarded"):
        verify_modules(module, parse_allocated("\n".join(lines)))


def test_checker_rejects_a_changed_instruction_in_a_window():
    module, res = _allocate(TWO, 32)
    bad = res.ptx.replace("m64n32k16.f32.f16.f16", "m64n32k16.f32.bf16.bf16", 1)
    assert bad != res.ptx
    with pytest.raises(VerificationError, match="bf16"):
        verify_modules(module, parse_allocated(bad))


@pytest.mark.ptxas
@pytest.mark.parametrize("k", [32, 28, 24])
def test_groups_in_flight_beyond_the_budget_are_serialized(k):
    """Four groups retired by one wait keep 16 accumulator + 16 fragment registers in flight.
    Before: K = 32 got stuck, K = 28 and 24 were refused at the wait ("needs 32 registers
    at once"). Now a wait follows each commit, with a warning, and the allocation is proven."""
    _, res = _allocate(HAND, k)
    (fr,) = res.functions
    assert any(SERIALIZED in n for n in fr.notes), fr.notes
    assert fr.text.count("//@serialize") == 3
    assert fr.registers <= k
    _assembles(res)


def test_groups_that_fit_are_not_serialized():
    _, res = _allocate(HAND, 40)
    (fr,) = res.functions
    assert "//@serialize" not in fr.text
    assert not any(SERIALIZED in n for n in fr.notes)


def test_one_group_beyond_the_budget_is_refused_naming_the_instruction():
    module = parse(HAND.read_text(), str(HAND))
    with pytest.raises(AllocationError) as e:
        allocate_module(module, 16)
    assert "wgmma_serialize_sm90a.ptx:" in str(e.value)
    assert "needs" in str(e.value) and "in flight" in str(e.value)


def test_checker_rejects_a_serialize_that_is_not_a_plain_wait():
    module, res = _allocate(HAND, 28)
    bad = res.ptx.replace("wgmma.wait_group.sync.aligned\t0;\t//@serialize",
                          "wgmma.wait_group.sync.aligned\t1;\t//@serialize", 1)
    assert bad != res.ptx
    with pytest.raises(VerificationError, match="serialize"):
        verify_module_text(module, bad, res.functions)


def test_serialization_warning_reaches_stderr_and_the_report_without_verbose(tmp_path, capsys):
    """The serialization changes the program's asynchrony: like ptxas's warning it is printed
    on stderr by a plain ``allocate`` (no ``-v``) and listed in the JSON report."""
    from ptxalloc.cli import main

    out, report = tmp_path / "o.ptx", tmp_path / "r.json"
    rc = main(["allocate", str(HAND), "--registers", "28", "-o", str(out),
               "--json", str(report)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "function 'four_groups': warning: wgmma.mma_async instructions are serialized" in err
    (row,) = json.loads(report.read_text())["functions"]
    assert any(w.startswith("wgmma.mma_async instructions are serialized") for w in row["warnings"])


@pytest.mark.ptxas
@pytest.mark.parametrize("k", [255, 128, 40, 32])
@pytest.mark.parametrize("allocator", ["briggs", "fatpoint", "linear"])
def test_accumulator_with_a_b32_member_among_f32_ones(k, allocator):
    """Issue 11 reported a wgmma accumulator holding a .b32 register among .f32 ones failing its
    proof at K = 128 and 255 (and written wrong under --no-verify). Not reproduced on this
    hand-written kernel before or after the in-flight dataflow; it guards the shape: every
    budget, every allocator, proven and assembled, the mixed member a plain 32-bit register."""
    _, res = _allocate(DATA / "wgmma" / "wgmma_mixed_accumulator_sm90a.ptx", k, allocator)
    (fr,) = res.functions
    assert 0 < fr.registers <= k
    _assembles(res)


ONE_GROUP = DATA / "wgmma" / "wgmma_one_group_two_accumulators_sm90a.ptx"


@pytest.mark.ptxas
@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
@pytest.mark.parametrize("k", [36, 32])
def test_one_group_split_into_one_wgmma_per_group(k, allocator):
    """One group, two wgmma.mma_async on two 16-register accumulators: 40 registers in flight
    in one group. Refused with the knob off; now the first wgmma is committed, waited for and
    fenced off from the second (three //@serialize), each accumulator spills around its own
    window, proven and assembled."""
    module = parse(ONE_GROUP.read_text(), str(ONE_GROUP))
    with pytest.raises(AllocationError):
        allocate_module(module, k, options=Options(allocator, knobs={"SerializeWgmma": 0}))
    _, res = _allocate(ONE_GROUP, k, allocator)
    (fr,) = res.functions
    assert fr.registers <= k
    assert any("serialized within their groups" in n for n in fr.notes), fr.notes
    lines = [line.strip() for line in fr.text.splitlines()]
    serialized = [line for line in lines if line.endswith("//@serialize")]
    assert serialized == ["wgmma.commit_group.sync.aligned;\t//@serialize",
                          "wgmma.wait_group.sync.aligned\t0;\t//@serialize",
                          "wgmma.fence.sync.aligned;\t//@serialize"]
    assert _fence_to_wait_is_clean(fr.text)
    _assembles(res)


def _swap_with_previous(text: str, marker: str) -> str:
    lines = text.split("\n")
    i = next(k for k, line in enumerate(lines) if marker in line)
    lines[i - 1], lines[i] = lines[i], lines[i - 1]
    return "\n".join(lines)


@pytest.mark.parametrize("marker,message", [
    ("wgmma.commit_group.sync.aligned;\t//@serialize", "serialize commit_group must follow"),
    ("wgmma.fence.sync.aligned;\t//@serialize", "access must come before the fence"),
])
def test_checker_rejects_serialize_instructions_out_of_place(marker, message):
    """An inserted commit must follow a wgmma.mma_async, an inserted fence an inserted wait;
    moved one line up (before the wgmma, before the reload or wait) they are refused."""
    module, res = _allocate(ONE_GROUP, 36)
    verify_modules(module, parse_allocated(res.ptx))
    bad = _swap_with_previous(res.ptx, marker)
    with pytest.raises(VerificationError, match=message):
        verify_modules(module, parse_allocated(bad))


def test_checker_rejects_an_inserted_fence_before_the_inserted_wait():
    module, res = _allocate(ONE_GROUP, 36)
    lines = res.ptx.split("\n")
    fence = next(k for k, line in enumerate(lines)
                 if line.strip() == "wgmma.fence.sync.aligned;\t//@serialize")
    wait = next(k for k, line in enumerate(lines)
                if line.strip() == "wgmma.wait_group.sync.aligned\t0;\t//@serialize")
    moved = lines[:wait] + [lines[fence]] + lines[wait:fence] + lines[fence + 1:]
    with pytest.raises(VerificationError, match="serialize fence must follow an unguarded "
                                                "'wgmma.wait_group.sync.aligned' //@serialize"):
        verify_modules(module, parse_allocated("\n".join(moved)))


def test_checker_rejects_writes_after_a_fence_across_a_label():
    """The fence rule follows the CFG, not the block: a label between the fence and the
    wgmma.mma_async (the code before it falls through) does not end the stretch. Found in
    review: the serialize fence moved up to just after its wait, then a label, then the reloads
    of the second wgmma's accumulator and A fragment, was proven."""
    module, res = _allocate(ONE_GROUP, 36)
    out = res.ptx.split("\n")
    wait = out.index("\twgmma.wait_group.sync.aligned\t0;\t//@serialize")
    fence = out.index("\twgmma.fence.sync.aligned;\t//@serialize")
    assert any("//@reload" in line for line in out[wait + 1:fence])
    bad = out[:wait + 1] + [out[fence], "$L_x:"] + out[wait + 1:fence] + out[fence + 1:]
    lines = ONE_GROUP.read_text().split("\n")
    second = [k for k, line in enumerate(lines) if line.strip().startswith("wgmma.mma_async")][1]
    labelled = parse("\n".join(lines[:second] + ["$L_x:"] + lines[second:]), str(ONE_GROUP))
    with pytest.raises(VerificationError, match="access must come before the fence"):
        verify_modules(labelled, parse_allocated("\n".join(bad)))


@pytest.mark.parametrize("allocator", ["briggs", "fatpoint"])
@pytest.mark.parametrize("k", [255, 24, 16])
def test_no_value_written_between_a_fence_and_its_wgmma_across_a_label(allocator, k):
    """A value defined after a ``wgmma.fence`` and before a label that precedes the
    ``wgmma.mma_async`` interferes with the wgmma's accumulator, though it is dead by the
    wgmma and the wgmma only writes the accumulator: the fence's stretch follows the text
    (analysis/interference.py ``fenced_after``, the checker's rule). Before, the edges were
    taken within the wgmma's block only, and every one of these allocations was refused by
    the checker ("the allocation failed its proof")."""
    path = DATA / "wgmma" / "wgmma_fence_label_sm90a.ptx"
    module, res = _allocate(path, k, allocator)
    out = res.ptx.split("\n")
    fence = next(i for i, line in enumerate(out) if line.strip().startswith("wgmma.fence"))
    mma = next(i for i, line in enumerate(out) if line.strip().startswith("wgmma.mma_async"))
    assert any(line.strip().startswith("$L__x") for line in out[fence:mma])
    if ptxas.available():
        got = ptxas.assemble(res.ptx, "sm_90a")
        assert got.ok, got.output
