"""Uniform registers on the corpus (issue 17): every 10th corpus file ptxas accepts, allocated
with ``uniform`` at its own target when that is sm_75 or later, else at sm_80 (the uniform
files need sm_75), by briggs at ptxas's default budget and by fat-point at K = 32: every
allocation is proven from the original file (``verify_modules``, what ``ptxalloc verify``
runs, including the checker's own uniformity check), the output assembles with ptxas, no
function uses more than UR0-UR62 and UP0-UP6, the values placed never raise R's MaxLive, and
the sample as a whole moves pressure from R to UR.

Skipped where ``../shared/corpus`` is absent.
"""

from __future__ import annotations

import re

import pytest

from conftest import assert_justified_refusal, corpus_files, corpus_root
from ptxalloc import ptxas
from ptxalloc.alloc.driver import Options
from ptxalloc.errors import AllocationError
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse_file
from ptxalloc.target.sm import profile_for_module
from ptxalloc.verify import parse_allocated, verify_modules

pytestmark = pytest.mark.corpus

SAMPLE = corpus_files()[::10]


def _params():
    if not SAMPLE:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/corpus is absent"))]
    return [pytest.param(f, id=f["path"]) for f in SAMPLE]


def _arch(module) -> str:
    own = profile_for_module(None, module)
    return own.name if own.sm >= 75 else "sm_80"


@pytest.mark.ptxas
@pytest.mark.parametrize("allocator,k", [("briggs", None), ("fatpoint", 32)])
@pytest.mark.parametrize("entry", _params())
def test_uniform_allocation_proven_and_assembles(entry, allocator, k):
    module = parse_file(str(corpus_root() / entry["path"]))
    arch = _arch(module)
    try:
        res = allocate_module(module, k, allocator, arch, options=Options(allocator=allocator,
                                                                          uniform=True))
    except AllocationError as e:
        assert_justified_refusal(str(e), k)
        return
    assert {f.verified for f in res.functions} == {True}
    verify_modules(module, parse_allocated(res.ptx, "allocated.ptx"))
    for f in res.functions:
        assert f.uniform_registers <= 63 and f.uniform_predicates <= 7
        info = f.extra.get("uniform_values")
        if info is not None:
            assert info["max_live_registers"] <= f.max_live_legalized
    assert not re.search(r"%URD?(6[3-9]|[7-9]\d|\d{3})\b|%UP([7-9]|\d\d)\b", res.ptx)
    if ptxas.available():
        got = ptxas.assemble(res.ptx, ptxas.arch_for(module.sm) if arch != "sm_80" else arch)
        assert got.ok, got.output[:2000]


def test_sample_moves_pressure_from_r_to_ur():
    if not SAMPLE:
        pytest.skip("../shared/corpus is absent")
    before = after = placed = 0
    for entry in SAMPLE[::3]:
        module = parse_file(str(corpus_root() / entry["path"]))
        res = allocate_module(module, None, "briggs", _arch(module), verify=False,
                              options=Options(uniform=True))
        for f in res.functions:
            info = f.extra.get("uniform_values")
            if info is not None:
                before += f.max_live_legalized
                after += info["max_live_registers"]
                placed += info["placed"]
    assert placed > 0 and after < before
