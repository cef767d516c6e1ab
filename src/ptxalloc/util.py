"""Small shared helpers."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from collections.abc import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector.

    Parsing and analysing allocate hundreds of thousands of small objects; the cyclic
    collector would only walk them again and again (it costs a third of the run time on the
    largest corpus files). On the way out the objects that survived are moved to the
    collector's permanent generation (``gc.freeze``), so that the first collection afterwards
    does not walk them all either. Reference counting frees most objects as usual, but not all:
    some structures are cyclic (attn_bwd_d64.ptx leaves about 3,300 cyclic objects per
    allocation), and a frozen cycle is never collected: :func:`release_frozen_cycles`, called
    between files, collects them. The objects frozen are counted as the collector's own count
    of the youngest generation (``gc.get_count()``, reset by each freeze), never by asking for
    the frozen total: ``gc.get_freeze_count`` walks every frozen object.
    """
    global _frozen
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            _frozen += gc.get_count()[0]
            gc.freeze()
            gc.enable()


def release_frozen_cycles() -> None:
    """One full collection, the frozen objects included, once the objects :func:`gc_paused`
    froze since the last one outnumber those that survived it (and the two together reach
    ``_COLLECT_FROM``). Called before a file is read (:func:`ptxalloc.ptx.parse_file`), where
    a process that allocates file after file (a ``batch`` worker, a library user) has usually
    dropped the last file's objects, so the collection walks little beyond what survives: the
    heap stays bounded at a cost linear in what was allocated overall. Inside an allocation
    the whole file is alive, and a collection there walks it all (a ``batch`` of 41 corpus
    files 17.6 -> 19.1 s CPU when ``gc_paused`` collected on its way out)."""
    global _frozen, _collect_above
    if _frozen > _collect_above:
        gc.unfreeze()
        gc.collect()
        _frozen = len(gc.get_objects())
        gc.freeze()
        _collect_above = max(_COLLECT_FROM, 2 * _frozen)


_COLLECT_FROM = 500_000     # objects frozen before the first full collection
_collect_above = _COLLECT_FROM
_frozen = 0                 # objects frozen since the last full collection, as counted


_DENSE = 16                 # set bits from which numpy's unpacking beats the text scan
#                             (bool nonzero: 16 bits measured on renderer's and attn_bwd's own
#                             bitsets, docs/decisions.md "round 8"; 64 with uint8 nonzero)
_NUMPY_AFTER = 1_000_000    # dense bits scanned as text before numpy is worth importing
_dense_scanned = 0
_np = None


def bits(x: int) -> list[int]:
    """Positions of the set bits of a non-negative int bitset, lowest first.

    A few bits are peeled off one at a time; more are found by scanning the binary text, which
    costs one pass over the int instead of one per bit (profile: the interference graph's
    symmetrization on functions with thousands of registers). Dense bitsets (16 bits and more:
    Triton kernels' interference rows, large functions' live sets) are unpacked by numpy once
    a run has scanned enough of them to repay numpy's import (about 80 ms), so small inputs
    never import it."""
    count = x.bit_count()
    if count < 12:
        out = []
        while x:
            low = x & -x
            out.append(low.bit_length() - 1)
            x ^= low
        return out
    if count >= _DENSE:
        np = numpy_when_worth(count)
        if np is not None:
            raw = np.frombuffer(x.to_bytes((x.bit_length() + 7) // 8, "little"), np.uint8)
            return set_positions(np, np.unpackbits(raw, bitorder="little")).tolist()
    s = bin(x)
    top = len(s) - 1
    out = []
    find = s.find
    i = find("1", 2)
    while i >= 0:
        out.append(top - i)
        i = find("1", i + 1)
    out.reverse()
    return out


def set_positions(np, unpacked):
    """The positions of the ones of ``unpacked`` (numpy's ``unpackbits`` of a bitset, one uint8
    0 or 1 per bit), ascending, as an int array: the array viewed as booleans, whose
    ``nonzero`` numpy answers 4-5x faster than a uint8 array's (``timeit``, 5,000 bits of 40 to
    1,500 set: 2.5-7.8 us against 23-38 us, numpy 2.4)."""
    return unpacked.view(np.bool_).nonzero()[0]


def numpy_when_worth(work: int):
    """numpy, once this run has met enough dense bitset work (``work``: set bits, counted
    here) to repay its import; None before that (the caller does the work in plain Python)."""
    global _dense_scanned, _np
    if _np is None:
        _dense_scanned += work
        if _dense_scanned > _NUMPY_AFTER:
            import numpy
            _np = numpy
    return _np


def transpose_or(rows: list[int]) -> None:
    """Make the bit matrix ``rows`` (row ``u`` holds bit ``v`` for each edge u -> v, all rows
    of ``len(rows)`` bits) symmetric in place: every edge u -> v adds v -> u. Dense matrices
    (Triton kernels) are transposed by numpy as bool matrices, a band of rows at a time (so
    memory stays a few bands of n bytes); sparse ones by walking the set bits."""
    n = len(rows)
    edges = sum(r.bit_count() for r in rows)
    # measured: the walk costs about 130 ns an edge, numpy about 7 ns a matrix cell
    np = numpy_when_worth(edges) if edges * 16 > n * n else None
    if np is None:
        for u in range(n):
            a = rows[u]
            if a:
                bu = 1 << u
                for v in bits(a):
                    rows[v] |= bu
        return
    width = (n + 7) // 8
    packed = np.frombuffer(b"".join(r.to_bytes(width, "little") for r in rows),
                           np.uint8).reshape(n, width)
    band = 2048                                  # rows per band, a multiple of 8
    for lo in range(0, n, band):
        hi = min(n, lo + band)
        out = np.unpackbits(packed[lo:hi], axis=1, count=n, bitorder="little")
        cols = np.unpackbits(packed[:, lo // 8:(hi + 7) // 8], axis=1, count=hi - lo,
                             bitorder="little")  # column bits lo..hi-1 of every row
        out |= cols.T
        out = np.packbits(out, axis=1, bitorder="little")
        for u in range(lo, hi):
            rows[u] = int.from_bytes(out[u - lo].tobytes(), "little")


def mask_of(ids) -> int:
    """Bitset of an iterable of non-negative ints."""
    m = 0
    for i in ids:
        m |= 1 << i
    return m
