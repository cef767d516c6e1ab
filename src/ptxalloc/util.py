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


def bits(x: int) -> list[int]:
    """Positions of the set bits of a non-negative int bitset, lowest first.

    A few bits are peeled off one at a time; more are found by scanning the binary text, which
    costs one pass over the int instead of one per bit (profile: the interference graph's
    symmetrization on functions with thousands of registers)."""
    if x.bit_count() < 12:
        out = []
        while x:
            low = x & -x
            out.append(low.bit_length() - 1)
            x ^= low
        return out
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


def mask_of(ids) -> int:
    """Bitset of an iterable of non-negative ints."""
    m = 0
    for i in ids:
        m |= 1 << i
    return m
