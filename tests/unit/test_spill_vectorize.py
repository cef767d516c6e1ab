"""Spill accesses merged into ``.v2``/``.v4`` accesses (issue 13, knob ``SpillVectorize``;
spill/slots.py places the slots, spill/vectorize.py merges, the checker proves each member).

On hand-written PTX: stores after an ``ld.global.v4`` merged into one ``st.local.v4.b32``,
reloads before an ``add`` into ``ld.local.v2.b32``, the saves around a call and the
callee-saved prologue and epilogue merged; the rules of the merge on runs built by hand
(unaligned slots, an instruction between, one register reloaded twice); shared-memory
spills merged alike; the frame and the spill bytes the same with and without; and a merged
line tampered with refuted.
"""

from __future__ import annotations

import re

import pytest

from conftest import DATA, assert_verified
from ptxalloc import ptxas
from ptxalloc.errors import VerificationError
from ptxalloc.ir import build
from ptxalloc.ir.edits import Edit, EditKind, callee_slot, save_slot, value_slot
from ptxalloc.ir.operands import Mem, Reg, Sym
from ptxalloc.ir.registers import RegClass
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse
from ptxalloc.spill.vectorize import merge_spill_accesses
from ptxalloc.verify import parse_allocated, verify_modules

#: the hand case spills at K = 8 in the order written (the schedule and recomputation, on by
#: default, take most of its spills away)
WRITTEN = {"schedule": 0, "recompute": 0}
OFF = {"SpillVectorize": 0}
HAND = DATA / "hand" / "spill_vectorize.ptx"
MERGED_LINE = re.compile(r"^\s*(st|ld)\.local\.v([24])\.b(32|64)\s.*//@(\w+) (.*)$", re.M)
SCALAR_LINE = re.compile(r"^\s*(st|ld)\.local\.b(32|64)\s.*//@(spill|reload|save|restore|"
                         r"csave|crestore) ", re.M)


def _spill_instructions(text: str) -> int:
    return len(MERGED_LINE.findall(text)) + len(SCALAR_LINE.findall(text))


def _assembles(res, arch="sm_80"):
    if ptxas.available():
        got = ptxas.assemble(res.ptx, arch)
        assert got.ok, got.output


def test_stores_merge_into_v4_and_reloads_into_v2():
    text = HAND.read_text()
    on = allocate(text, registers=8, knobs=WRITTEN)
    off = allocate(text, registers=8, knobs={**WRITTEN, **OFF})
    f_on, f_off = on.functions[0], off.functions[0]
    merged = MERGED_LINE.findall(f_on.text)
    assert ("st", "4", "32", "spill", "%r1#2 %r2#3 %r3#4 %r4#5") in merged, f_on.text
    assert any(m[:4] == ("ld", "2", "32", "reload") for m in merged), f_on.text
    assert not MERGED_LINE.findall(f_off.text)
    # bytes are bytes: the same spill bytes and frame, fewer instructions
    assert (f_on.spill_stores_bytes, f_on.spill_loads_bytes, f_on.stack_frame_bytes) == \
        (f_off.spill_stores_bytes, f_off.spill_loads_bytes, f_off.stack_frame_bytes)
    saved = f_on.extra["spill_vectorize"]["instructions_saved"]
    assert _spill_instructions(f_on.text) == _spill_instructions(f_off.text) - saved
    assert saved >= 5
    assert_verified(on)
    _assembles(on)


def test_saves_around_calls_and_callee_saves_merge():
    """calls_sm80 at K = 32: the kernel's two 64-bit values saved before each call are one
    ``st.local.v2.b64`` (``//@save``) and restored by one ``ld.local.v2.b64``; fib's
    callee-saved R24 and R25 are stored by one ``//@csave R24 R25`` and reloaded by one
    ``//@crestore R24 R25``."""
    res = allocate((DATA / "calls_sm80.ptx").read_text(), registers=32)
    text = res.ptx
    assert re.search(r"st\.local\.v2\.b64\s.*//@save \S+#\d+ \S+#\d+$", text, re.M), text
    assert re.search(r"ld\.local\.v2\.b64\s.*//@restore \S+#\d+ \S+#\d+$", text, re.M)
    assert re.search(r"st\.local\.v2\.b32\s+\[__ptxalloc_spill\+\d+\], \{%R24, %R25\};"
                     r"\s*//@csave R24 R25$", text, re.M), text
    assert re.search(r"ld\.local\.v2\.b32\s+\{%R24, %R25\}, \[__ptxalloc_spill\+\d+\];"
                     r"\s*//@crestore R24 R25$", text, re.M)
    assert_verified(res)
    _assembles(res)


