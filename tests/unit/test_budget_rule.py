"""The default budget is ptxas's register limit (issue 20), and occupancy is the hardware's
(issue 11): target/register_limit.py, target/occupancy.py, target/sm.py, the pipeline's and the
command line's budget options."""

from __future__ import annotations

import json
import sys

import pytest

from ptxalloc import ptxas
from ptxalloc.cli import main
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse
from ptxalloc.target.occupancy import occupancy
from ptxalloc.target.register_limit import directive_limit, module_limits
from ptxalloc.target.sm import PROFILES, profile_for

from conftest import DATA, assert_verified

sys.path.insert(0, str(DATA))
from pressure_loop import pressure_kernel  # noqa: E402

needs_ptxas = pytest.mark.skipif(not ptxas.available(), reason="ptxas is not on the PATH")

# issue 20's table (directives, ptxas flags, ptxas's limit), then rows measured beside it.
# exact=False: launch bounds without .minnctapersm, where ptxas may use fewer registers than its
# limit to reach more blocks (.maxntid 640: 32 on sm_80); each such row has an exact companion
# with .minnctapersm 1.
TABLE = [
    ("", "", 255, False),                       # ptxas needs 246 < 255: not the limit
    (".reqntid 128", "", 255, False),
    (".maxnreg 96", "", 96, True),
    (".reqntid 128 .minnctapersm 4", "", 128, True),
    (".reqntid 128 .minnctapersm 3", "", 168, True),
    (".reqntid 128 .minnctapersm 5", "", 96, True),
    (".maxntid 1024", "", 64, False),
    (".maxntid 640", "", 96, False),
    (".reqntid 128 .minnctapersm 4", "-maxrregcount 100", 128, True),
    (".reqntid 128 .minnctapersm 4", "-maxrregcount 100 --override-directive-values", 100, True),
    ("", "-maxrregcount 100", 100, True),
    # beside the table
    (".maxntid 1024 .minnctapersm 1", "", 64, True),
    (".maxntid 640 .minnctapersm 1", "", 96, True),
    (".maxntid 800 .minnctapersm 1", "", 72, True),        # 25 warps round up to 28
    (".maxntid 96 .minnctapersm 6", "", 96, True),         # 18 warps round up to 20
    (".maxntid 1024 .minnctapersm 2", "", 32, True),
    (".maxnreg 120 .reqntid 128 .minnctapersm 4", "", 120, True),
    (".maxnreg 200 .reqntid 128 .minnctapersm 4", "", 128, True),
    (".maxnreg 96", "-maxrregcount 80", 96, True),
    (".maxnreg 96", "-maxrregcount 120 --override-directive-values", 120, True),
    (".reqntid 32 .minnctapersm 40", "", 255, False),     # above 32 blocks: ignored
    ("", "-maxrregcount 16", 24, True),                    # raised to ptxas's floor
    ("", "--maxrregcount=101", 101, True),
]


def _flags(flags: str) -> tuple[int | None, bool]:
    maxrreg = None
    words = flags.replace("=", " ").split()
    for i, w in enumerate(words):
        if w.lstrip("-") == "maxrregcount":
            maxrreg = int(words[i + 1])
    return maxrreg, "--override-directive-values" in words


def _rule(text: str, arch: str, flags: str):
    module = parse(text, "pressure.ptx")
    maxrreg, override = _flags(flags)
    return module_limits(module, PROFILES[arch], maxrreg, override)["pressure"]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("directives, flags, limit, exact", TABLE,
                         ids=[f"{d or '-'} {f or '-'}" for d, f, _, _ in TABLE])
def test_rule_gives_the_table(arch, directives, flags, limit, exact):
    assert _rule(pressure_kernel(240, arch, directives), arch, flags).registers == limit


@pytest.mark.ptxas
@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("directives, flags, limit, exact", TABLE,
                         ids=[f"{d or '-'} {f or '-'}" for d, f, _, _ in TABLE])
def test_rule_matches_ptxas(arch, directives, flags, limit, exact):
    text = pressure_kernel(240, arch, directives)
    budget = _rule(text, arch, flags).registers
    res = ptxas.assemble(text, arch, flags.split())
    assert res.ok, res.output
    used = res.functions["pressure"].registers
    if exact:
        assert used == budget, (used, budget, res.output)
    else:
        assert used <= budget, (used, budget, res.output)


def test_budget_sources_are_named():
    sm = PROFILES["sm_80"]
    assert directive_limit(sm, {}).source == "ptxas default: 255 per thread (sm_80)"
    assert directive_limit(sm, {"maxnreg": 96}).source == ".maxnreg 96"
    assert directive_limit(sm, {"reqntid": 128, "minnctapersm": 4}).source == \
        ".minnctapersm 4 x .reqntid 128"
    assert directive_limit(sm, {"maxntid": [640, 1, 1]}).source == ".maxntid 640: 20 warps"
    assert directive_limit(sm, {}, 100).source == "-maxrregcount 100"


