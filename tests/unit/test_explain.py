"""Explaining register pressure (issue 14): per PTX line and per source line with ``.file``
names resolved and inlined-at chains, the histogram and the distinct peaks, checked against a
hand count on a small kernel."""

from __future__ import annotations

import json

import pytest

from conftest import DATA, corpus_root
from ptxalloc.cli import main

HAND = DATA / "explain" / "lines_hand.ptx"

# registers (32-bit) and predicates live at each PTX line of lines_hand.ptx, counted by hand:
# live after the instruction plus what it defines (%rd1 counts two)
HAND_LINES = {
    16: (2, 0),   # ld %rd1                      {rd1}
    18: (3, 0),   # ld %r1                       {rd1 r1}
    20: (4, 0),   # add %r2 = %r1 + 1            {rd1 r1 r2}
    22: (5, 0),   # mul %r3 = %r1 * %r2          {rd1 r1 r2 r3}
    25: (5, 0),   # add %r4 = %r2 + %r3          {rd1 r1 r3 r4}
    26: (4, 1),   # setp %p1 = %r4 > %r1         {rd1 r3 r4} {p1}
    28: (3, 0),   # selp %r5                     {rd1 r5}
    29: (0, 0),   # st
    30: (0, 0),   # ret
}


def analyze_json(capsys, *argv) -> dict:
    assert main(["analyze", *map(str, argv), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_lines_match_a_hand_count(capsys):
    r = analyze_json(capsys, HAND, "--lines")["functions"][0]
    got = {x["ptx_line"]: (x["registers"], x["predicates"]) for x in r["lines"]}
    assert got == HAND_LINES
    by_line = {x["ptx_line"]: x["source"] for x in r["lines"]}
    assert by_line[16] == {"file": "/home/user/hand.cu", "line": 3, "column": 5}
    # inlined code: its own location and the one it was inlined at
    assert by_line[25] == {"file": "/home/user/helpers.cuh", "line": 9, "column": 3,
                           "inlined_at": [{"file": "/home/user/hand.cu", "line": 6,
                                           "column": 7}]}
    src = {(x["file"].rsplit("/", 1)[-1], x["line"]): x["max_registers"]
           for x in r["source_lines"]}
    assert src == {("hand.cu", 3): 2, ("hand.cu", 4): 3, ("hand.cu", 5): 5,
                   ("hand.cu", 6): 5, ("hand.cu", 7): 3, ("helpers.cuh", 9): 5}
    assert r["histogram"] == {"0": 2, "2": 1, "3": 2, "4": 2, "5": 2}
    # lines 22 and 25 are one plateau: one peak
    assert r["peaks"] == [{"registers": 5, "first_ptx_line": 22, "last_ptx_line": 25,
                           "source": by_line[22]}]
    assert max(x["registers"] for x in r["lines"]) == r["max_live"]["registers"]


def test_lines_text_names_files(capsys):
    assert main(["analyze", str(HAND), "--lines"]) == 0
    out = capsys.readouterr().out
    assert "line     25:    5   0  helpers.cuh:9:3 (inlined at hand.cu:6:7)" in out
    assert "distinct peaks: 5 registers at line 22-25 (hand.cu:5:20)" in out


def test_file_names_resolved_on_nvcc_output(capsys):
    root = corpus_root()
    path = root and root / "ptxbench" / "trial_turn3_exp019_gemm.ptx"
    if not path or not path.is_file():
        pytest.skip("../shared/corpus is absent")
    r = analyze_json(capsys, path, "--lines")["functions"][0]
    assert r["peak"]["source"]["file"].endswith("/kernel.cu")
    assert r["peak"]["source"]["inlined_at"][0]["file"].endswith("/kernel.cu")
    assert max(x["registers"] for x in r["lines"]) == r["max_live"]["registers"]
    assert sum(r["histogram"].values()) == r["instructions"]
    heights = [p["registers"] for p in r["peaks"]]
    assert heights == sorted(heights, reverse=True) and len(heights) <= 5
    assert len({p["first_ptx_line"] for p in r["peaks"]}) == len(heights)


def test_peak_values_match_a_hand_count(capsys):
    r = analyze_json(capsys, HAND)["functions"][0]
    pk = r["peak"]
    assert pk["line"] == 25                 # the first instruction of the 5-register plateau
    vals = {v["name"]: v for v in pk["values"]}
    # live across (instructions whose live-after set or definitions hold it), next use from
    # the peak (instruction 4), by hand
    assert {n: (v["live_instructions"], v["next_use_distance"], v["registers"])
            for n, v in vals.items()} == {"%rd1": (7, 3, 2), "%r1": (4, 1, 1),
                                          "%r3": (3, 2, 1), "%r4": (2, 1, 1)}
    # the two kernel-parameter loads can be recomputed where needed (issue 13's remat of
    # ld.param of a kernel's own, read-only, parameters); the arithmetic cannot
    assert {n for n, v in vals.items() if v["rematerializable"]} == {"%rd1", "%r1"}
    groups = [(g["source"]["line"], g["registers"], g["values"]) for g in pk["groups"]]
    assert groups == [(3, 2, ["%rd1"]), (4, 1, ["%r1"]), (5, 1, ["%r3"]), (9, 1, ["%r4"])]
    # 5 registers at 256 threads: warps are the limit, no step to take
    assert r["what_to_change"]["next_step"] is None


def test_what_to_change_reaches_the_next_occupancy_step(capsys):
    from ptxalloc.target.occupancy import occupancy
    from ptxalloc.target.sm import profile_for

    sm = profile_for("sm_80")
    rows = analyze_json(capsys, DATA / "pressure_sm80.ptx", "--block-size", "256")["functions"]
    stepped = [r for r in rows if r["what_to_change"]["next_step"]]
    assert stepped
    for r in stepped:
        c = r["what_to_change"]
        assert c["block_size"] == 256 and c["block_from"] == "--block-size"
        now, step = r["max_live"]["registers"], c["next_step"]["registers"]
        # the next step is the most registers that raise occupancy
        assert occupancy(sm, step, 256).warps_per_sm > occupancy(sm, now, 256).warps_per_sm
        assert occupancy(sm, step + 1, 256).warps_per_sm == occupancy(sm, now, 256).warps_per_sm
        assert c["next_step"]["shed"] == now - step
        if c["enough"]:
            assert sum(x["registers"] for x in c["candidates"]) >= now - step
        costs = {v["name"]: v for v in r["peak"]["values"]}
        for x in c["candidates"]:
            v = costs.get(x["name"])
            if v is not None:
                assert x["cost"] == (v["remat_cost"] if x["action"] == "rematerialize"
                                     else v["spill_cost"])


def test_peak_values_all_and_block_size_errors(capsys):
    assert main(["analyze", str(DATA / "pressure_sm80.ptx"), "--peak-values", "all"]) == 0
    out = capsys.readouterr().out
    assert "more (--peak-values all)" not in out
    assert main(["analyze", str(DATA / "pressure_sm80.ptx"), "--peak-values", "2"]) == 0
    assert "more (--peak-values all)" in capsys.readouterr().out
    assert main(["analyze", str(HAND), "--block-size", "0"]) == 2
    assert "--block-size must be a number from 1 to 1024, not '0'" in capsys.readouterr().err


def test_spills_explained_in_json_and_verbose(tmp_path, capsys):
    out, rep = tmp_path / "o.ptx", tmp_path / "r.json"
    # the parameter loads would be rematerialized (no spill at all): keep them spillable here;
    # the pressure as hand-counted: no recomputation at the use, the order as written (the
    # schedule sinks a parameter load past the others); and the seeds' cost, the one
    # explained (SpillStaticWeight=0: the static term would spill two 32-bit values instead)
    assert main(["allocate", str(HAND), "--registers", "4", "-o", str(out), "--json", str(rep),
                 "-v", "--knob", "RematParamLoads=0", "--knob", "recompute=0",
                 "--knob", "schedule=0", "--knob", "SpillStaticWeight=0"]) == 0
    text = capsys.readouterr().out.splitlines()
    # ptxas's own lines, word for word, then ptxalloc's
    assert text[:4] == ["ptxas info    : Compiling entry function 'hand' for 'sm_80'",
                        "ptxas info    : Function properties for hand",
                        "    16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads",
                        "ptxas info    : Used 3 registers"]
    (row,) = json.loads(rep.read_text())["functions"]
    (v,) = row["spills"]["values"]
    # 5 registers live at lines 22-25 (hand count above) against a budget of 4: the 64-bit
    # %rd1, the cheapest, goes to .local from its load to its store
    assert (v["name"], v["stores"], v["reloads"], v["store_bytes"], v["reload_bytes"]) == \
        ("%rd1", 1, 1, 8, 8)
    assert v["why"] == "pressure 5 > budget 4 at line 22" and v["loop_depth"] == 0
    assert v["defined"] == [{"ptx_line": 16, "ptx": "ld.param.u64 %rd1, [hand_out];",
                             "source": {"file": "/home/user/hand.cu", "line": 3,
                                        "column": 5}}]
    assert [u["ptx_line"] for u in v["used"]] == [29]
    assert "    spilled %rd1 (GPR64, loop depth 0, cost 4.8): 1 stores, 1 reloads; pressure 5 " \
           "> budget 4 at line 22" in text
    assert row["spills"]["convention"]["save_bytes"] == 0


def test_convention_bytes_apart_from_pressure_spills(tmp_path, capsys):
    rep = tmp_path / "r.json"
    assert main(["allocate", str(DATA / "abi" / "live_across.ptx"), "--registers", "15",
                 "-o", str(tmp_path / "o.ptx"), "--json", str(rep)]) == 0
    rows = {r["name"]: r for r in json.loads(rep.read_text())["functions"]}
    mid = rows["mid"]["spills"]
    assert mid["values"] == []                   # no pressure spill
    assert mid["convention"]["save_bytes"] == mid["convention"]["restore_bytes"] == 4
    assert rows["mid"]["convention"]["save_restore_bytes"] == 8


TRITON_MM = DATA / "explain" / "triton_matmul_sm80.ptx"


def test_triton_report_and_would_spill_on_shipped_ptx():
    from ptxalloc import triton as pt

    text = TRITON_MM.read_text()
    (row,) = pt.report(text)
    assert row["name"] == "matmul_kernel" and row["occupancy"]["block_size"] == 128
    assert row["peak"]["source"]["file"].endswith("triton_matmul.py")
    max_live = row["max_live"]["registers"]
    assert max_live > 255 and pt.would_spill(text, 255)

    class Compiled:                 # what triton.compile returns, as far as ptxalloc looks
        asm = {"ptx": (DATA / "hand" / "sched_wmma.ptx").read_text()}
    # scheduled, 56 registers live at most (tests/unit/test_schedule.py)
    assert not pt.would_spill(Compiled(), 64) and pt.would_spill(Compiled(), 48)
    with pytest.raises(TypeError):
        pt.report(42)


def test_triton_compiles_without_a_gpu_and_is_explained():
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from ptxalloc import triton as pt

    @triton.jit
    def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n) * 3.0, mask=i < n)

    k = triton.compile(ASTSource(fn=scale, signature={"x_ptr": "*fp32", "y_ptr": "*fp32",
                                                      "n": "i32"}, constexprs={"BLOCK": 256}),
                       target=GPUTarget("cuda", 80, 32))
    (row,) = pt.report(k, lines=True)
    assert any(s["file"].endswith(".py") for s in row["source_lines"])
    assert not pt.would_spill(k, 255)


