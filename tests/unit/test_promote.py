"""``.local`` arrays promoted to registers before allocation (issue 17, seed 004
ConvertMemoryToRegisterOrUniform): what the pass promotes on hand-written PTX and on nvcc
``-G`` builds (constant offsets only; not an escaping address, mismatched widths or a dynamic
index), how a load of a never-stored slot stays undefined, its translation validator refusing
every wrong ``//@promote`` line and a wrong rewrite, and the whole chain proven and
assembled."""

from __future__ import annotations

import re

import pytest

from conftest import DATA
from ptxalloc import ptxas
from ptxalloc.analysis.liveness import Liveness
from ptxalloc.cli import main
from ptxalloc.errors import VerificationError
from ptxalloc.ir.cfg import CFG
from ptxalloc.ir.instruction import COMMENT, DIRECTIVE, Raw
from ptxalloc.passes.promote import immediate, local_arrays, promote_function
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse, parse_file
from ptxalloc.verify import parse_allocated, verify_modules
from ptxalloc.verify.promote import promoted_original

HAND = DATA / "hand" / "promote_local.ptx"
NVCC_G = DATA / "locals_G_sm80.ptx"
NVCC_O3 = DATA / "locals_sm80.ptx"


def render(fn) -> list[str]:
    return [i.render(fn.regs.names.__getitem__) for i in fn.instructions()]


def test_only_the_array_with_constant_offsets_is_promoted():
    fn = parse_file(str(HAND)).functions[0]
    assert local_arrays(fn) == {"kept": 16, "escapes": 8, "mixed": 8}
    p = promote_function(fn)
    assert p.arrays == ["kept"]
    assert p.slots == {"kept": [(0, 32), (4, 32), (8, 32), (12, 32)]}
    assert p.report() == {"arrays": 1, "local_bytes": 16, "slots": 4, "registers_added": 4,
                          "accesses": 7, "frame_bytes_removed": 16}
    text = render(p.function)
    # one instruction for one, less the dead address arithmetic and the declaration
    assert len(text) == len(render(fn)) - 2
    assert "mov.u64\t%rd3, kept;" not in text and "add.u64\t%rd4, %rd3, 4;" not in text
    assert "kept" not in local_arrays(p.function) and "escapes" in local_arrays(p.function)
    assert "mov.u32\t%r2, %kept_0;" in text and "mov.f32\t%kept_4, 0f3F800000;" in text
    assert "mov.u32\t%r4, %kept_12;" in text and "mov.u32\t%kept_12, %r3;" in text
    # the other two arrays keep their memory accesses
    assert "ld.local.u32\t%r5, [%rd5];" in text and "ld.local.u32\t%r6, [%rd7+4];" in text
    assert not any(t.startswith(("ld.local", "st.local")) and "kept" in t for t in text)


def test_a_never_stored_slot_stays_undefined():
    """kept+8 is loaded before anything is stored there: the promoted register is read before
    any definition, live on entry (an implicit definition), not given a made-up value."""
    p = promote_function(parse_file(str(HAND)).functions[0])
    fn = p.function
    slot = fn.regs.lookup("%kept_8")
    assert Liveness(CFG(fn)).entry_live >> slot & 1
    assert not any(slot in i.defs for i in fn.instructions())


def module_text(module) -> list[str]:
    return module.declarations()


def test_nvcc_debug_builds():
    module = parse_file(str(NVCC_G))
    got = {fn.name: promote_function(fn) for fn in module.functions}
    assert got["_Z7k_constPfPKfi"].report()["local_bytes"] == 12
    assert got["_Z8k_structPdPKf"].slots == {
        "__local_depot2": [(0, 32), (4, 32), (8, 32), (12, 32), (16, 64)]}
    assert got["_Z9k_dynamicPfPKfi"] is None               # acc[i & 3]
    # -G code reaches the depot through generic addresses (%SP = cvta.local %SPL); its
    # debug information names the depot, so the declaration stays
    text = render(got["_Z7k_constPfPKfi"].function)
    assert got["_Z7k_constPfPKfi"].report()["frame_bytes_removed"] == 12
    kept = {fn.name: promote_function(fn, "\n".join(module_text(module)))
            for fn in module.functions}
    assert kept["_Z7k_constPfPKfi"].report()["frame_bytes_removed"] == 0
    assert "__local_depot0" in local_arrays(kept["_Z7k_constPfPKfi"].function)
    assert not any(t.startswith(("ld.f32", "st.f32")) and "%SP" in t for t in text)
    # -O3 leaves only the dynamically indexed array in memory: not promotable
    assert all(promote_function(fn) is None for fn in parse_file(str(NVCC_O3)).functions)