def test_shared_spills_merge_from_the_frame_base():
    """``--spill-to shared``: slots are ``[base+off]`` in this thread's frame, which starts
    16-byte aligned (the frame is a multiple of 16, the area ``.align 16``), so the same
    pieces merge as ``st.shared.v4.b32``/``ld.shared.v2.b32`` from the base register; a merged
    access from another register than the base is refuted."""
    text = HAND.read_text()
    res = allocate(text, registers=8, knobs=WRITTEN, spill_to="shared", block_size=128)
    m = re.search(r"st\.shared\.v4\.b32\t\[(%R\d+)\+\d+\], \{[^}]*\};\t//@spill( \S+){4}$",
                  res.ptx, re.M)
    assert m and re.search(r"ld\.shared\.v2\.b32\t.*//@reload \S+ \S+$", res.ptx, re.M)
    assert_verified(res)
    _assembles(res)
    other = "%R7" if m.group(1) != "%R7" else "%R6"
    bad = res.ptx[:m.start()] + m.group(0).replace(m.group(1), other, 1) + res.ptx[m.end():]
    assert "the shared spill address" in _refuted(text, bad)


@pytest.mark.parametrize("name,k,knobs", [("hand/spill_vectorize.ptx", 6, WRITTEN),
                                          ("pressure_sm80.ptx", 24, {}),
                                          ("calls_sm80.ptx", 32, {}),
                                          ("triton/sm80_attn_fwd.ptx", 32, {})])
def test_frame_and_spill_bytes_unchanged(name, k, knobs):
    """Slots side by side never grow the frame (the layout falls back where they would), and
    the merge moves the same bytes."""
    text = (DATA / name).read_text()
    on = allocate(text, registers=k, knobs=knobs)
    off = allocate(text, registers=k, knobs={**knobs, **OFF}, verify=False)
    for a, b in zip(on.functions, off.functions):
        assert (a.spill_stores_bytes, a.spill_loads_bytes, a.stack_frame_bytes) == \
            (b.spill_stores_bytes, b.spill_loads_bytes, b.stack_frame_bytes), a.name
        assert _spill_instructions(a.text) <= _spill_instructions(b.text)
    assert_verified(on)


# -- the merge's rules, on runs built by hand --------------------------------------------------

def _function(n32: int = 6, n64: int = 2):
    fn = parse(".version 7.0\n.target sm_80\n.address_size 64\n\n"
               ".visible .entry k()\n{\n\tret;\n}\n").functions[0]
    r32 = [fn.regs.add(f"%a{i}", ".b32", RegClass.GPR32) for i in range(n32)]
    r64 = [fn.regs.add(f"%d{i}", ".b64", RegClass.GPR64) for i in range(n64)]
    return fn, r32, r64


def _access(fn, v: int, off: int, kind: EditKind = EditKind.SPILL, slot=None):
    store = kind in (EditKind.SPILL, EditKind.SAVE, EditKind.CSAVE)
    ins = (build.spill_store if store else build.spill_reload)(fn.regs, v, "__ptxalloc_spill")
    ins.ops[0 if store else 1] = Mem(Sym("__ptxalloc_spill"), f"+{off}")
    ins.origin = Edit(kind, v, slot or value_slot(v))
    ins.comment = f"//@{kind.value} {fn.regs.names[v]}#{v}"
    return ins


def _merge(fn, body, names=None):
    names = names or (lambda v: f"%R{v}")
    out, saved = merge_spill_accesses(body, fn.regs, names)
    return [s.render(names) + ("\t" + s.comment if s.comment else "") for s in out], saved


