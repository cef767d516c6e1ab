"""Small shared helpers."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


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


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: into a temporary file beside it, then
    renamed over it."""
    import os
    import tempfile

    from .errors import UsageError

    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ptxalloc-", suffix=".tmp", dir=directory)
    except OSError as e:
        raise UsageError(f"{path}: cannot write: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise UsageError(f"{path}: cannot write: {e.strerror}") from None


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
