"""The checker's own backward liveness of the original values (SPEC section 3 for values read
before any definition; docs/checker.md, "Decisions"), computed over the allocated CFG with each
original instruction where matching placed it. It shares nothing with ``analysis/``.

Inserted code neither reads nor writes original values; a guarded definition does not kill;
``ret`` reads old-ABI ``.reg`` return parameters (matching put them among its uses).
"""

from __future__ import annotations

from typing import NamedTuple

from ..util import bits
from .blocks import Blocks
from .events import Copy, Original, Remat, RemovedCopy, RemovedDef
from .lattice import EMPTY


class LiveFacts(NamedTuple):
    """What the dataflow needs from liveness."""

    dead_of: list[frozenset]     # per event: the original values that die there
    copy_live: list[bool]        # per event: an inserted copy's value is live after it
    entry_dead: list[frozenset]  # per block: values dead on entry though live out of a pred
    undef0: frozenset            # values read before any definition (implicit at entry)


def _bitset(x: int) -> frozenset:
    return frozenset(bits(x))


def _effects(events: list) -> list:
    """Per event, (gen, kill, touched) bitsets of original values, or None for inserted code
    (but a recomputation reading registers, which reads their values)."""
    out: list = [None] * len(events)
    for i, ev in enumerate(events):
        t = type(ev)
        if t is Original:
            out[i] = (ev.gen, ev.kill, ev.touched)
        elif t is RemovedCopy:
            g = 1 << ev.src_value
            k = 1 << ev.dst_value
            out[i] = (g, k, g | k)
        elif t is RemovedDef:
            k = 1 << ev.value
            out[i] = (0, k, k)
        elif t is Remat and ev.reads:
            # a predicate recomputed from registers reads its operands' values there: they
            # are live up to it, though no original instruction reads them after the removed
            # definition it repeats (else they would die, and be dropped, before it)
            g = 0
            for _, ov, _ in ev.reads:
                g |= 1 << ov
            out[i] = (g, 0, g)
    return out


def liveness(cfg: Blocks, events: list, nvals: int, in_params: tuple[int, ...]) -> LiveFacts:
    """Live values over ``cfg`` (whose blocks index ``events``); ``nvals`` original values,
    ``in_params`` the old-ABI ``.reg`` parameters (defined at entry, so not implicit)."""
    n = cfg.n
    gkt = _effects(events)
    firsts = cfg.first
    counts = cfg.count
    gen = [0] * n
    kill = [0] * n
    for b in range(n):
        g = k = 0
        for i in range(firsts[b], firsts[b] + counts[b]):
            x = gkt[i]
            if x is not None:
                g |= x[0] & ~k
                k |= x[1]
        gen[b] = g
        kill[b] = k
    live_in = [0] * n
    live_out = [0] * n
    succs = cfg.succs
    order = cfg.rpo[::-1] + [b for b in range(n) if not cfg.reachable[b]]
    changed = True
    while changed:
        changed = False
        for b in order:
            out = 0
            for x in succs[b]:
                out |= live_in[x]
            live_out[b] = out
            new = gen[b] | (out & ~kill[b])
            if new != live_in[b]:
                live_in[b] = new
                changed = True
    # per event: the values that die there, and whether an inserted copy's value is live
    dead_of: list = [EMPTY] * len(events)
    copy_live: list = [True] * len(events)
    for b in range(n):
        live = live_out[b]
        for i in range(firsts[b] + counts[b] - 1, firsts[b] - 1, -1):
            x = gkt[i]
            if x is None:
                ev = events[i]
                if type(ev) is Copy:
                    v = ev.value
                    copy_live[i] = v >= nvals or bool(live >> v & 1)
                continue
            gone = x[2] & ~live
            if gone:
                dead_of[i] = _bitset(gone)
            live = (live & ~x[1]) | x[0]
    entry_dead: list = []
    preds = cfg.preds
    for b in range(n):
        out = 0
        for p in preds[b]:
            out |= live_out[p]
        gone = out & ~live_in[b]
        entry_dead.append(_bitset(gone) if gone else EMPTY)
    live = live_in[0] if n else 0
    for v in in_params:
        live &= ~(1 << v)
    return LiveFacts(dead_of, copy_live, entry_dead, _bitset(live))
