"""Corpus conformance of the analyses (issue: target model and analyses): every function of
every file ptxas accepts is analysed — CFG, liveness, interference, tuples, pressure, spill
costs — without error, with sane figures. ``bench/maxlive_vs_ptxas.py`` prints the distribution
of MaxLive next to ptxas's "Used N registers"."""

from __future__ import annotations

import math

import pytest

from conftest import corpus_params, corpus_root
from interference_reference import expected_adjacency
from ptxalloc.analysis import analyze_function
from ptxalloc.ptx import parse_file
from ptxalloc.target.sm import profile_for


@pytest.mark.corpus
@pytest.mark.parametrize("entry", corpus_params())
def test_every_function_analyses(entry):
    module = parse_file(str(corpus_root() / entry["path"]))
    sm = profile_for(None, module.sm)
    for fn in module.functions:
        a = analyze_function(fn, sm)
        n = len(fn.regs)
        if a.pressure.max_regs:
            assert a.pressure.peak.live                 # MaxLive names the values at its peak
        assert len(a.costs) == n and all(c >= 0 and not math.isnan(c) for c in a.costs)
        stats = a.graph.statistics()
        assert stats.nodes == n and 0.0 <= stats.density <= 1.0
        # the graph is the one built edge by edge from the live sets
        assert a.graph.adj == expected_adjacency(fn, a.cfg, a.liveness, a.graph.pred_mask,
                                                 a.graph.gpr_mask)
        # MaxLive is the largest pressure anywhere, and the peak's live set is where it is
        if a.pressure.gpr:
            assert a.pressure.max_regs >= max(a.pressure.gpr)
        assert a.liveness.entry_live >> n == 0          # only the function's own registers