def test_four_adjacent_aligned_stores_become_one_v4():
    fn, r, _ = _function()
    body = [_access(fn, r[k], off) for k, off in enumerate((20, 16, 28, 24))]
    lines, saved = _merge(fn, body)
    assert saved == 3
    assert lines == [f"st.local.v4.b32\t[__ptxalloc_spill+16], {{%R{r[1]}, %R{r[0]}, %R{r[3]}, "
                     f"%R{r[2]}}};\t//@spill %a1#{r[1]} %a0#{r[0]} %a3#{r[3]} %a2#{r[2]}"]


def test_unaligned_slots_are_not_merged():
    """Slots at 4 and 8 are adjacent but no 8-byte piece holds both; 4 x 4 bytes from 4 is no
    16-byte piece either: only what lies in aligned pieces merges."""
    fn, r, _ = _function()
    lines, saved = _merge(fn, [_access(fn, r[0], 4), _access(fn, r[1], 8)])
    assert saved == 0 and len(lines) == 2
    lines, saved = _merge(fn, [_access(fn, r[k], 4 + 4 * k) for k in range(4)])
    assert saved == 1                      # only 8 and 12 share an aligned piece
    assert sum(".v2." in line for line in lines) == 1 and "[__ptxalloc_spill+8]" in lines[1]


def test_an_instruction_between_stops_the_merge():
    fn, r, _ = _function()
    between = build.copy(fn.regs, r[5], r[4])
    lines, saved = _merge(fn, [_access(fn, r[0], 0), between, _access(fn, r[1], 4)])
    assert saved == 0 and len(lines) == 3


def test_reloads_merge_but_never_into_one_register_twice():
    fn, r, _ = _function()
    body = [_access(fn, r[0], 8, EditKind.RELOAD), _access(fn, r[1], 12, EditKind.RELOAD)]
    lines, saved = _merge(fn, body)
    assert lines == [f"ld.local.v2.b32\t{{%R{r[0]}, %R{r[1]}}}, [__ptxalloc_spill+8];\t"
                     f"//@reload %a0#{r[0]} %a1#{r[1]}"]
    # both reloads into one physical register: the second wins, the run stays as written
    lines, saved = _merge(fn, body, names=lambda v: "%R3")
    assert saved == 0 and len(lines) == 2


def test_64_bit_pairs_kinds_and_stores_and_reloads_apart():
    fn, r, d = _function()
    lines, saved = _merge(fn, [_access(fn, d[0], 24, slot=save_slot(d[0]),
                                       kind=EditKind.SAVE),
                               _access(fn, d[1], 16, slot=save_slot(d[1]),
                                       kind=EditKind.SAVE)])
    assert saved == 1 and lines[0].startswith(
        f"st.local.v2.b64\t[__ptxalloc_spill+16], {{%R{d[1]}, %R{d[0]}}};")
    # a spill store beside a save, a store beside a reload: no merge
    assert _merge(fn, [_access(fn, r[0], 0), _access(fn, r[1], 4, EditKind.SAVE)])[1] == 0
    assert _merge(fn, [_access(fn, r[0], 0), _access(fn, r[1], 4, EditKind.RELOAD)])[1] == 0
    # 32 beside 64 bits: the two 32-bit stores merge past the 64-bit one (other bytes)
    lines, saved = _merge(fn, [_access(fn, r[0], 0), _access(fn, d[0], 8), _access(fn, r[1], 4)])
    assert saved == 1 and lines[0].startswith("st.local.v2.b32\t[__ptxalloc_spill+0]")
    assert lines[1].startswith(f"st.local.b64\t[__ptxalloc_spill+8], %R{d[0]}")


def test_a_shared_reload_into_the_frame_base_is_kept_as_written():
    """Reloads ``[base+4]`` into R7, then ``[base+0]`` into the base itself (its last use):
    merged, the base would be written by the access that reads it."""
    fn, r, _ = _function()
    base = r[5]

    def shared_reload(v, off):
        ld = build.spill_reload(fn.regs, v, "", base=base)
        ld.ops[1] = Mem(Reg(base), f"+{off}")
        ld.origin = Edit(EditKind.RELOAD, v, value_slot(v))
        ld.comment = f"//@reload {fn.regs.names[v]}#{v}"
        return ld

    assert _merge(fn, [shared_reload(r[1], 4), shared_reload(base, 0)])[1] == 0
    lines, saved = _merge(fn, [shared_reload(r[1], 4), shared_reload(r[2], 0)])
    assert saved == 1 and lines[0].startswith(
        f"ld.shared.v2.b32\t{{%R{r[2]}, %R{r[1]}}}, [%R{base}+0];")