def _reference_lines(a) -> dict[int, tuple[int, int, int]]:
    """Per PTX line (registers, predicates, first instruction id), by the definition: the most
    over the line's instructions, a block's first instruction carrying its live-in figures."""
    import math
    p = a.pressure
    entry = {b.first: b.id for b in a.cfg.blocks if b.instrs}
    out: dict[int, tuple[int, int, int]] = {}
    for i, ins in enumerate(a.cfg.instrs):
        regs, preds = p.gpr[i], p.pred[i]
        if i in entry:
            regs = max(regs, p.entry_gpr[entry[i]])
            preds = max(preds, p.entry_pred[entry[i]])
        r0, p0, first = out.get(ins.line, (0, 0, i))
        out[ins.line] = (max(r0, math.ceil(regs)), max(p0, preds), first)
    return out


@pytest.mark.parametrize("pair_lines", [False, True])
def test_line_pressure_one_or_several_instructions_a_line(pair_lines):
    """One instruction a line (the common case, read without grouping) and two a line (as
    ``analyze`` sees statements joined on one line) give the definition's figures."""
    from ptxalloc.analysis import analyze_function
    from ptxalloc.analysis.line_pressure import line_pressure
    from ptxalloc.ptx import parse_file
    from ptxalloc.target.sm import profile_for_module

    module = parse_file(str(DATA / "triton" / "sm80_layer_norm.ptx"))
    fn = module.functions[0]
    if pair_lines:      # instructions 2k and 2k+1 on one line
        for i, ins in enumerate(s for s in fn.body if hasattr(s, "defs")):
            ins.line = 1000 + i // 2
    a = analyze_function(fn, profile_for_module(None, module))
    per_line = line_pressure(a.cfg, a.pressure, {})
    want = _reference_lines(a)
    assert per_line.ptx_lines == sorted(want)
    assert [(x.registers, x.predicates, x.instructions[0]) for x in per_line.lines] == \
        [want[ln] for ln in sorted(want)]
    assert sum(per_line.histogram.values()) == len(a.cfg.instrs)
    assert max(per_line.registers) == a.pressure.max_live
    assert per_line.peaks[0]["registers"] == a.pressure.max_live