CALLS = """.version 8.0
.target sm_80
.address_size 64

.func (.param .b32 r) leaf(.param .b32 a)
{
\t.reg .b32 %r<3>;
\tld.param.b32 %r1, [a];
\tadd.s32 %r2, %r1, 1;
\tst.param.b32 [r], %r2;
\tret;
}

.func (.param .b32 r) mid(.param .b32 a)
{
\t.reg .b32 %r<3>;
\tld.param.b32 %r1, [a];
\t{
\t.param .b32 pa;
\t.param .b32 pr;
\tst.param.b32 [pa], %r1;
\tcall.uni (pr), leaf, (pa);
\tld.param.b32 %r2, [pr];
\t}
\tst.param.b32 [r], %r2;
\tret;
}

.func (.param .b32 r) lonely(.param .b32 a)
{
\t.reg .b32 %r<2>;
\tld.param.b32 %r1, [a];
\tst.param.b32 [r], %r1;
\tret;
}

.visible .entry wide(.param .u64 p) .maxnreg 200
{
\t.reg .b32 %r<3>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [p];
\tld.global.u32 %r1, [%rd1];
\t{
\t.param .b32 pa;
\t.param .b32 pr;
\tst.param.b32 [pa], %r1;
\tcall.uni (pr), leaf, (pa);
\tld.param.b32 %r2, [pr];
\t}
\tst.global.u32 [%rd1], %r2;
\tret;
}

.visible .entry narrow(.param .u64 p) .maxntid 1024
{
\t.reg .b32 %r<3>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [p];
\tld.global.u32 %r1, [%rd1];
\t{
\t.param .b32 pa;
\t.param .b32 pr;
\tst.param.b32 [pa], %r1;
\tcall.uni (pr), mid, (pa);
\tld.param.b32 %r2, [pr];
\t}
\tst.global.u32 [%rd1], %r2;
\tret;
}
"""


@pytest.mark.ptxas
@needs_ptxas
def test_calls_module_assembles():
    assert ptxas.assemble(CALLS, "sm_80").ok


def test_func_gets_the_smallest_limit_of_the_kernels_reaching_it():
    limits = module_limits(parse(CALLS), PROFILES["sm_80"])
    assert (limits["wide"].registers, limits["narrow"].registers) == (200, 64)
    # leaf: called by wide (200) directly and by narrow (64) through mid
    assert (limits["leaf"].registers, limits["leaf"].source) == (64, "called from kernel narrow")
    assert (limits["mid"].registers, limits["mid"].source) == (64, "called from kernel narrow")
    assert limits["lonely"].registers == 255
    assert module_limits(parse(CALLS), PROFILES["sm_80"], 100)["lonely"].source == \
        "-maxrregcount 100"


def test_default_api_budget_is_ptxas_rule_and_seed_is_15():
    text = pressure_kernel(40, "sm_80", ".reqntid 128 .minnctapersm 4")
    rows = {r["name"]: r for r in allocate(text).report()["functions"]}
    assert rows["pressure"]["budget"] == 128
    assert rows["pressure"]["budget_from"] == ".minnctapersm 4 x .reqntid 128"
    assert rows["pressure"]["spill_stores_bytes"] == 0
    seed = allocate(text, registers="seed").report()["functions"][0]
    assert (seed["budget"], seed["budget_from"]) == (15, "--registers seed (CICC's K = 15)")
    assert seed["spill_stores_bytes"] > 0
    over = allocate(text, maxrregcount=32, override_directive_values=True)
    row = over.report()["functions"][0]
    assert (row["budget"], row["registers"] <= 32) == (32, True)
    assert_verified(over)


# -- occupancy (issue 11) -------------------------------------------------------------------


def test_occupancy_matches_the_occupancy_calculator():
    o = occupancy(PROFILES["sm_80"], 50, 128)     # 56 registers x 32 = 1792 per warp
    assert o.as_dict() == {"registers": 50, "block_size": 128, "blocks_per_sm": 9,
                           "warps_per_sm": 36, "occupancy": 0.5625, "limiter": "registers"}
    o = occupancy(PROFILES["sm_90"], 16, 32)       # 1 warp a block: 32 blocks at most
    assert (o.blocks_per_sm, o.warps_per_sm, o.limiter) == (32, 32, "blocks")
    o = occupancy(PROFILES["sm_86"], 32, 256)      # 48 warps at most
    assert (o.blocks_per_sm, o.warps_per_sm, o.limiter) == (6, 48, "warps")
    o = occupancy(PROFILES["sm_75"], 32, 256)      # 32 warps, 16 blocks
    assert (o.blocks_per_sm, o.warps_per_sm) == (4, 32)
    o = occupancy(PROFILES["sm_90"], 300, 128)
    assert o.as_dict()["occupancy"] is None and o.as_dict()["note"] == "exceeds 255: must spill"


def test_every_profile_has_the_hardware_figures():
    figures = {n: (p.regs_per_sm, p.max_warps, p.max_blocks) for n, p in PROFILES.items()}
    assert figures == {
        "sm_70": (65536, 64, 32), "sm_75": (65536, 32, 16), "sm_80": (65536, 64, 32),
        "sm_86": (65536, 48, 16), "sm_89": (65536, 48, 24), "sm_90": (65536, 64, 32),
        "sm_100": (65536, 64, 32), "sm_120": (65536, 48, 32)}


