"""Small shared helpers."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from collections.abc import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector.

    Parsing and analysing allocate hundreds of thousands of small acyclic objects; the cyclic
    collector would only walk them again and again (it costs a third of the run time on the
    largest corpus files). On the way out the objects that survived are moved to the
    collector's permanent generation (``gc.freeze``), so that the first collection afterwards
    does not walk them all either. Reference counting still frees everything as usual; ptxalloc
    builds no reference cycles.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.enable()


_DENSE = 64                 # set bits from which numpy's unpacking beats the text scan (3-4x)
_NUMPY_AFTER = 300_000      # dense bits scanned as text before numpy is worth importing
_dense_scanned = 0
_np = None


def bits(x: int) -> list[int]:
    """Positions of the set bits of a non-negative int bitset, lowest first.

    A few bits are peeled off one at a time; more are found by scanning the binary text, which
    costs one pass over the int instead of one per bit (profile: the interference graph's
    symmetrization on functions with thousands of registers). Dense bitsets (64 bits and more:
    Triton kernels' interference rows) are unpacked by numpy once a run has scanned enough of
    them to repay numpy's import (about 80 ms), so small inputs never import it."""
    count = x.bit_count()
    if count < 12:
        out = []
        while x:
            low = x & -x
            out.append(low.bit_length() - 1)
            x ^= low
        return out
    if count >= _DENSE:
        if _np is not None:
            raw = _np.frombuffer(x.to_bytes((x.bit_length() + 7) // 8, "little"), _np.uint8)
            return _np.flatnonzero(_np.unpackbits(raw, bitorder="little")).tolist()
        _count_dense(count)
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


def _count_dense(count: int) -> None:
    """Count dense bits scanned as text; import numpy for :func:`bits` past the threshold."""
    global _dense_scanned, _np
    _dense_scanned += count
    if _dense_scanned > _NUMPY_AFTER:
        import numpy
        _np = numpy


def mask_of(ids) -> int:
    """Bitset of an iterable of non-negative ints."""
    m = 0
    for i in ids:
        m |= 1 << i
    return m
