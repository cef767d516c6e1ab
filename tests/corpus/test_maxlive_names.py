"""``analyze`` and ``allocate`` name MaxLive alike (issue 11): ``max_live`` is the function as
written — the number ``analyze`` reports — and ``max_live_legalized`` the MaxLive of the copy
the allocator starts from, which its rewriting can raise: tuple legalization's copies (zluda's
interleaved mma), the convention's binding copies (gpuocelot's complex.ptx). (The mha kernel's
315 as written against 318 legalized came from charging every in-flight wgmma register to its
wait; the in-flight dataflow of alloc/asynchrony.py no longer raises it.) Both appear in the
JSON report and in ``allocate -v``."""

from __future__ import annotations

import re

import pytest

from conftest import corpus_root
from ptxalloc.analysis import analyze_function
from ptxalloc.cli import main
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse_file
from ptxalloc.target.sm import profile_for

CASES = [
    ("zluda/ptx/src/test/spirv_run/mma_m16n8k32_s32_s8_s8_s32_interleave.ptx",
     "mma_m16n8k32_s32_s8_s8_s32_interleave", 255),
    ("gpuocelot/tests/ptx/unstructured/complex.ptx", "nv_mts_tq_bind", 15),
]


@pytest.mark.corpus
@pytest.mark.parametrize("path,name,k", CASES, ids=[c[1][:40] for c in CASES])
def test_allocate_reports_the_analyzed_max_live_and_names_the_legalized_one(path, name, k,
                                                                           capsys):
    root = corpus_root()
    if root is None:
        pytest.skip("../shared/corpus is absent")
    file = str(root / path)
    module = parse_file(file)
    fn = module.function(name)
    written = analyze_function(fn, profile_for(None, module.sm)).pressure.max_live
    (row,) = [r for r in allocate_module(module, k, function=name).report()["functions"]
              if r["name"] == name]
    assert row["max_live"]["registers"] == written
    assert row["max_live_legalized"] > written          # these functions are the ones it differs
    assert row["verified"] is True
    assert main(["analyze", file, "--function", name]) == 0
    assert f"MaxLive {written} registers" in capsys.readouterr().out
    assert main(["allocate", file, "--function", name, "--registers", str(k), "-v",
                 "-o", "-"]) == 0
    err = capsys.readouterr()
    text = err.err + err.out
    assert re.search(rf"\(MaxLive {written}, {row['max_live_legalized']} legalized\)", text), text
