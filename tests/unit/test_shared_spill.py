"""Spilling to shared memory (``--spill-to shared``; seed 004 "Spilling Overview"): the
``.shared`` area of frame x threads bytes, the entry sequence computing this thread's frame
address, the refusals (the calling convention, an unknown block size, an area over 48 KB),
the occupancy it costs, and the checker's proof — including refutations of tampered output —
on hand-written kernels, assembled by ptxas."""

from __future__ import annotations

import json
import re

import pytest

from conftest import DATA
from ptxalloc import ptxas
from ptxalloc.alloc.driver import Options
from ptxalloc.cli import main
from ptxalloc.errors import AllocationError, VerificationError
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx.parser import parse
from ptxalloc.target.occupancy import occupancy, shared_per_block
from ptxalloc.target.sm import PROFILES
from ptxalloc.verify import verify_files


def kernel(bounds: str = ".reqntid 64, 1, 1", values: int = 12, extra_decl: str = "",
           name: str = "k") -> str:
    """A kernel keeping ``values`` loaded floats live across a loop: spills at a low K."""
    loads = "".join(f"\tld.global.f32 %f{i}, [%rd1+{4 * i}];\n" for i in range(values))
    adds = "".join(f"\tadd.f32 %f{values}, %f{values}, %f{i};\n" for i in range(values))
    return f""".version 8.0
.target sm_80
.address_size 64
{extra_decl}
.visible .entry {name}(.param .u64 p, .param .u32 n)
{bounds}
{{
\t.reg .pred %p<2>;
\t.reg .b32 %r<4>;
\t.reg .f32 %f<{values + 2}>;
\t.reg .b64 %rd<3>;
\tld.param.u64 %rd1, [p];
\tld.param.u32 %r1, [n];
\tcvta.to.global.u64 %rd1, %rd1;
{loads}\tmov.f32 %f{values}, 0f00000000;
\tmov.u32 %r2, 0;
LOOP:
{adds}\tadd.s32 %r2, %r2, 1;
\tsetp.lt.s32 %p1, %r2, %r1;
\t@%p1 bra LOOP;
\tst.global.f32 [%rd1], %f{values};
\tret;
}}
"""


def allocate_shared(text: str, k: int = 8, block: int | None = None, **kw):
    return allocate_module(parse(text), k, options=Options(spill_to="shared",
                                                           block_size=block, **kw))


def assembles(ptx_text: str) -> ptxas.PtxasResult:
    if not ptxas.available():
        pytest.skip("ptxas is not on the PATH")
    res = ptxas.assemble(ptx_text, "sm_80")
    assert res.ok, res.output
    return res


def test_one_dimensional_block_spills_to_shared():
    res = allocate_shared(kernel())
    (f,) = res.functions
    assert f.verified and f.spill_stores_bytes > 0 and f.stack_frame_bytes == 0
    area = f.extra["shared_spill"]
    frame = area["frame_bytes"]
    assert frame % 16 == 0 and area["bytes"] == frame * 64 and area["block_size"] == 64
    assert area["block_from"] == ".reqntid 64, 1, 1"
    text = res.ptx
    assert "space=shared block=64" in text
    assert f".shared .align 16 .b8 __ptxalloc_smem[{frame * 64}];" in text
    assert "st.local" not in text and "ld.local" not in text
    assert re.search(r"st\.shared\.b32\s+\[%R\d+\+\d+\]", text)
    sbase = [line for line in text.splitlines() if "//@sbase" in line]
    # one-dimensional: %tid.x alone, then the array and the frame
    assert len(sbase) == 3 and "%tid.x" in sbase[0] and "%ntid" not in text
    assert re.search(rf"mad\.lo\.u32\s+%R\d+, %R\d+, {frame}, %R\d+;", sbase[2])
    assert f.registers <= 8
    got = assembles(text)
    assert got.functions["k"].smem == frame * 64


