"""Corpus conformance of the front end (issue: PTX front end): every file ptxas accepts
parses, re-emits to the same text up to whitespace, and — where ptxas is on the PATH — the
re-emitted file assembles with the same per-function registers, spill bytes and stack frame
as MANIFEST.json records for the original."""

from __future__ import annotations

import re

import pytest

from conftest import corpus_params, corpus_root
from ptxalloc import ptxas
from ptxalloc.ir.cfg import CFG
from ptxalloc.ptx import emit_module, parse_file

_WS = re.compile(r"\s+")


@pytest.mark.corpus
@pytest.mark.parametrize("entry", corpus_params())
def test_parse_emit_assemble(entry):
    path = corpus_root() / entry["path"]
    module = parse_file(str(path))
    # no warning on what ptxas accepts, but the one for a module with no function definition
    # (which ptxas then reports no function of)
    expected = ([] if module.functions or entry["ptxas"]["functions"]
                else ["no function in the module"])
    assert [w.message for w in module.warnings] == expected, [str(w) for w in module.warnings]
    for fn in module.functions:
        cfg = CFG(fn)
        assert len(cfg.instrs) == len(fn.instructions())
    out = emit_module(module)
    assert _WS.sub("", out) == _WS.sub("", path.read_text())
    if not ptxas.available():
        return
    result = ptxas.assemble(out, entry["ptxas_arch"])
    assert result.ok, result.output
    for want in entry["ptxas"]["functions"]:
        got = result.functions.get(want["name"])
        assert got is not None, f"ptxas reported no figures for {want['name']}"
        for key in ("registers", "spill_stores", "spill_loads", "stack"):
            if key in want:
                assert getattr(got, key) == want[key], (want["name"], key)
