"""The checker's abstract domain and transfer rules (SPEC section 9, after regalloc2's
``src/checker.rs``). docs/checker.md gives the prose; this is the precise statement, and the
code below and in :mod:`.dataflow` implements it.

The lattice
-----------
* **Values** ``V``: the original function's virtual registers; under ``abi=1`` in a ``.func``
  also one pseudo-value ``Rn@entry`` per callee-saved register (its value at entry).
* **Locations** ``L``: GPR placements (runs of 16-bit units), predicates ``P0``-``P6``,
  spill-slot byte ranges of the spill array, pinned old-ABI ``.reg`` parameters, and operand
  snapshots ``snap(v, u)`` (:mod:`.locations`). ``l ⋈ l'`` (overlap) when they share a unit
  or a byte; ``l ⋈ l``.
* **States** ``σ : L → 𝒫(V)``, ``σ(l)`` the values ``l`` surely holds, together with the set
  ``F`` of asynchronous registers in flight (:class:`.events.Pending`).
* **Order**: ``σ ⊑ σ'`` iff ``σ(l) ⊆ σ'(l)`` for every ``l`` (knowing less is lower), and
  ``F ⊇ F'``. ``⊤`` is "unreached": every block starts there.
* **Meet** at a join: ``(σ ⊓ σ')(l) = σ(l) ∩ σ'(l)``, ``F ⊓ F' = F ∪ F'``.
* **Entry**: ``σ₀(l) = U₀`` for every ``l``, where ``U₀`` are the values read before any
  definition in the original (implicit definitions at entry, SPEC section 3; found by
  :mod:`.liveness`); a pinned ``.reg`` parameter ``p`` holds ``{p}``; a callee-saved ``Rn``
  of a ``.func`` under ``abi=1`` holds ``U₀ ∪ {Rn@entry}``; ``F₀ = ∅``.
* **Representation** (:class:`State`): ``held`` maps the locations written so far to their
  sets; every other location holds ``undef``, the part of ``U₀`` not yet redefined. Values dead
  in the original are dropped from every set (after their last use, and on entry to a block
  where they are dead): no use can look for them, and no verdict changes.

Every transfer function is monotone, so iterating from ``⊤`` in reverse post-order each
block's state only shrinks until the greatest fixpoint; a check that fails on a state while
iterating fails on the smaller state at the fixpoint too: the checker stops at the first.

Transfer rules
--------------
Write ``kill(σ, S)`` for ``σ`` with every value of ``S`` removed from every location, and
``write(σ, l, X)`` for ``σ[l' ↦ ∅ for l' ⋈ l][l ↦ X]``. For each event (:mod:`.events`):

=====================================  ===================================================
event                                  effect
=====================================  ===================================================
use of ``v`` in ``l``                  check ``v ∈ σ(l)``
definition of ``v`` into ``l``         ``write(kill(σ, {v}), l, {v})``
guarded definition                     as above, with ``{v}`` only if ``v ∈ σ(l)`` before
                                       (the guard may be false), else ``∅``
several definitions                    together: every defined value killed, every
                                       destination emptied, then each written; two
                                       destinations that overlap both get ``∅``
use-and-definition (``v.x``,           a use first
``wgmma`` accumulator)
copy ``s → d`` of ``v`` (``//@move``,  check ``v ∈ σ(s)`` where ``v`` is live after the
``//@spill``, ``//@reload``,           copy; ``write(σ, d, σ(s))``
``//@pspill``, ``//@preload``,
``//@save``, ``//@restore``,
``//@csave``, ``//@crestore``)
``//@remat v`` into ``l``              (its form checked by :mod:`.matching`)
                                       ``write(σ, l, {v})``; a ``setp`` of registers
                                       first checks each operand ``u`` in ``σ(l_u)`` and
                                       in ``σ(snap(v, u))``
``//@removed`` ``setp`` of registers   ``write(σ, snap(v, u), {u})`` per operand ``u``, then
                                       as below
``//@removed`` copy ``mov d, s`` in    check ``s ∈ σ(l)``; ``kill(σ, {d})``, then
one location ``l``                     ``σ(l) ∪= {d}``
``//@removed`` pure definition of v    ``kill(σ, {v})`` (any unguarded pure instruction of
(or a copy between two registers)      one result: v is then held nowhere, so a later read
                                       of v is refuted; sound whatever it reads)
``call`` under ``abi=1``               ``write(σ, r, ∅)`` for every caller-saved ``r``:
                                       R0-R23, R32 and up, below K
``ret`` of a ``.func`` under           check ``Rn@entry ∈ σ(Rn)`` for every callee-saved
``abi=1``                              ``Rn`` (R24-R30 below K)
``ret`` with old-ABI ``.reg`` returns  check ``r ∈ σ(r)`` for each
asynchronous instruction               ``F ∪= {(l, v)}`` for its registers; a write of
                                       another value over a unit of ``F`` (but by an
                                       instruction of the same family, chained
                                       ``wgmma.mma_async``), or an inserted instruction
                                       touching one, fails
wait (``wgmma.wait_group 0``,          remove that family's entries from ``F``
``tcgen05.wait::ld``/``::st``,
``//@serialize``)
=====================================  ===================================================

After each original instruction (and removed line), the values that die there are killed.
What needs no state is checked by :mod:`.matching` instead: the forms of inserted and removed
instructions (a ``//@remat`` repeats its value's unique, unguarded, pure definition, or a
predicate's ``setp`` of registers with registers holding them), legal
placements, and under ``abi=1`` the convention's bindings: an ``ld.param``/``st.param``/
``call`` operand the convention binds is the bound register (:mod:`.bindings`).
"""