def test_maxntid_bounds_only_the_product():
    # CUDA's __launch_bounds__(64) is .maxntid 64, 1, 1, and a 16 x 4 launch is legal: the
    # frame address must use the whole linear index, and the checker refuses %tid.x alone
    res = allocate_shared(kernel(".maxntid 64, 1, 1"))
    assert "%tid.y" in res.ptx and "%ntid.x" in res.ptx and res.functions[0].verified


def test_tid_x_alone_is_refuted_under_maxntid(tmp_path):
    one_dim = allocate_shared(kernel(".reqntid 64, 1, 1")).ptx
    orig = tmp_path / "k.ptx"
    orig.write_text(kernel(".maxntid 64, 1, 1"))
    bad = tmp_path / "bad.ptx"
    bad.write_text(one_dim.replace(".reqntid 64, 1, 1", ".maxntid 64, 1, 1"))
    with pytest.raises(VerificationError, match="should hold the shared spill frame's address"):
        list(verify_files(str(orig), str(bad)))


def test_three_dimensional_block_uses_the_linear_index():
    res = allocate_shared(kernel(".maxntid 8, 4, 2"))
    text = res.ptx
    for special in ("%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y"):
        assert special in text
    assert res.functions[0].extra["shared_spill"]["block_size"] == 64
    assert res.functions[0].verified
    assembles(text)