def test_one_slot_stored_twice_in_a_run_is_kept_as_written():
    fn, r, _ = _function()
    body = [_access(fn, r[0], 0), _access(fn, r[1], 4), _access(fn, r[2], 0)]
    assert _merge(fn, body)[1] == 0


def test_callee_saves_merge_with_their_registers():
    fn, r, _ = _function()
    body = []
    for k, reg in enumerate((24, 25)):
        st = _access(fn, r[k], 4 * k, EditKind.CSAVE, slot=callee_slot(reg))
        st.origin = Edit(EditKind.CSAVE, slot=callee_slot(reg), register=reg)
        st.comment = f"//@csave R{reg}"
        body.append(st)
    lines, saved = _merge(fn, body)
    assert saved == 1 and lines[0].endswith("//@csave R24 R25")


# -- the checker refutes a merged line tampered with ----------------------------------------

@pytest.fixture(scope="module")
def hand_allocation():
    text = HAND.read_text()
    res = allocate(text, registers=8, knobs=WRITTEN)
    return text, res.ptx


def _refuted(original: str, allocated: str) -> str:
    with pytest.raises(VerificationError) as e:
        verify_modules(parse(original, "original.ptx"),
                       parse_allocated(allocated, "allocated.ptx"))
    return str(e.value)


V4 = re.compile(r"st\.local\.v4\.b32\t\[__ptxalloc_spill\+(\d+)\], \{(%R\d+), (%R\d+), (%R\d+), "
                r"(%R\d+)\};\t//@spill (\S+) (\S+) (\S+) (\S+)")


def test_the_untampered_allocation_is_proven(hand_allocation):
    original, allocated = hand_allocation
    assert V4.search(allocated)
    verify_modules(parse(original, "original.ptx"), parse_allocated(allocated, "allocated.ptx"))


@pytest.mark.parametrize("tamper,message", [
    # two registers swapped: member 1 stores what member 2's value is not
    (lambda m: m.group(0).replace(f"{{{m.group(2)}, {m.group(3)},",
                                  f"{{{m.group(3)}, {m.group(2)},"), "spill store of"),
    # two value names swapped: the same refutation from the other side
    (lambda m: m.group(0).replace(f"//@spill {m.group(6)} {m.group(7)}",
                                  f"//@spill {m.group(7)} {m.group(6)}"), "spill store of"),
    # a value that is not the original's register of that name
    (lambda m: m.group(0).replace(m.group(6), m.group(6).split("#")[0] + "#999"),
     "not a register of the original function"),
    # misaligned: 4 bytes on, no longer a 16-byte piece
    (lambda m: m.group(0).replace(f"+{m.group(1)}]", f"+{int(m.group(1)) + 4}]"),
     "is not aligned to its width of 16 bytes"),
    # another aligned piece: the later reloads read slots that hold something else
    (lambda m: m.group(0).replace(f"+{m.group(1)}]", f"+{int(m.group(1)) + 16}]"), "reload of"),
    # a .v4 access naming two values
    (lambda m: m.group(0).replace(f" {m.group(8)} {m.group(9)}", ""),
     "must be 'st.local.v2.b32' or 'st.local.v2.b64'"),
    # a .v4.b64 access: 32 bytes
    (lambda m: m.group(0).replace("v4.b32", "v4.b64"), "moves at most 16 bytes, not 32"),
])
def test_a_tampered_merged_store_is_refuted(hand_allocation, tamper, message):
    original, allocated = hand_allocation
    m = V4.search(allocated)
    bad = allocated[:m.start()] + tamper(m) + allocated[m.end():]
    assert bad != allocated
    assert message in _refuted(original, bad)


