"""Loop-carried pointer families as induction variables on the corpus (issue 13): on the corpus
files where the pass finds a family (nine files of nvcc's and gpuocelot's PTX), every record
is accepted by the validator, and with the rewrite forced (kept whatever MaxLive says, so the
rewriting itself is exercised, not only the one function where it pays) every allocation
(briggs at K = 32, fat-point at K = 255) is proven through the whole chain from the original
file (``verify_modules``, what ``ptxalloc verify ORIGINAL ALLOCATED`` runs) and assembles with
ptxas.

Skipped where ``../shared/corpus`` is absent.
"""

from __future__ import annotations

import pytest

from conftest import assert_chain_proven_and_assembles, corpus_files, corpus_root
from ptxalloc.alloc.driver import Options
from ptxalloc.passes import induction
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse_file
from ptxalloc.verify.induction import check_families

pytestmark = pytest.mark.corpus

#: The corpus files where ``find_families`` finds a family (a scan of every file ptxas accepts).
WITH_FAMILIES = (
    "gpuocelot/tests/ptx/parboil/largerBlocks.ptx",
    "gpuocelot/tests/ptx/rodinia/find_ellipse_kernel.ptx",
    "gpuocelot/tests/ptx/rodinia/hwt.ptx",
    "gpuocelot/tests/ptx/sdk2.2/BlackScholes.ptx",
    "gpuocelot/tests/ptx/sdk2.2/MonteCarlo_SM10.ptx",
    "gpuocelot/tests/ptx/sdk2.2/MonteCarlo_SM13.ptx",
    "gpuocelot/tests/ptx/sdk2.2/scalarProd.ptx",
    "gpuocelot/tests/ptx/sdk2.2/simpleCUFFT.ptx",
    "nvcc/mykernels_sm90.ptx",
)


def _params():
    known = {f["path"]: f for f in corpus_files()}
    if not known:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/corpus is absent"))]
    return [pytest.param(known[p], id=p) for p in WITH_FAMILIES if p in known]


@pytest.mark.parametrize("entry", _params())
def test_families_found_are_accepted_by_the_validator(entry):
    module = parse_file(str(corpus_root() / entry["path"]))
    found = 0
    for fn in module.functions:
        got = induction.induction_function(fn)
        if got is not None:
            check_families(fn, got.families)
            found += len(got.families)
    assert found


@pytest.mark.ptxas
@pytest.mark.parametrize("allocator,k", [("briggs", 32), ("fatpoint", 255)])
@pytest.mark.parametrize("entry", _params())
def test_forced_rewrite_proven_from_the_original_and_assembles(entry, allocator, k,
                                                               monkeypatch):
    monkeypatch.setattr(induction, "worth_it", lambda *args: True)
    module = parse_file(str(corpus_root() / entry["path"]))
    options = Options(allocator=allocator, knobs={"induction": 1})
    res = allocate_module(module, k, allocator, options=options)
    assert "induction=1" in res.ptx
    assert {f.verified for f in res.functions} == {True}
    assert_chain_proven_and_assembles(module, res, entry["ptxas_arch"])