@pytest.mark.parametrize("text,value", [("8", 8), ("+8", 8), ("-4", -4), ("0x10", 16),
                                        ("010", 8), ("0", 0), ("4U", 4), ("%r1", None),
                                        ("1.5", None)])
def test_immediates(text, value):
    assert immediate(text) == value


@pytest.mark.parametrize("path", [HAND, NVCC_G])
def test_the_whole_chain_is_proven_and_assembles(path, tmp_path, capsys):
    res = allocate(path.read_text(), 255, knobs={"promote": 1}, filename=str(path))
    assert all(f.verified for f in res.functions)
    assert re.search(r"//@ptxalloc .* promote=1\b.*\n(\t//@.*\n)*\t//@promote \S+\n", res.ptx)
    out = tmp_path / "out.ptx"
    out.write_text(res.ptx)
    assert main(["verify", str(path), str(out)]) == 0
    assert "verified:" in capsys.readouterr().out
    if ptxas.available():
        assert ptxas.assemble(res.ptx, "sm_80").ok


def test_off_by_default():
    res = allocate(HAND.read_text(), 255, filename=str(HAND))
    assert "promote=" not in res.ptx and "//@promote" not in res.ptx


def _check(*names: str):
    original = parse_file(str(HAND)).functions[0]
    original = original.copy()
    # a name declared in two scopes: its accesses could not be told apart
    original.body = [Raw(DIRECTIVE, ".local .align 4 .b8 twice[4];"),
                     Raw(DIRECTIVE, ".local .align 4 .b8 twice[8];")] + original.body
    assert "twice" not in local_arrays(original)
    fake = original.copy()
    fake.body = [Raw(COMMENT, f"//@promote {n}") for n in names] + fake.body
    return promoted_original(original, fake)


@pytest.mark.parametrize("names,why", [
    (("escapes",), "escapes"),                        # its generic address is stored
    (("mixed",), "mismatched widths"),                # 64 bits at 0, 32 bits at 4
    (("nothere",), "not a .local array"),
    (("twice",), "declared once"),                    # one per scope
    (("kept", "kept"), "promoted twice"),
])
def test_the_validator_refuses_wrong_promotions(names, why):
    with pytest.raises(VerificationError, match=why):
        _check(*names)


def _variant(tmp_path, old: str, new: str) -> str:
    """The hand-written file with one line changed, written to tmp_path."""
    text = HAND.read_text()
    assert old in text
    p = tmp_path / "variant.ptx"
    p.write_text(text.replace(old, new))
    return str(p)


@pytest.mark.parametrize("old,new,why", [
    ("ld.local.u32 \t%r4, [%rd3+12];", "ld.local.u32 \t%r4, [%rd3+13];", "misaligned"),
    ("ld.local.u32 \t%r4, [%rd3+12];", "ld.local.u32 \t%r4, [%rd3+16];", "outside"),
    ("add.u64 \t%rd4, %rd3, 4;", "add.u64 \t%rd4, %rd3, %rd1;", "escapes"),
    ("ld.local.u32 \t%r2, [%rd3];", "ld.u32 \t%r2, [%rd3];", "another state space"),
    ("ld.local.u32 \t%r2, [%rd3];", "ld.local.u16 \t%r2, [%rd3];", "width differs"),
    ("ld.local.u32 \t%r2, [%rd3];", "ld.local.v2.u32 \t{%r2, %r9}, [%rd3];", "escapes"),
    ("st.local.u32 \t[%rd3], %r1;", "st.local.u64 \t[%rd3], %rd3;", "escapes"),
    ("st.local.u32 \t[kept+12], %r3;", "st.local.u32 \t[kept+12], %r3;\n\tmov.u64 \t%rd3, 0;",
     "not defined once"),
])
def test_the_validator_refuses_unpromotable_variants(tmp_path, old, new, why):
    path = _variant(tmp_path, old, new)
    original = parse_file(path).functions[0]
    fake = original.copy()
    fake.body = [Raw(COMMENT, "//@promote kept")] + fake.body
    with pytest.raises(VerificationError, match=why):
        promoted_original(original, fake)
    # and the pass leaves the array in memory
    p = promote_function(original)
    assert p is None or "kept" not in p.arrays


