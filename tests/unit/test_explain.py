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