from __future__ import annotations

EMPTY: frozenset = frozenset()


class State:
    """The abstract state at one program point.

    ``held[L]`` is the set of values location L surely holds; a location absent from ``held``
    is untouched since the entry and holds ``undef`` (the values still implicitly defined at
    entry). Values are dropped from the state once they are dead in the original, so the sets
    stay small. ``pending`` holds the registers of asynchronous instructions not yet waited
    for (:class:`.events.Pending`).
    """

    __slots__ = ("held", "undef", "pending")

    def __init__(self, held, undef, pending):
        self.held = held
        self.undef = undef
        self.pending = pending

    def copy(self) -> "State":
        return State(dict(self.held), self.undef, self.pending)

    def same(self, other: "State") -> bool:
        return (self.undef == other.undef and self.pending == other.pending
                and self.held == other.held)


def meet(states: list[State]) -> State:
    """Intersection of the states reaching a join (a fresh state)."""
    if len(states) == 1:
        return states[0].copy()
    first = states[0]
    undef = first.undef
    for s in states[1:]:
        undef = undef & s.undef
    if not undef and not any(s.undef for s in states):
        # absent means empty everywhere: only keys present in every state survive
        held = dict(first.held)
        for s in states[1:]:
            other = s.held
            for loc, a in list(held.items()):
                b = other.get(loc)
                if b is None:
                    del held[loc]
                elif b is not a:
                    k = a & b
                    if k:
                        held[loc] = k
                    else:
                        del held[loc]
    else:
        keys = set()
        for s in states:
            keys.update(s.held)
        held = {}
        for loc in keys:
            acc = None
            for s in states:
                h = s.held.get(loc, s.undef)
                acc = h if acc is None else acc & h
                if not acc:
                    break
            if acc or undef:
                held[loc] = acc
    pending = first.pending
    for s in states[1:]:
        if s.pending != pending:
            pending = pending | s.pending
    return State(held, undef, pending)


def kill_value(st: State, v: int) -> None:
    """``kill(σ, {v})``: v is redefined, or dead: no location holds it any more."""
    held = st.held
    empty = None
    for loc, hs in held.items():
        if v in hs:
            rest = hs - {v}
            if rest or st.undef:
                held[loc] = rest
            elif empty is None:
                empty = [loc]
            else:
                empty.append(loc)
    if empty is not None:
        for loc in empty:
            del held[loc]
    if v in st.undef:
        # untouched locations held the undefined v: no more
        st.undef = st.undef - {v}


def kill_set(st: State, ks: frozenset) -> None:
    """``kill(σ, ks)``: every value of ``ks`` is redefined or dead: no location holds it any
    more."""
    held = st.held
    undef = st.undef
    apart = ks.isdisjoint
    if len(ks) == 1:            # one value (most definitions): a membership test, no call
        (v,) = ks
        hits = [loc for loc, hs in held.items() if v in hs]
    else:
        hits = [loc for loc, hs in held.items() if not apart(hs)]
    for loc in hits:
        rest = held[loc] - ks
        if rest or undef:
            held[loc] = rest
        else:
            del held[loc]
    if undef and not apart(undef):
        st.undef = undef - ks


def write(st: State, overlaps: list[list[int]], loc: int, values: frozenset) -> None:
    """``write(σ, loc, values)``: location ``loc`` now holds ``values``; whatever any
    overlapping location held is destroyed (``overlaps`` is :attr:`.Locations.overlaps`)."""
    held = st.held
    if st.undef:
        for o in overlaps[loc]:
            held[o] = EMPTY
    else:
        for o in overlaps[loc]:
            held.pop(o, None)
    if values:
        held[loc] = values


def define_many(st: State, overlaps: list[list[int]], defs, guarded: bool,
                dead: frozenset) -> None:
    """Several definitions made together, or a guarded one: a guarded definition leaves its
    location holding v only if it held v before; values in ``dead`` are not kept."""
    held = st.held
    undef = st.undef
    new: dict[int, frozenset] = {}
    for loc, v in defs:
        vals = EMPTY if v in dead else frozenset((v,))
        if guarded:
            hs = held.get(loc)
            if hs is None:
                hs = undef
            keep = v in hs
        else:
            keep = True
        got = new.get(loc)
        val = vals if keep else EMPTY
        new[loc] = val if got is None else (got & val)
    # two different values into overlapping locations: nothing certain in either
    locs = list(new)
    for i, a in enumerate(locs):
        ov = overlaps[a]
        for b in locs[i + 1:]:
            if b in ov:
                new[a] = EMPTY
                new[b] = EMPTY
    kill_set(st, dead.union(d[1] for d in defs))
    for loc in locs:
        write(st, overlaps, loc, EMPTY)
    for loc, vals in new.items():
        if vals:
            write(st, overlaps, loc, vals)
