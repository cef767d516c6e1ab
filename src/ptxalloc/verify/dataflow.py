"""The checker's forward dataflow (SPEC section 9): applies :mod:`.lattice`'s transfer rules to
the events of each block of the allocated CFG, meets at joins, and iterates in reverse
post-order to the fixpoint; every check a rule makes raises at its first failure.
"""

from __future__ import annotations

from ..errors import VerificationError
from .blocks import Blocks
from .events import Copy, Original, Pending, Remat, RemovedCopy, RemovedDef, Wait
from .lattice import EMPTY, State, define_many, kill_set, kill_value, meet, write
from .liveness import LiveFacts
from .locations import Locations
from .messages import Messages


class Dataflow:
    """The fixpoint over one allocated function. ``entry`` lists the locations holding a value
    at entry besides the implicit ones: (location, value, also the implicit values)."""

    def __init__(self, cfg: Blocks, events: list, live: LiveFacts, locs: Locations,
                 msgs: Messages, entry: list[tuple[int, int, bool]]):
        self.cfg = cfg
        self.events = events
        self.dead_of = live.dead_of
        self.copy_live = live.copy_live
        self.entry_dead = live.entry_dead
        self.undef0 = live.undef0
        self.locs = locs
        self.overlaps = locs.overlaps
        self.msgs = msgs
        self.entry = entry

    def entry_state(self) -> State:
        held: dict[int, frozenset] = {}
        undef = self.undef0
        for loc, v, implicit_too in self.entry:
            held[loc] = undef | {v} if implicit_too else frozenset((v,))
        return State(held, undef, frozenset())

    def run(self) -> int:
        """Iterate to the fixpoint; returns the number of block visits."""
        cfg = self.cfg
        n = cfg.n
        events = self.events
        block_events = [events[f:f + c] for f, c in zip(cfg.first, cfg.count)]
        out: list[State | None] = [None] * n
        entry0 = self.entry_state()
        rpo = cfg.rpo
        dirty = [False] * n
        dirty[0] = True
        preds = cfg.preds
        succs = cfg.succs
        visits = 0
        limit = 50 * n + 1000
        entry_dead = self.entry_dead
        pending = True
        while pending:
            pending = False
            for b in rpo:
                if not dirty[b]:
                    continue
                dirty[b] = False
                ins = [out[p] for p in preds[b] if out[p] is not None]
                if b == 0:
                    ins.append(entry0)
                st = meet(ins)
                if entry_dead[b]:
                    kill_set(st, entry_dead[b])
                visits += 1
                if visits > limit:
                    raise VerificationError(f"{self.msgs.where_fn()}: the checker's dataflow "
                                            f"did not converge (internal error)")
                self.transfer(st, block_events[b])
                old = out[b]
                if old is None or not old.same(st):
                    out[b] = st
                    for s in succs[b]:
                        dirty[s] = True
                        pending = True
        return visits

    def transfer(self, st: State, evs: list) -> None:
        """Apply the events of one block to ``st`` (:mod:`.lattice`'s table)."""
        held = st.held
        dead_of = self.dead_of
        copy_live = self.copy_live
        overlaps = self.overlaps
        for ev in evs:
            kind = type(ev)
            if kind is Original:
                idx = ev.idx
                dead = dead_of[idx]
                undef = st.undef
                for loc, v, k in ev.uses:
                    hs = held.get(loc)
                    if hs is None:
                        hs = undef
                    if v not in hs:
                        raise self.msgs.use_error(st, idx, loc, v, self.msgs.describe(k))
                defs = ev.defs
                if st.pending:
                    self.check_pending(st, idx, defs, ev.in_flight, ev.opcode, False)
                    if ev.wait_clear is not None:
                        st.pending = frozenset(p for p in st.pending if p.wait != ev.wait_clear)
                if ev.clobber:
                    for loc in ev.clobber:
                        write(st, overlaps, loc, EMPTY)
                if defs:
                    if ev.guarded or len(defs) > 1:
                        define_many(st, overlaps, defs, ev.guarded, dead)
                    else:
                        loc, v = defs[0]
                        kill_set(st, dead | {v} if dead else frozenset((v,)))
                        write(st, overlaps, loc, EMPTY if v in dead else frozenset((v,)))
                elif dead:
                    kill_set(st, dead)
                if ev.in_flight is not None:
                    fl = ev.in_flight
                    line = self.msgs.sites[idx][1]
                    st.pending = st.pending | frozenset(
                        Pending(loc, v, fl.wait, line, (loc, v) in fl.accumulators)
                        for loc, v in fl.accessed)
            elif kind is Copy:
                idx, src, dst, v, what, address = ev
                for loc, av, k in address:
                    hs = held.get(loc)
                    if hs is None or av not in hs:
                        raise self.msgs.use_error(st, idx, loc, av, self.msgs.describe(k))
                hs = held.get(src)
                if hs is None:
                    hs = st.undef
                if v not in hs and copy_live[idx]:
                    raise self.msgs.copy_error(st, idx, src, v, what)
                if st.pending:
                    self.check_pending(st, idx, ((dst, v),), None, "", True, src)
                write(st, overlaps, dst, hs)
            elif kind is Wait:
                if st.pending:
                    st.pending = frozenset(p for p in st.pending if p.wait != "wgmma.wait_group")
            elif kind is Remat:
                idx, dst, v, reads = ev
                for loc, ov, snap in reads:     # a predicate recomputed from registers
                    hs = held.get(loc)
                    if hs is None:
                        hs = st.undef
                    if ov not in hs:
                        raise self.msgs.use_error(st, idx, loc, ov, "the recomputation's "
                                                                    "operand")
                    hs = held.get(snap)
                    if hs is None or ov not in hs:
                        raise self.msgs.fail_at(
                            idx, f"recomputes {self.msgs.vname(v)} from "
                                 f"{self.msgs.vname(ov)}, which may have been redefined or "
                                 f"died since the definition it repeats")
                if st.pending:
                    self.check_pending(st, idx, ((dst, v),), None, "", True)
                write(st, overlaps, dst, frozenset((v,)))
            elif kind is RemovedCopy:
                idx, loc, d, s = ev
                dead = dead_of[idx]
                hs = held.get(loc)
                if hs is None:
                    hs = st.undef
                if s not in hs:
                    raise self.msgs.use_error(st, idx, loc, s, "the removed copy's source")
                if d != s:
                    kill_value(st, d)
                    hs = held.get(loc)
                    if hs is None:
                        hs = st.undef
                    held[loc] = hs | {d}
                if dead:
                    kill_set(st, dead)
            elif kind is RemovedDef:
                for snap, ov in ev.snapshots:   # what a recomputation may read (above)
                    write(st, overlaps, snap, frozenset((ov,)))
                kill_set(st, dead_of[ev.idx] | {ev.value})

    def check_pending(self, st: State, idx: int, defs, in_flight, opcode: str, inserted: bool,
                      src: int | None = None) -> None:
        """Registers of asynchronous instructions in flight: no other value may be written
        there, and inserted code may not touch them."""
        overlaps = self.overlaps
        display = self.locs.display
        fail_at = self.msgs.fail_at
        same_family = None
        if in_flight is not None:
            same_family = in_flight.family
        for ploc, pv, wait, line, accumulator in st.pending:
            ov = overlaps[ploc]
            if inserted and src is not None and src in ov:
                raise fail_at(idx, f"reads {display[src]} while the asynchronous "
                                   f"instruction of line {line} still uses "
                                   f"{display[ploc]} (until {wait})")
            for d in defs:
                loc, v = d[0], d[1]
                if loc in ov:
                    # the next wgmma of a chain: it reads the pending accumulator value
                    # where it writes its own (not a write-only accumulator over one in
                    # flight, nor over an A fragment)
                    if not inserted and (v == pv or (
                            accumulator and same_family is not None
                            and opcode.startswith(same_family)
                            and (loc, pv) in in_flight.accessed)):
                        continue
                    raise fail_at(idx, f"writes {display[loc]} while the "
                                       f"asynchronous instruction of line {line} still "
                                       f"uses {display[ploc]} for "
                                       f"{self.msgs.vname(pv)} (until {wait})")
