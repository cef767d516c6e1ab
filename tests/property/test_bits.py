"""``util.bits`` (the set bits of an int bitset, lowest first) on its three paths: peeling a
few bits, scanning the binary text, and numpy's unpacking of dense bitsets (issue 16)."""

from __future__ import annotations

import numpy
from hypothesis import given, settings, strategies as st

from ptxalloc import util

positions = st.sets(st.integers(min_value=0, max_value=5000), max_size=600)


def _mask(ps) -> int:
    return sum(1 << p for p in ps)


@settings(max_examples=200, deadline=None)
@given(positions)
def test_bits_lists_the_set_bits_in_order_without_numpy(ps):
    saved, util._np = util._np, None
    try:
        got = util.bits(_mask(ps))
    finally:
        util._np = saved
    assert got == sorted(ps)


@settings(max_examples=200, deadline=None)
@given(positions)
def test_bits_lists_the_set_bits_in_order_with_numpy(ps):
    saved, util._np = util._np, numpy
    try:
        got = util.bits(_mask(ps))
    finally:
        util._np = saved
    assert got == sorted(ps) and all(type(p) is int for p in got)


def test_numpy_is_imported_only_after_enough_dense_bits(monkeypatch):
    monkeypatch.setattr(util, "_np", None)
    monkeypatch.setattr(util, "_dense_scanned", 0)
    dense = (1 << 200) - 1
    util.bits(dense)
    assert util._np is None                      # one dense row does not repay the import
    for _ in range(util._NUMPY_AFTER // 200 + 1):
        util.bits(dense)
    assert util._np is numpy
    assert util.bits(dense) == list(range(200))


edge_lists = st.integers(min_value=1, max_value=300).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1),
                                                       st.integers(0, n - 1)), max_size=800)))


@settings(max_examples=150, deadline=None)
@given(edge_lists, st.booleans())
def test_transpose_or_adds_every_reverse_edge(graph, with_numpy):
    n, edges = graph
    rows = [0] * n
    for u, v in edges:
        rows[u] |= 1 << v
    saved, util._np = util._np, (numpy if with_numpy else None)
    try:
        util.transpose_or(rows)
    finally:
        util._np = saved
    want = [0] * n
    for u, v in edges:
        want[u] |= 1 << v
        want[v] |= 1 << u
    assert rows == want


def test_transpose_or_over_several_bands_of_rows():
    """A dense graph wider than one band (2048 rows) through numpy: the same as the walk."""
    import random
    rnd = random.Random(16)
    n = 2600
    rows = [rnd.getrandbits(n) & ~(1 << u) & ((1 << u) - 1) for u in range(n)]  # u -> v < u
    want = list(rows)
    saved, util._np = util._np, None
    try:
        for u in range(n):                       # the plain walk, by hand
            for v in range(u):
                if rows[u] >> v & 1:
                    want[v] |= 1 << u
        util._np = numpy
        util.transpose_or(rows)
    finally:
        util._np = saved
    assert rows == want


@settings(max_examples=150, deadline=None)
@given(positions, st.integers(min_value=0, max_value=64))
def test_set_positions_are_flatnonzeros_of_the_unpacked_bits(ps, pad):
    """The boolean view's ``nonzero`` (what ``bits`` and Briggs's dense degrees use) gives
    the positions ``flatnonzero`` gives, as the same integer type, trailing zero bytes or not."""
    x = _mask(ps)
    raw = numpy.frombuffer(x.to_bytes((x.bit_length() + 7) // 8 + pad, "little"), numpy.uint8)
    unpacked = numpy.unpackbits(raw, bitorder="little")
    got = util.set_positions(numpy, unpacked)
    want = numpy.flatnonzero(unpacked)
    assert got.dtype == want.dtype and got.tolist() == want.tolist() == sorted(ps)


@settings(max_examples=300, deadline=None)
@given(positions, st.integers(min_value=1, max_value=40))
def test_blocked_starts_are_the_starts_whose_units_meet_the_forbidden_ones(ps, units):
    """``units.blocked_starts`` (the OR of ``forbidden >> j`` for j < units, in log2 shifts,
    and directly for 16- and 32-bit shapes: issue 16) on every width up to a 20-register
    tuple."""
    from ptxalloc.target.units import blocked_starts
    forbidden = _mask(ps)
    want = 0
    for j in range(units):
        want |= forbidden >> j
    assert blocked_starts(forbidden, units) == want
