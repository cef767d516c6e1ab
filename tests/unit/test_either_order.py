"""The schedule or the code as written, whichever spills less (issue 13; ``schedule`` knob at
2, :func:`ptxalloc.pipeline.keep_cheaper_order`, after seed 004's per-class driver keeping the
best of its attempts): on Triton's softmax (tests/data/triton) the order as written spills
less at K = 16 and is kept, its output carries no schedule record and is proven from the
original file and assembled (at K = 24 it spills nothing either way since epilogue addresses
are formed at their stores: 16 here); on a vector kernel the scheduled order spills less and is kept,
proven through its ``//@schedule`` record; nothing is allocated twice where the scheduled code
does not spill, or with the knob at 1."""

from __future__ import annotations

import json

import pytest

from conftest import DATA
from ptxalloc import pipeline, ptxas
from ptxalloc.cli import main
from ptxalloc.pipeline import allocate, spill_bytes
from ptxalloc.ptx import parse
from ptxalloc.verify import parse_allocated, verify_modules

SOFTMAX = DATA / "triton" / "sm80_softmax.ptx"
VECTORS = DATA / "vectors_sm80.ptx"


def proven_and_assembled(path, res, tmp_path, arch="sm_80"):
    """``res`` proven from ``path`` through every record it carries, by the API and by
    ``ptxalloc verify ORIGINAL ALLOCATED``, and assembled by ptxas."""
    verify_modules(parse(path.read_text(), str(path)), parse_allocated(res.ptx, "alloc.ptx"))
    out = tmp_path / "allocated.ptx"
    out.write_text(res.ptx)
    assert main(["verify", str(path), str(out)]) == 0
    if not ptxas.available():
        pytest.skip("ptxas is not on the PATH")
    assembled = ptxas.assemble(res.ptx, arch)
    assert assembled.ok, assembled.output


def test_the_order_as_written_is_kept_where_it_spills_less(tmp_path):
    text = SOFTMAX.read_text()
    scheduled = allocate(text, 16, knobs={"schedule": 1}, filename=str(SOFTMAX)).functions[0]
    written = allocate(text, 16, knobs={"schedule": 0}, filename=str(SOFTMAX)).functions[0]
    res = allocate(text, 16, filename=str(SOFTMAX))
    f = res.functions[0]
    assert spill_bytes(written) < spill_bytes(scheduled)
    assert f.extra["order"] == {"kept": "as written",
                                "spill_bytes_scheduled": spill_bytes(scheduled),
                                "registers_scheduled": scheduled.registers,
                                "spill_bytes_as_written": spill_bytes(written),
                                "registers_as_written": written.registers}
    assert spill_bytes(f) == spill_bytes(written)
    assert any(n.startswith("kept the as written code: scheduled, it spills")
               for n in f.notes)
    # the output's records are the kept pipeline's: no schedule record, no schedule report
    assert "//@schedule" not in res.ptx and "schedule=1" not in res.ptx
    assert "schedule" not in f.extra
    assert f.verified
    proven_and_assembled(SOFTMAX, res, tmp_path)


def test_the_scheduled_order_is_kept_where_it_spills_less(tmp_path):
    text = VECTORS.read_text()
    res = allocate(text, 16, filename=str(VECTORS))
    f = res.functions[0]
    order = f.extra["order"]
    assert order["kept"] == "scheduled"
    assert order["spill_bytes_scheduled"] == spill_bytes(f) < order["spill_bytes_as_written"]
    assert f.extra["schedule"]["moved"] > 0
    assert "//@schedule" in res.ptx and "schedule=1" in res.ptx
    proven_and_assembled(VECTORS, res, tmp_path)


def test_the_report_says_which_order_was_kept(tmp_path, capsys):
    out = tmp_path / "out.ptx"
    assert main(["allocate", str(SOFTMAX), "--registers", "16", "-v", "-o", str(out)]) == 0
    assert "kept the as written code: scheduled, it spills" in capsys.readouterr().out
    report = tmp_path / "report.json"
    assert main(["allocate", str(SOFTMAX), "--registers", "16", "--json", str(report), "-o",
                 str(out)]) == 0
    row = json.loads(report.read_text())["functions"][0]
    assert row["order"]["kept"] == "as written"


def count_allocations(monkeypatch) -> list:
    calls = []
    real = pipeline._allocate_to

    def counting(fn, *args, **kwargs):
        calls.append(fn.name)
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(pipeline, "_allocate_to", counting)
    return calls


def test_nothing_is_allocated_twice_without_spills(monkeypatch):
    calls = count_allocations(monkeypatch)
    res = allocate(SOFTMAX.read_text(), 255, filename=str(SOFTMAX))
    f = res.functions[0]
    assert spill_bytes(f) == 0 and f.extra["schedule"]["moved"] > 0
    assert calls == [f.name] and "order" not in f.extra


def test_the_knob_at_1_keeps_the_schedule_without_a_second_allocation(monkeypatch):
    calls = count_allocations(monkeypatch)
    res = allocate(SOFTMAX.read_text(), 16, knobs={"schedule": 1}, filename=str(SOFTMAX))
    f = res.functions[0]
    assert spill_bytes(f) > 0 and calls == [f.name]
    assert "order" not in f.extra and "//@schedule" in res.ptx
    # at 2 (the default) the same function is allocated twice
    calls.clear()
    allocate(SOFTMAX.read_text(), 16, filename=str(SOFTMAX))
    assert calls == [f.name, f.name]


def test_callee_saved_saves_alone_do_not_allocate_twice(monkeypatch):
    """calls_sm80's kernel saves callee-saved registers (spill bytes) but spills no value: no
    order changes that, and it is allocated once."""
    path = DATA / "calls_sm80.ptx"
    calls = count_allocations(monkeypatch)
    res = allocate(path.read_text(), filename=str(path))
    f = next(f for f in res.functions if f.name == "_Z7k_callsPiPKiPKxd")
    assert spill_bytes(f) > 0 and f.spilled_values == 0 and f.extra["schedule"]["moved"] > 0
    assert calls.count(f.name) == 1 and "order" not in f.extra


def test_a_function_above_the_size_budget_is_allocated_once(monkeypatch):
    """The second allocation is a compile-time cost: above SECOND_ORDER_MAX_INSTRUCTIONS
    (as written) the scheduled order is kept without trying the other."""
    calls = count_allocations(monkeypatch)
    n = len(parse(SOFTMAX.read_text()).functions[0].instructions())
    monkeypatch.setattr(pipeline, "SECOND_ORDER_MAX_INSTRUCTIONS", n - 1)
    res = allocate(SOFTMAX.read_text(), 16, filename=str(SOFTMAX))
    f = res.functions[0]
    assert spill_bytes(f) > 0 and calls == [f.name]
    assert "order" not in f.extra and "//@schedule" in res.ptx
    monkeypatch.setattr(pipeline, "SECOND_ORDER_MAX_INSTRUCTIONS", n)
    calls.clear()
    allocate(SOFTMAX.read_text(), 16, filename=str(SOFTMAX))
    assert calls == [f.name, f.name]