def test_a_claimed_promotion_without_the_rewrite_is_refuted(tmp_path, capsys):
    """An allocation of the unpromoted function that claims promote=1: the rebuilt function
    has movs where the allocation still loads and stores, so the proof fails."""
    res = allocate(HAND.read_text(), 255, filename=str(HAND))
    claimed = re.sub(r"(//@ptxalloc [^\n]*)\n", r"\1 promote=1\n\t//@promote kept\n", res.ptx,
                     count=1)
    out = tmp_path / "out.ptx"
    out.write_text(claimed)
    assert main(["verify", str(HAND), str(out)]) == 1
    capsys.readouterr()
    with pytest.raises(VerificationError):
        verify_modules(parse(HAND.read_text(), str(HAND)), parse_allocated(claimed, "x.ptx"))


def test_the_declaration_goes_and_a_kept_one_is_refuted(tmp_path, capsys):
    """The promoted array's declaration is removed (ptxas reserves a frame for any declared
    array); an allocation that keeps it does not match the rebuilt function."""
    res = allocate(HAND.read_text(), 255, knobs={"promote": 1}, filename=str(HAND))
    assert "kept[16]" not in res.ptx and "escapes[8]" in res.ptx
    bad = res.ptx.replace("\t.local .align 8 .b8 escapes[8];",
                          "\t.local .align 8 .b8 kept[16];\n\t.local .align 8 .b8 escapes[8];")
    out = tmp_path / "out.ptx"
    out.write_text(bad)
    assert main(["verify", str(HAND), str(out)]) == 1
    assert "directives differ" in capsys.readouterr().err


def test_verbose_says_what_was_promoted(tmp_path, capsys):
    assert main(["allocate", str(HAND), "--knob", "promote=1", "-v",
                 "-o", str(tmp_path / "o.ptx")]) == 0
    got = capsys.readouterr()
    assert "promoted 1 .local arrays (16 bytes, 7 loads and stores) to 4 registers" in \
        got.out + got.err


# a module-scope .local 'arr' and a nested scope's own 'arr': outside the scope the name is the
# module's variable (ptxas takes module-scope .local only without the ABI; PTX allows it)
SHADOWED = """.version 7.8
.target sm_80
.address_size 64

.local .align 4 .b8 arr[16];

.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  st.local.u32 [arr], %r1;
  {
    .local .align 4 .b8 arr[16];
    add.u32 %r2, %r1, 100;
    st.local.u32 [arr], %r2;
    ld.local.u32 %r3, [arr];
    st.global.u32 [%rd1+4], %r3;
  }
  ld.local.u32 %r4, [arr];
  st.global.u32 [%rd1], %r4;
  ret;
}
"""

# what the pass made of it before it looked at scopes: the module's arr read as the nested one's
SHADOWED_WRONG = """.version 7.8
.target sm_80
.address_size 64

.local .align 4 .b8 arr[16];

.visible .entry k(.param .u64 out)
{
\t//@ptxalloc allocator=briggs budget=255 arch=sm_80 stem= leaf=1 promote=1 recompute=0
\t//@promote arr
\t.reg .b32 %R<3>;
\t.reg .b64 %RD<1>;
\tld.param.u64\t%RD0, [out];
\tmov.u32\t%R0, %tid.x;
\t//@removed mov.u32\t%R0, %R0;
\t{
\t\t.local .align 4 .b8 arr[16];
\t\tadd.u32\t%R0, %R0, 100;
\t\t//@removed mov.u32\t%R0, %R0;
\t\t//@removed mov.u32\t%R0, %R0;
\t\tst.global.u32\t[%RD0+4], %R0;
\t}
\t//@removed mov.u32\t%R0, %R0;
\tst.global.u32\t[%RD0], %R0;
\tret;
}
"""


def test_a_nested_array_shadowing_a_module_one_is_not_promoted(tmp_path, capsys):
    """Accesses outside the nested scope name the module's array: promoting the nested one
    would make them read its slot. The pass leaves it, the validator refuses the claim."""
    module = parse(SHADOWED, "shadowed.ptx")
    fn = module.functions[0]
    p = promote_function(fn, ".local .align 4 .b8 arr[16];")
    assert p is None or "arr" not in p.arrays
    res = allocate(SHADOWED, 255, knobs={"promote": 1}, filename="shadowed.ptx")
    assert "//@promote" not in res.ptx
    original = tmp_path / "shadowed.ptx"
    original.write_text(SHADOWED)
    wrong = tmp_path / "wrong.ptx"
    wrong.write_text(SHADOWED_WRONG)
    assert main(["verify", str(original), str(wrong)]) == 1
    assert "nested scope" in capsys.readouterr().err