def test_a_merged_reload_into_one_register_twice_is_refuted(hand_allocation):
    original, allocated = hand_allocation
    m = re.search(r"ld\.local\.v2\.b32\t\{(%R\d+), (%R\d+)\}", allocated)
    bad = allocated[:m.start()] + m.group(0).replace(m.group(2), m.group(1)) + \
        allocated[m.end():]
    assert "the registers of a merged reload must differ" in _refuted(original, bad)


def test_a_merged_callee_save_of_the_wrong_register_is_refuted():
    text = (DATA / "calls_sm80.ptx").read_text()
    allocated = allocate(text, registers=32).ptx
    bad = allocated.replace("//@csave R24 R25", "//@csave R25 R24", 1)
    assert bad != allocated
    assert "must move %R25" in _refuted(text, bad)


def test_reloads_into_a_pair_and_a_register_it_covers_are_kept_as_written():
    """``%RD4`` is R4 and R5: reloads of +0 into R8, +8 into RD4, +4 into R5 would merge +0
    and +4 into ``ld.v2 {%R8, %R5}`` ahead of the RD4 reload, which would then overwrite R5;
    the run is kept as written (registers compared as 32-bit units)."""
    fn, r, d = _function()
    where = {r[0]: "%R8", d[0]: "%RD4", r[1]: "%R5"}
    body = [_access(fn, r[0], 0, EditKind.RELOAD), _access(fn, d[0], 8, EditKind.RELOAD),
            _access(fn, r[1], 4, EditKind.RELOAD)]
    lines, saved = _merge(fn, body, names=where.__getitem__)
    assert saved == 0 and len(lines) == 3
    # with R6 in place of R5 nothing overlaps, and the two 32-bit reloads merge
    where[r[1]] = "%R6"
    assert _merge(fn, body, names=where.__getitem__)[1] == 1


V2_RELOAD = re.compile(r"ld\.local\.v2\.b32\t\{(%R\d+), (%R\d+)\}, \[__ptxalloc_spill\+\d+\];")


@pytest.mark.parametrize("tamper,message", [
    (lambda s: "@%P0 " + s, "may not be guarded"),
    (lambda s: s.replace("ld.local.v2.b32", "ld.local.v2.b64"), "a 32-bit value, in a .b64 "
                                                                "access"),
    (lambda s: re.sub(r"\{(%R\d+), (%R\d+)\}", r"{\1, _}", s), "a vector of 2 plain registers"),
])
def test_a_tampered_merged_reload_is_refuted(hand_allocation, tamper, message):
    """Each check of a merged line fails without it: a guard, members wider than their values,
    a vector that is not of plain registers."""
    original, allocated = hand_allocation
    m = V2_RELOAD.search(allocated)
    bad = allocated[:m.start()] + tamper(m.group(0)) + allocated[m.end():]
    if "%P0" in bad and ".reg .pred %P<" not in bad:
        bad = bad.replace(".reg .b32 %R<", ".reg .pred %P<1>;\n\t.reg .b32 %R<", 1)
    assert message in _refuted(original, bad)


def test_a_merged_callee_save_of_64_bit_registers_is_refuted():
    """A callee-saved register is saved as ``.b32`` (the scalar form's rule): ``.v2.b64`` of
    R24 and R25 would move 16 bytes where the checker's members are two words."""
    text = (DATA / "calls_sm80.ptx").read_text()
    allocated = allocate(text, registers=32).ptx
    bad = re.sub(r"st\.local\.v2\.b32(\t[^\n]*//@csave R24 R25)", r"st.local.v2.b64\1",
                 allocated, count=1)
    assert bad != allocated
    assert "a merged csave moves 32-bit registers" in _refuted(text, bad)


def test_a_shared_merged_access_off_its_alignment_is_refuted():
    """A ``.v4`` shared access 4 bytes past a 16-byte piece: misaligned (ptxas accepts it; it
    would fault)."""
    text = HAND.read_text()
    res = allocate(text, registers=8, knobs=WRITTEN, spill_to="shared", block_size=128)
    m = re.search(r"(st\.shared\.v4\.b32\t\[%R\d+)\+(\d+)\]", res.ptx)
    bad = res.ptx[:m.start()] + f"{m.group(1)}+{int(m.group(2)) + 4}]" + res.ptx[m.end():]
    assert "aligned" in _refuted(text, bad)