def _run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_analyze_json_reports_occupancy_and_budget(capsys, tmp_path):
    src = tmp_path / "k.ptx"
    src.write_text(pressure_kernel(300, "sm_80", ".reqntid 128 .minnctapersm 4"))
    rc, out, err = _run(capsys, "analyze", src, "--json")
    assert rc == 0, err
    (row,) = json.loads(out)["functions"]
    assert (row["budget"], row["budget_from"]) == (128, ".minnctapersm 4 x .reqntid 128")
    assert row["occupancy"]["at_budget"] == {
        "registers": 128, "block_size": 128, "blocks_per_sm": 4, "warps_per_sm": 16,
        "occupancy": 0.25, "limiter": "registers"}
    at_max = row["occupancy"]["at_max_live"]
    assert at_max["registers"] > 255 and at_max["occupancy"] is None
    rc, out, err = _run(capsys, "analyze", src)
    assert "exceeds 255: must spill" in out
    assert "budget 128 from .minnctapersm 4 x .reqntid 128" in out


@pytest.mark.parametrize("target", ["sm_1000", "compute_90", "bogus"])
def test_unknown_target_is_a_named_warning(capsys, tmp_path, target):
    src = tmp_path / "k.ptx"
    src.write_text(pressure_kernel(4, target))
    rc, out, err = _run(capsys, "analyze", src, "--json")
    assert rc == 0
    assert err == f"{src}: warning: unknown .target '{target}'; using sm_90\n"
    assert profile_for(None, "sm_90a").name == "sm_90"
    assert profile_for(None, "sm_101").name == "sm_100"


@pytest.mark.parametrize("flags, budget, source", [
    ([], 128, ".minnctapersm 4 x .reqntid 128"),
    (["-maxrregcount", "100"], 128,
     ".minnctapersm 4 x .reqntid 128; -maxrregcount 100 ignored: the directives win"),
    (["-maxrregcount=100", "--override-directive-values"], 100,
     "-maxrregcount 100 --override-directive-values"),
    (["--maxrregcount", "100", "--override-directive-values"], 100,
     "-maxrregcount 100 --override-directive-values"),
    (["--registers", "40"], 40, "--registers 40"),
    (["--registers", "seed"], 15, "--registers seed (CICC's K = 15)"),
    (["-arch", "sm_75"], 128, ".minnctapersm 4 x .reqntid 128"),
])
def test_allocate_cli_budget_flags(capsys, tmp_path, flags, budget, source):
    src = tmp_path / "k.ptx"
    src.write_text(pressure_kernel(30, "sm_80", ".reqntid 128 .minnctapersm 4"))
    rep = tmp_path / "r.json"
    rc, out, err = _run(capsys, "allocate", src, "-o", tmp_path / "o.ptx", "--json", rep, "-v",
                        *flags)
    assert rc == 0, err
    (row,) = json.loads(rep.read_text())["functions"]
    assert (row["budget"], row["budget_from"]) == (budget, source)
    assert f"budget {budget} from {source}" in out


TRITON_FILES = sorted((DATA / "triton").glob("*.ptx")) + [DATA / "explain" /
                                                          "triton_matmul_sm80.ptx"]


@pytest.mark.parametrize("path", TRITON_FILES, ids=lambda p: p.stem)
def test_plain_allocate_of_triton_kernels_keeps_to_ptxas_limit(path):
    """Issue 20 on Triton output (sm_80 tutorials, sm_90a attention): a plain allocation gets
    ptxas's limit for each kernel, never uses more registers, is proven, and spills only where
    MaxLive (as written, or as legalized: registers held in flight by wgmma) exceeds the
    budget — or, at K = 255, where predicates beyond P0-P6 went to spill slots to use fewer
    registers (the vector add: knob ``PredicateSlots``)."""
    from ptxalloc.pipeline import allocate_module
    from ptxalloc.ptx import parse_file
    from ptxalloc.target.sm import profile_for_module

    module = parse_file(str(path))
    limits = module_limits(module, profile_for_module(None, module))
    res = allocate_module(module)
    assert res.functions and all(fr.verified for fr in res.functions)
    for fr in res.functions:
        row = fr.report()
        assert (row["budget"], row["budget_from"]) == (limits[fr.name].registers,
                                                       limits[fr.name].source)
        assert row["registers"] <= row["budget"]
        slots = fr.extra.get("predicate_slots", {})
        if slots.get("kept") == "slots":
            assert row["spill_stores_bytes"] + row["spill_loads_bytes"] == \
                slots["spill_bytes_in_slots"]
            assert row["registers"] == slots["registers_in_slots"] < \
                slots["registers_in_registers"]
        elif row["spill_stores_bytes"] or row["spill_loads_bytes"]:
            assert max(row["max_live"]["registers"], row["max_live_legalized"]) > row["budget"], \
                row