def test_block_size_option_and_the_error_without_it(capsys, tmp_path):
    text = kernel(bounds="")
    with pytest.raises(AllocationError, match=r"function 'k': --spill-to shared needs the "
                                              r"threads per block.*--block-size"):
        allocate_shared(text)
    res = allocate_shared(text, block=96)
    assert res.functions[0].extra["shared_spill"]["block_from"] == "--block-size 96"
    assert res.functions[0].extra["shared_spill"]["bytes"] == \
        96 * res.functions[0].extra["shared_spill"]["frame_bytes"]
    assembles(res.ptx)
    path = tmp_path / "k.ptx"
    path.write_text(text)
    assert main(["allocate", str(path), "--registers", "8", "--spill-to", "shared",
                 "-o", str(tmp_path / "o.ptx")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "function 'k'" in err and "--block-size" in err
    assert main(["allocate", str(path), "--registers", "8", "--spill-to", "shared",
                 "--block-size", "128", "-o", str(tmp_path / "o.ptx"), "-v"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"Used \d+ registers, \d+ bytes smem \(spill area: \d+ bytes x 128 "
                     r"threads; occupancy [\d.]+ % against [\d.]+ % without it\)", out)
    assert main(["verify", str(path), str(tmp_path / "o.ptx")]) == 0


def test_the_block_size_becomes_a_launch_bound_the_checker_requires(tmp_path):
    # --block-size is the user's word: the output makes it a .maxntid, so a launch with more
    # threads than the area has frames fails; the checker refuses the area without it, a
    # changed bound, and a bound the allocation adds that is not a .maxntid
    text = kernel(bounds="")
    res = allocate_shared(text, block=96)
    assert re.search(r"\.entry k\(.*\)\n\.maxntid 96, 1, 1\n\{", res.ptx, re.S)
    assembles(res.ptx)
    orig, good = tmp_path / "k.ptx", tmp_path / "good.ptx"
    orig.write_text(text)
    good.write_text(res.ptx)
    assert len(list(verify_files(str(orig), str(good)))) == 1
    for bad_bound, pattern in (("", "needs a launch bound"),
                               (".maxntid 192, 1, 1\n", "holds 96 threads' frames but the "
                                                         "launch bound allows 192"),
                               (".reqntid 96, 1, 1\n", "may add a .maxntid .* not a .reqntid")):
        bad = tmp_path / "bad.ptx"
        bad.write_text(res.ptx.replace(".maxntid 96, 1, 1\n", bad_bound))
        with pytest.raises(VerificationError, match=pattern):
            list(verify_files(str(orig), str(bad)))
    # a kernel with its own bound keeps it as it is
    bounded = allocate_shared(kernel(bounds=".maxntid 64, 1, 1"))
    assert bounded.ptx.count(".maxntid") == 1
    orig.write_text(kernel(bounds=".maxntid 64, 1, 1"))
    bad = tmp_path / "bad.ptx"
    bad.write_text(bounded.ptx.replace(".maxntid 64, 1, 1", ".maxntid 32, 1, 1"))
    with pytest.raises(VerificationError, match="differs from the original's .maxntid 64"):
        list(verify_files(str(orig), str(bad)))


def test_functions_under_the_calling_convention_are_refused():
    calls = (DATA / "calls_sm80.ptx").read_text()
    with pytest.raises(AllocationError, match="Smem spilling should not be enabled when "
                                              "functions use abi"):
        allocate_module(parse(calls), 16, options=Options(spill_to="shared", block_size=128))


def test_the_area_gets_a_name_nothing_else_uses():
    text = kernel(extra_decl=".shared .align 4 .b8 __ptxalloc_smem[16];")
    res = allocate_shared(text)
    assert "__ptxalloc_smem_1[" in res.ptx and "space=shared" in res.ptx
    assembles(res.ptx)


def test_an_area_over_48_kb_is_refused():
    with pytest.raises(AllocationError, match="exceeds the 49152 bytes of static shared"):
        allocate_shared(kernel(".reqntid 1024", values=40), k=8)


def test_local_spilling_is_unchanged_by_default():
    res = allocate_module(parse(kernel()), 8)
    assert "st.local" in res.ptx and "space=shared" not in res.ptx and "//@sbase" not in \
        res.ptx
    assert "shared_spill" not in res.functions[0].extra


def test_shared_memory_limits_occupancy():
    sm = PROFILES["sm_80"]
    # 26,624 bytes + 1 KB reserved = 27,648 per block: 6 blocks of 4 warps in 164 KB
    assert shared_per_block(sm, 26624) == 27648
    o = occupancy(sm, 32, 128, 26624)
    assert (o.blocks_per_sm, o.warps_per_sm, o.limiter) == (6, 24, "shared memory")
    assert occupancy(sm, 32, 128).limiter != "shared memory"
    assert shared_per_block(PROFILES["sm_75"], 1) == 256      # no reservation, 256-byte units


def test_report_counts_the_occupancy_it_costs(capsys, tmp_path):
    path = tmp_path / "k.ptx"
    path.write_text(kernel(".reqntid 256", values=40))
    assert main(["allocate", str(path), "--registers", "8", "--spill-to", "shared",
                 "-o", str(tmp_path / "o.ptx"), "--json", "-"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["functions"]
    area = row["shared_spill"]
    assert row["spill_to"] == "shared" and row["stack_frame_bytes"] == 0
    assert row["occupancy"]["block_size"] == 256
    sm = PROFILES["sm_80"]
    by_shared = sm.shared_kb * 1024 // shared_per_block(sm, area["bytes"])
    assert area["occupancy_without"]["blocks_per_sm"] == 8          # 8 warps x 8 blocks
    assert by_shared < 8
    assert row["occupancy"]["blocks_per_sm"] == by_shared
    assert row["occupancy"]["limiter"] == "shared memory"


# -- the checker refutes tampered shared spilling ---------------------------------------------

@pytest.fixture(scope="module")
def allocated(tmp_path_factory):
    d = tmp_path_factory.mktemp("smem")
    orig = d / "k.ptx"
    orig.write_text(kernel())
    res = allocate_shared(orig.read_text())
    return orig, res.ptx, d


def _refuted(allocated, text: str, pattern: str) -> None:
    orig, _, d = allocated
    bad = d / "bad.ptx"
    bad.write_text(text)
    with pytest.raises(VerificationError, match=pattern):
        list(verify_files(str(orig), str(bad)))


def test_the_untampered_allocation_is_proven(allocated):
    orig, text, d = allocated
    good = d / "good.ptx"
    good.write_text(text)
    assert len(list(verify_files(str(orig), str(good)))) == 1


def test_a_wrong_frame_stride_is_refuted(allocated):
    _, text, _ = allocated
    frame = int(re.search(r"frame=(\d+)", text).group(1))
    bad = re.sub(rf"(mad\.lo\.u32\s+%R\d+, %R\d+, ){frame},", rf"\g<1>{frame // 2},", text)
    assert bad != text
    _refuted(allocated, bad, "should hold the shared spill frame's address")


def test_another_thread_index_is_refuted(allocated):
    _, text, _ = allocated
    bad = text.replace("%tid.x;\t//@sbase", "%tid.y;\t//@sbase", 1)
    assert bad != text
    _refuted(allocated, bad, "should hold the shared spill frame's address")


def test_an_overwritten_base_register_is_refuted(allocated):
    _, text, _ = allocated
    lines = text.splitlines()
    i = next(j for j, line in enumerate(lines) if "st.shared" in line)
    base = re.search(r"\[(%R\d+)\+", lines[i]).group(1)
    lines.insert(i, f"\tmov.u32\t{base}, %tid.x;\t//@sbase")
    _refuted(allocated, "\n".join(lines) + "\n", "should hold the shared spill frame's address")


def test_an_area_too_small_for_the_block_is_refuted(allocated):
    _, text, _ = allocated
    m = re.search(r"__ptxalloc_smem\[(\d+)\]", text)
    bad = text.replace(m.group(0), f"__ptxalloc_smem[{int(m.group(1)) - 16}]")
    _refuted(allocated, bad, "less than the frame of")
    frame = int(re.search(r"frame=(\d+)", text).group(1))
    bad = text.replace("block=64", "block=32").replace(
        m.group(0), f"__ptxalloc_smem[{frame * 32}]")
    _refuted(allocated, bad, "holds 32 threads' frames but the launch bound allows 64")


def test_local_accesses_to_a_shared_area_are_refuted(allocated):
    _, text, _ = allocated
    bad = text.replace("st.shared.b32", "st.local.b32", 1)
    _refuted(allocated, bad, r"must be 'st\.shared\.b32'")
    bad = text.replace(" space=shared block=64", "")
    _refuted(allocated, bad, "an //@sbase instruction, but the header has no space=shared")


def test_an_sbase_step_reading_anything_else_is_refuted(allocated):
    _, text, _ = allocated
    bad = re.sub(r"mov\.u32\s+(%R\d+), __ptxalloc_smem;", r"mov.u32\t\1, %clock;", text)
    assert bad != text
    _refuted(allocated, bad, "an //@sbase mov may read")


@pytest.mark.parametrize("allocator", ["briggs", "fatpoint", "linear"])
@pytest.mark.parametrize("knobs", [{}, {"schedule": 1}], ids=["plain", "scheduled"])
def test_every_allocator_spills_to_shared(allocator, knobs):
    res = allocate_shared(kernel(".maxntid 8, 4, 2", values=16), allocator=allocator,
                          knobs=knobs)
    (f,) = res.functions
    assert f.verified and f.registers <= 8 and f.extra["shared_spill"]["bytes"] > 0
    assembles(res.ptx)


def test_an_area_named_like_the_users_shared_memory_is_refuted(tmp_path):
    text = kernel(extra_decl=".shared .align 4 .b8 __ptxalloc_smem[16];")
    orig = tmp_path / "k.ptx"
    orig.write_text(text)
    good = allocate_shared(text).ptx
    bad = tmp_path / "bad.ptx"
    bad.write_text(good.replace("__ptxalloc_smem_1", "__ptxalloc_smem"))
    with pytest.raises(VerificationError, match="has a name the original module or function "
                                                "uses"):
        list(verify_files(str(orig), str(bad)))


@pytest.mark.parametrize("more", [{"uniform": True}, {"knobs": {"hoist": 1}},
                                  {"knobs": {"promote": 1}}], ids=["uniform", "hoist", "promote"])
def test_shared_spilling_beside_uniform_registers_and_the_pre_passes(more):
    res = allocate_shared(kernel(".maxntid 8, 4, 2", values=16), **more)
    (f,) = res.functions
    assert f.verified and f.registers <= 8 and f.extra["shared_spill"]["bytes"] > 0
    assembles(res.ptx)


def test_a_frame_that_misaligns_the_next_threads_slots_is_refuted(allocated):
    """Every slot lies inside the frame and is aligned within it, but a frame of 2 bytes more
    puts thread 1's 4-byte slots at odd addresses (a misaligned-address fault): the frame must
    be a multiple of 16, the widest slot."""
    _, text, _ = allocated
    frame = int(re.search(r"frame=(\d+)", text).group(1))
    block = int(re.search(r"block=(\d+)", text).group(1))
    bad = text.replace(f"frame={frame}", f"frame={frame + 2}")
    bad = re.sub(rf"(mad\.lo\.u32\s+%R\d+, %R\d+, ){frame},", rf"\g<1>{frame + 2},", bad)
    bad = bad.replace(f"[{frame * block}];", f"[{(frame + 2) * block}];")
    assert bad.count(str(frame + 2)) >= 2
    _refuted(allocated, bad, "not a multiple of 16")


def test_the_area_and_the_users_static_shared_memory_must_fit_together():
    """A kernel with 47,000 bytes of its own .shared and a 3,072-byte spill area: ptxas refuses
    the sum ("uses too much shared data (0xc398 bytes, 0xc000 max)"); the allocation used to
    succeed, counting the area alone. 40,000 bytes of its own leave room."""
    def text(own: int) -> str:
        t = kernel(extra_decl=f".shared .align 4 .b8 buf[{own}];")
        return t.replace("\tst.global.f32 [%rd1], ",
                         f"\tst.shared.u32 [buf+{own - 4}], %r1;\n\tst.global.f32 [%rd1], ", 1)
    with pytest.raises(AllocationError, match="with the function's own 47000 bytes"):
        allocate_shared(text(47000))
    res = allocate_shared(text(40000))
    area = res.functions[0].extra["shared_spill"]
    assert area["bytes"] > 0 and area["own_bytes"] == 40000


def test_smem_and_occupancy_count_the_users_shared_memory(tmp_path, capsys):
    """ptxas's 'N bytes smem' is every static .shared byte: with 40,000 of the kernel's own and
    a 48 x 64 area, 43,072 (ptxas -v says the same of the output). The occupancy at 64 threads
    on sm_80: 3 blocks of 44,160 bytes (43,072 + the 1 KB reservation) fit 164 KB, 9.4 %;
    without the area 4 blocks, 12.5 % (it said 100 % against 100 %, counting the area alone)."""
    t = kernel(values=6, extra_decl=".shared .align 4 .b8 buf[40000];")
    t = t.replace(".f32", ".f64").replace("0f00000000", "0d0000000000000000")
    t = re.sub(r"\[%rd1\+(\d+)\]", lambda m: f"[%rd1+{2 * int(m.group(1))}]", t)
    t = t.replace("\tst.global.f64 [%rd1], ", "\tst.shared.u32 [buf+39996], %r1;\n"
                  "\tst.global.f64 [%rd1], ", 1)
    path = tmp_path / "k.ptx"
    path.write_text(t)
    assert main(["allocate", str(path), "--registers", "8", "--spill-to", "shared",
                 "-o", str(tmp_path / "o.ptx"), "-v"]) == 0
    out = capsys.readouterr().out
    m = re.search(r"(\d+) bytes smem \(spill area: (\d+) bytes x 64 threads; occupancy "
                  r"([\d.]+) % against ([\d.]+) % without it\)", out)
    assert m, out
    assert int(m.group(1)) == 40000 + 64 * int(m.group(2))
    if int(m.group(2)) == 48:
        assert (m.group(3), m.group(4)) == ("9.4", "12.5")
    if ptxas.available():
        got = ptxas.assemble((tmp_path / "o.ptx").read_text(), "sm_80")
        assert got.ok and f"{m.group(1)} bytes smem" in got.output


def test_occupancy_counts_the_kernels_own_shared_memory_without_a_spill_area():
    """Spilling to local memory, the report's occupancy still counts the kernel's static
    .shared: 40,000 bytes (41,024 with the 1 KB reservation) let 4 blocks of 64 threads share
    sm_80's 164 KB, 8 warps of 64 (12.5 %), limited by shared memory — not the 32 blocks the
    registers and block limits would allow. A module-scope array counts when the kernel names
    it, not otherwise."""
    t = kernel(".maxntid 64, 1, 1", extra_decl=".shared .align 4 .b8 buf[40000];")
    used = t.replace("\tst.global.f32 [%rd1], ", "\tst.shared.u32 [buf+4], %r1;\n"
                     "\tst.global.f32 [%rd1], ", 1)
    (f,) = allocate_module(parse(used), 32).functions
    assert "shared_spill" not in f.extra
    occ = f.extra["occupancy"]
    assert (occ["blocks_per_sm"], occ["limiter"], occ["occupancy"]) == (4, "shared memory",
                                                                         0.125)
    (f,) = allocate_module(parse(t), 32).functions
    assert f.extra["occupancy"]["limiter"] != "shared memory"
    assert f.extra["occupancy"]["blocks_per_sm"] == 32


def test_analyze_counts_the_kernels_own_shared_memory(tmp_path, capsys):
    """analyze's occupancies and its next occupancy step count the kernel's static .shared as
    allocate's do: with 40,000 bytes a block, 4 blocks of 64 threads fit whatever the
    registers, so fewer registers would not raise occupancy."""
    t = kernel(".maxntid 64, 1, 1", extra_decl=".shared .align 4 .b8 buf[40000];")
    t = t.replace("\tst.global.f32 [%rd1], ", "\tst.shared.u32 [buf+4], %r1;\n"
                  "\tst.global.f32 [%rd1], ", 1)
    path = tmp_path / "k.ptx"
    path.write_text(t)
    assert main(["analyze", str(path), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["functions"]
    occ = row["occupancy"]
    assert occ["static_shared_bytes"] == 40000
    assert (occ["at_max_live"]["blocks_per_sm"], occ["at_max_live"]["limiter"]) == (
        4, "shared memory")
    assert row["what_to_change"]["next_step"] is None
    assert "limited by shared memory" in row["what_to_change"]["note"]


def test_the_html_report_counts_the_kernels_own_shared_memory(tmp_path):
    t = kernel(".maxntid 64, 1, 1", extra_decl=".shared .align 4 .b8 buf[40000];")
    t = t.replace("\tst.global.f32 [%rd1], ", "\tst.shared.u32 [buf+4], %r1;\n"
                  "\tst.global.f32 [%rd1], ", 1)
    path, out = tmp_path / "k.ptx", tmp_path / "r.html"
    path.write_text(t)
    assert main(["report", str(path), "-o", str(out), "--no-ptxas"]) == 0
    page = out.read_text()
    assert "block size 64, 40000 bytes of .shared a block" in page
    assert re.search(r"<td class=\"num\">64</td><td>8 warps, 12 % \(shared memory\)</td>", page)


def test_a_launch_bound_written_with_fewer_dimensions_is_the_same_bound(tmp_path):
    # found in review: .maxntid 64 against .maxntid 64, 1, 1 was refused as a changed bound
    text = kernel(bounds=".maxntid 64")
    res = allocate_shared(text)
    orig, out = tmp_path / "k.ptx", tmp_path / "o.ptx"
    orig.write_text(text)
    out.write_text(res.ptx.replace(".maxntid 64\n", ".maxntid 64, 1, 1\n"))
    assert ".maxntid 64, 1, 1" in out.read_text()
    assert len(list(verify_files(str(orig), str(out)))) == 1
