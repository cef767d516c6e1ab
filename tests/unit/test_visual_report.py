"""The visual report (issue 15): ``report`` writes one self-contained HTML page, ``graph`` the
interference graph in DOT, ``analyze --plot`` an SVG or PNG; the plot's sampling keeps every
peak. The page is opened in a real browser by tests/browser/test_report_browser.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import DATA, REPO
from ptxalloc.cli import main
from ptxalloc.report import html_report
from ptxalloc.report.pressure_plot import MAX_POINTS, occupancy_steps, sample
from ptxalloc.target.occupancy import occupancy
from ptxalloc.target.sm import profile_for

HAND = DATA / "explain" / "lines_hand.ptx"
TRITON = DATA / "explain" / "triton_matmul_sm80.ptx"
SAXPY = REPO / "examples" / "saxpy_poly.ptx"
# the per-line figures of lines_hand.ptx, counted by hand (tests/unit/test_explain.py)
from test_explain import HAND_LINES  # noqa: E402

# a copy whose two ends do not interfere (a move edge), and enough pressure to spill at K = 2
COPIES = """.version 7.0
.target sm_80
.address_size 64
.visible .entry copies(.param .u64 out)
{
	.reg .b32 %r<8>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %r1;
	add.s32 %r3, %r2, 7;
	mul.lo.s32 %r4, %r3, %r2;
	add.s32 %r5, %r4, %r3;
	st.global.u32 [%rd1], %r5;
	ret;
}
"""


def _report(tmp_path, src, *options) -> str:
    out = tmp_path / "report.html"
    assert main(["report", str(src), "-o", str(out), *map(str, options)]) == 0
    return out.read_text()


def _plot_data(page: str) -> list[dict]:
    return [json.loads(m.replace("<\\/", "</")) for m in re.findall(
        r'<script type="application/json" id="plot\d+-data">(.*?)</script>', page, re.S)]


def test_report_is_self_contained(tmp_path):
    page = _report(tmp_path, SAXPY, "--no-ptxas")
    # nothing is fetched: no external script, style, image or frame; the only URL is the SVG
    # namespace, which is a name, not a fetch
    assert re.findall(r"https?://[^\s\"']+", page) == ["http://www.w3.org/2000/svg"] * \
        page.count("<svg")
    assert not re.search(r"<(link|iframe|img)\b|\bsrc=|@import|url\(", page)
    # one section, one plot and one data island per function, in the module's order
    names = re.findall(r'<section class="function" id="fn\d+" data-name="([^"]+)"', page)
    assert names == ["_Z4polyPKfif", "_Z10saxpy_polyPfPKfS1_ifi"]
    data = _plot_data(page)
    plots = page.split('<svg xmlns="http://www.w3.org/2000/svg" class="plot"')[1:]
    assert len(data) == len(plots) == 2
    for d, svg in zip(data, plots):
        assert svg.count('<circle class="pt"') == len(d["lines"]) == len(d["live"]) > 0
        assert d["lines"] == sorted(d["lines"])


def test_report_source_view_has_every_line_with_its_count(tmp_path):
    page = _report(tmp_path, HAND, "--no-ptxas")
    rows = re.findall(r'<tr(?: class="[^"]*")?><td>(\d+)</td><td class="bar"><span '
                      r'style="width:(\d+)px"></span></td><td class="n">(\d+)/(\d+)</td>', page)
    assert {int(r[0]): (int(r[2]), int(r[3])) for r in rows} == HAND_LINES
    widths = {int(r[0]): int(r[1]) for r in rows}
    assert widths[22] == widths[25] == 120 and widths[20] == 96 and widths[29] == 0
    # one collapsible group per source line: hand.cu:3, :4, :5 (two columns), the inlined
    # helpers.cuh:9, hand.cu:7
    groups = re.findall(r'<details class="src" open><summary>([^<]*)<', page)
    assert groups == ["hand.cu:3:5", "hand.cu:4:5", "hand.cu:5:10",
                      "helpers.cuh:9:3 (inlined at hand.cu:6:7)", "hand.cu:7:5"]
    # the hover data names the live values: after the mul at line 22, rd1 r1 r2 r3
    d = _plot_data(page)[0]
    at = d["lines"].index(22)
    assert [d["names"][k] for k in d["live"][at]] == ["%r1", "%r2", "%r3", "%rd1"]


def test_report_marks_spills_and_explains_them(tmp_path):
    page = _report(tmp_path, SAXPY, "--registers", "8", "--no-ptxas")
    assert '<path class="mark store"' in page and '<path class="mark reload"' in page
    assert re.search(r"<h3>Spills \(\d+ values\)</h3>", page)
    assert "pressure " in page and "&gt; budget 8" in page        # a reason per value
    assert '<tr class="spill' in page                           # coloured source rows
    assert page.count('<line class="budget"') == 2 and "K = 8" in page


def test_report_occupancy_table_matches_the_calculator(tmp_path):
    page = _report(tmp_path, HAND, "--no-ptxas")
    table = page.split('<table class="occupancy">', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'<td class="num">(\d+)</td><td>(\d+) warps', table)
    sm = profile_for("sm_80")
    assert [int(b) for b, _ in rows] == list(html_report.BLOCK_SIZES)
    for b, warps in rows:
        assert int(warps) == occupancy(sm, 5, int(b)).warps_per_sm      # MaxLive 5


@pytest.mark.ptxas
def test_report_puts_ptxas_beside_the_allocation(tmp_path):
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas is not on the PATH")
    page = _report(tmp_path, HAND)
    from ptxalloc.ptxas import assemble_file
    theirs = assemble_file(str(HAND), "sm_80").functions["hand"]
    row = re.search(r"<tr><td>registers</td><td class=\"num\">(\d+)</td><td class=\"num\">"
                    r"(\d+)</td>", page)
    assert int(row.group(2)) == theirs.registers


def test_long_functions_are_capped(tmp_path, monkeypatch):
    monkeypatch.setattr(html_report, "MAX_ROWS", 100)
    monkeypatch.setattr(html_report, "MAX_POINTS", 50)
    page = _report(tmp_path, TRITON, "--no-ptxas", "--no-verify")
    rows = [int(x) for x in re.findall(r'<tr(?: class="[^"]*")?><td>(\d+)</td><td class="bar">',
                                       page)]
    assert len(rows) == 100 and re.search(r"\d+ more lines left out", page)
    # the hundred around the highest line (MaxLive 523 first at PTX line 1927)
    assert rows == sorted(rows) and rows[0] < 1927 < rows[-1]
    assert f"PTX lines {rows[0]}-{rows[-1]}" in page
    d = _plot_data(page)[0]
    assert len(d["lines"]) == 50
    # sampling keeps the peak: MaxLive 523 is a point of the plot
    assert max(d["registers"]) == 523
    assert "(50 of " in page


@given(st.lists(st.integers(0, 300), min_size=0, max_size=500), st.integers(1, 60))
def test_sampling_keeps_every_maximum_in_order(values, count):
    keep = sample(values, count)
    assert keep == sorted(set(keep)) and len(keep) == min(len(values), count)
    if values:
        assert max(values[i] for i in keep) == max(values)
    if len(values) > count:             # each run of the cut keeps its own highest
        for k, i in enumerate(keep):
            lo, hi = k * len(values) // count, (k + 1) * len(values) // count
            assert lo <= i < hi and values[i] == max(values[lo:hi])


def test_occupancy_steps_are_where_warps_fall():
    sm = profile_for("sm_80")
    steps = occupancy_steps(sm, 256, 255)
    assert steps and all(a["registers"] < b["registers"] for a, b in zip(steps, steps[1:]))
    for s in steps:
        r = s["registers"]
        assert occupancy(sm, r + 1, 256).warps_per_sm < occupancy(sm, r, 256).warps_per_sm
        assert s["occupancy"] == round(occupancy(sm, r, 256).fraction, 4)
    assert len(steps) == len({occupancy(sm, r, 256).warps_per_sm for r in range(1, 256)}) - 1


def test_report_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 7.0\n.target sm_80\n.visible .entry k()\n{\n\tadd.s32 %r1, ;\n}\n")
    assert main(["report", str(bad), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert re.match(r"ptxalloc: .*bad\.ptx:\d+:\d+: ", err) and "\n" not in err
    assert not (tmp_path / "r.html").exists()
    assert main(["report", str(tmp_path / "absent.ptx"), "-o", str(tmp_path / "r.html")]) == 2
    assert main(["report", str(HAND), "-o", str(HAND)]) == 2        # would destroy the input


def _graph(tmp_path, text: str, *options) -> str:
    src = tmp_path / "in.ptx"
    src.write_text(text)
    out = tmp_path / "g.dot"
    assert main(["graph", str(src), "-o", str(out), *options]) == 0
    return out.read_text()


def _nodes_and_edges(dot: str):
    nodes = dict(re.findall(r'^  (n\d+) \[label="([^"]*)"', dot, re.M))
    edges = re.findall(r'^  (n\d+) -- (n\d+)(?: \[style=("[^"]*"|\w+))?', dot, re.M)
    return nodes, edges


def test_graph_colours_by_register_and_dashes_moves(tmp_path):
    dot = _graph(tmp_path, COPIES, "--function", "copies")
    nodes, edges = _nodes_and_edges(dot)
    labels = {lab.split("\\n")[0]: lab.split("\\n")[1] for lab in nodes.values()}
    # the graph the allocator colored: the values as written and the copies recomputation
    # (on by default) made at their uses, %r1$rc0 for %r1 (passes/recompute.py)
    assert {name.split("$")[0] for name in labels} == {"%r1", "%r2", "%r3", "%r4", "%r5",
                                                       "%rd1"}
    # each copy is a dashed edge, bold: coalesced, both ends on one register
    moves = [(a, b, s) for a, b, s in edges if s]
    ends = [(nodes[a].split("\\n")[0], nodes[b].split("\\n")[0]) for a, b, _ in moves]
    assert ("%r1", "%r2") in ends and all("bold" in s for _, _, s in moves)
    assert all(labels[x] == labels[y] for x, y in ends)
    # interfering values never share a register (their fill follows the register)
    for a, b, style in edges:
        if not style:
            assert nodes[a].split("\\n")[1] != nodes[b].split("\\n")[1], (a, b)
    fill = dict(re.findall(r'^  (n\d+) \[.*fillcolor=("[^"]*")', dot, re.M))
    by_reg = {}
    for n, lab in nodes.items():
        by_reg.setdefault(lab.split("\\n")[1], set()).add(fill[n])
    assert all(len(f) == 1 for f in by_reg.values())


def test_graph_marks_the_spilled_values(tmp_path, capsys):
    dot = _graph(tmp_path, SAXPY.read_text(), "--function", "saxpy", "--registers", "8")
    marked = set(re.findall(r'label="([^"\\]+)\\n(?:spilled|remat)", shape=doubleoctagon', dot))
    assert main(["allocate", str(SAXPY), "--function", "saxpy", "--registers", "8", "-o",
                 str(tmp_path / "a.ptx"), "--json", str(tmp_path / "a.json")]) == 0
    report = json.loads((tmp_path / "a.json").read_text())["functions"][0]
    assert marked == {v["name"] for v in report["spills"]["values"]} and marked


def test_graph_is_accepted_by_graphviz(tmp_path):
    if shutil.which("dot") is None:
        if os.environ.get("PTXALLOC_REQUIRE_GRAPHVIZ"):
            pytest.fail("PTXALLOC_REQUIRE_GRAPHVIZ is set and Graphviz's dot is not on the PATH")
        pytest.skip("Graphviz's dot is not on the PATH (apt-get install graphviz)")
    for text, fn in ((COPIES, "copies"), (SAXPY.read_text(), "saxpy")):
        dot = _graph(tmp_path, text, "--function", fn, "--registers", "8")
        proc = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        svg = ET.fromstring(proc.stdout)
        nodes, _ = _nodes_and_edges(dot)
        drawn = [g for g in svg.iter("{http://www.w3.org/2000/svg}g")
                 if g.get("class") == "node"]
        assert len(drawn) == len(nodes) > 0


def test_graph_needs_a_known_function(tmp_path, capsys):
    assert main(["graph", str(SAXPY), "--function", "nosuch"]) == 2
    assert "nosuch" in capsys.readouterr().err


def test_analyze_plot_svg(tmp_path, capsys):
    out = tmp_path / "p.svg"
    assert main(["analyze", str(SAXPY), "--plot", str(out), "--registers", "20"]) == 0
    assert "MaxLive" in capsys.readouterr().out          # the text report still printed
    svg = ET.fromstring(out.read_text())
    ns = "{http://www.w3.org/2000/svg}"
    assert len([p for p in svg.iter(ns + "svg") if p.get("class") == "plot"]) == 2
    lines = [p for p in svg.iter(ns + "polyline") if p.get("class") == "registers"]
    assert len(lines) == 2
    assert len([b for b in svg.iter(ns + "line") if b.get("class") == "budget"]) == 2


def test_analyze_plot_png_or_a_clear_error(tmp_path, capsys, monkeypatch):
    out = tmp_path / "p.png"
    monkeypatch.setitem(sys.modules, "matplotlib", None)          # as if not installed
    assert main(["analyze", str(HAND), "--plot", str(out)]) == 2
    assert "pip install 'ptxalloc[plot]'" in capsys.readouterr().err
    assert not out.exists()
    monkeypatch.delitem(sys.modules, "matplotlib")
    pytest.importorskip("matplotlib")
    assert main(["analyze", str(HAND), "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_shows_a_refused_function_with_its_reason(tmp_path):
    page = _report(tmp_path, DATA / "tensor_sm80.ptx", "--registers", "15", "--no-ptxas")
    assert page.count('<section class="function"') == 2
    assert re.search(r"not allocated at budget 15: .*needs 24 registers at once", page)
    one = _report(tmp_path, DATA / "tensor_sm80.ptx", "--registers", "15", "--no-ptxas",
                  "--function", "k_wmma")
    names = re.findall(r'<section class="function" id="fn\d+" data-name="([^"]+)"', one)
    assert len(names) == 1 and "k_wmma" in names[0] and "not allocated at budget 15" in one


def test_a_failed_ptxas_run_is_named_by_its_error():
    from ptxalloc.ptx import parse_file
    from ptxalloc.ptxas import PtxasResult

    module = parse_file(str(HAND))
    failed = PtxasResult(False, 0.5, "ptxas x.ptx, line 3; warning : old\nptxas fatal   :  "
                         "32-Bit ABI is not supported\n")
    page = html_report.html_report(module, HAND.read_text(), profile_for("sm_80"),
                                   ptxas=failed)
    assert "ptxas failed on the input (ptxas fatal   :  32-Bit ABI is not supported)" in page
    assert "<td>registers</td>" not in page                # nothing allocated, no figures row


def test_report_of_empty_functions_and_to_standard_output(tmp_path, capsys):
    src = tmp_path / "empty.ptx"
    src.write_text(".version 7.0\n.target sm_80\n.address_size 64\n.visible .func empty()\n"
                   "{\n\tret;\n}\n.visible .entry k()\n{\n}\n")
    assert main(["report", str(src), "-o", "-", "--no-ptxas"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("<!DOCTYPE html>") and page.count('<section class="function"') == 2
    assert [len(d["lines"]) for d in _plot_data(page)] == [1, 0]
