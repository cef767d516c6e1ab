"""``analyze`` and ``allocate`` name MaxLive alike (issue 11): ``max_live`` is the function as
written — the number ``analyze`` reports — and ``max_live_legalized`` the MaxLive of the copy
the allocator starts from, which its rewriting can raise: tuple legalization's copies (zluda's
interleaved mma), the convention's binding copies (gpuocelot's complex.ptx). (The mha kernel's
315 as written against 318 legalized came from charging every in-flight wgmma register to its
wait; the in-flight dataflow of alloc/asynchrony.py no longer raises it.) Both appear in the
JSON report and in ``allocate -v``. zluda's kernel is taken with the schedule's first order
alone (``ScheduleStoresLast=0``): by default the stores-last order stores each ``mma``'s
results right after it and the copy allocated needs 18, below the 25 as written."""

from __future__ import annotations

import re

import pytest

from conftest import corpus_root
from ptxalloc.alloc.driver import Options
from ptxalloc.analysis import analyze_function
from ptxalloc.cli import main
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse_file
from ptxalloc.target.sm import profile_for

CASES = [
    ("zluda/ptx/src/test/spirv_run/mma_m16n8k32_s32_s8_s8_s32_interleave.ptx",
     "mma_m16n8k32_s32_s8_s8_s32_interleave", 255, {"ScheduleStoresLast": 0}),
    ("gpuocelot/tests/ptx/unstructured/complex.ptx", "nv_mts_tq_bind", 15, {}),
]


@pytest.mark.corpus
@pytest.mark.parametrize("path,name,k,knobs", CASES, ids=[c[1][:40] for c in CASES])
def test_allocate_reports_the_analyzed_max_live_and_names_the_legalized_one(path, name, k,
                                                                           knobs, capsys):
    root = corpus_root()
    if root is None:
        pytest.skip("../shared/corpus is absent")
    file = str(root / path)
    module = parse_file(file)
    fn = module.function(name)
    written = analyze_function(fn, profile_for(None, module.sm)).pressure.max_live
    (row,) = [r for r in allocate_module(module, k, function=name,
                                         options=Options(knobs=knobs)).report()["functions"]
              if r["name"] == name]
    assert row["max_live"]["registers"] == written
    assert row["max_live_legalized"] > written          # these functions are the ones it differs
    assert row["verified"] is True
    assert main(["analyze", file, "--function", name]) == 0
    assert f"MaxLive {written} registers" in capsys.readouterr().out
    assert main(["allocate", file, "--function", name, "--registers", str(k), "-v",
                 "-o", "-"] + [f"--knob={n}={v}" for n, v in knobs.items()]) == 0
    err = capsys.readouterr()
    text = err.err + err.out
    assert re.search(rf"\(MaxLive {written}, {row['max_live_legalized']} legalized\)", text), text


@pytest.mark.corpus
def test_the_stores_last_order_brings_zluda_interleaved_mma_below_its_max_live():
    """By default the copy allocated of zluda's interleaved mma kernel needs 18 registers, 25 as
    written, 28 after tuple legalization with the schedule's first order alone: the stores-last
    order stores each ``mma``'s four results right after it."""
    root = corpus_root()
    if root is None:
        pytest.skip("../shared/corpus is absent")
    path, name, k, _ = CASES[0]
    module = parse_file(str(root / path))
    (row,) = [r for r in allocate_module(module, k, function=name).report()["functions"]
              if r["name"] == name]
    assert (row["max_live"]["registers"], row["max_live_legalized"]) == (25, 18)
    assert row["verified"] is True
