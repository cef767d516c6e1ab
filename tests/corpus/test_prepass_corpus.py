"""Seed 004's two pre-passes on the corpus (issue 17): on every 10th corpus file ptxas accepts,
and on every corpus file that declares a ``.local`` array, the validators accept
what HoistInvariants and ConvertMemoryToRegisterOrUniform do to each function (replayed from
the ``//@hoist``/``//@promote`` record alone), the allocation with both passes on (briggs at the
default budget) is proven through the whole chain from the original file
(``verify_modules(original, allocated)``, what ``ptxalloc verify ORIGINAL ALLOCATED`` runs),
and the output assembles with ptxas (a file where neither pass changes anything is skipped
there: the other corpus tests allocate it).

Skipped where ``../shared/corpus`` is absent.
"""

from __future__ import annotations

import re

import pytest

from conftest import assert_chain_proven_and_assembles, corpus_files, corpus_root
from ptxalloc.alloc.driver import Options
from ptxalloc.alloc.output import hoist_lines, promote_lines
from ptxalloc.ir.instruction import COMMENT, Raw
from ptxalloc.passes.hoist import hoist_function
from ptxalloc.passes.promote import promote_function
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse_file
from ptxalloc.verify.hoist import hoisted_original
from ptxalloc.verify.promote import promoted_original

pytestmark = pytest.mark.corpus

_LOCAL = re.compile(r"^\s*\.local\s", re.M)


def _params():
    files = corpus_files()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/corpus is absent"))]
    root = corpus_root()
    chosen = {f["path"]: f for f in files[::10]}
    for f in files:
        if _LOCAL.search((root / f["path"]).read_text(errors="replace")):
            chosen.setdefault(f["path"], f)
    return [pytest.param(f, id=p) for p, f in sorted(chosen.items())]


def _render(fn) -> list[str]:
    return [i.render(fn.regs.names.__getitem__) for i in fn.instructions()]


def _record(fn, lines: list[str]):
    fake = fn.copy()
    fake.body = [Raw(COMMENT, line) for line in lines] + fake.body
    return fake


@pytest.mark.parametrize("entry", _params())
def test_the_validators_accept_what_the_passes_do(entry):
    module = parse_file(str(corpus_root() / entry["path"]))
    for fn in module.functions:
        h = hoist_function(fn)
        if h is not None:
            replayed = hoisted_original(fn, _record(fn, hoist_lines(h.groups)))
            assert _render(replayed) == _render(h.function)
        p = promote_function(fn)
        if p is not None:
            replayed = promoted_original(fn, _record(fn, promote_lines(p.arrays)))
            # the same rewrite (the slot registers' names are each module's own)
            assert [i.opcode for i in replayed.instructions()] == \
                [i.opcode for i in p.function.instructions()]
            assert len(replayed.regs) == len(p.function.regs) > len(fn.regs)


@pytest.mark.ptxas
@pytest.mark.parametrize("entry", _params())
def test_hoisted_and_promoted_allocation_proven_from_the_original_and_assembles(entry):
    path = str(corpus_root() / entry["path"])
    module = parse_file(path)
    if not any(hoist_function(fn) or promote_function(fn) for fn in module.functions):
        pytest.skip("neither pass changes a function of this file")
    options = Options(allocator="briggs", knobs={"hoist": 1, "promote": 1})
    res = allocate_module(module, None, "briggs", options=options)
    assert {f.verified for f in res.functions} == {True}
    assert_chain_proven_and_assembles(module, res, entry["ptxas_arch"])
