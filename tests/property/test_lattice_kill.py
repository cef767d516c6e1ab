"""The checker's ``kill`` (SPEC section 9: a value redefined or dead is held nowhere any more)
against its definition on random abstract states: :func:`ptxalloc.verify.lattice.kill_set`
for one value (its membership-test path, issue 16) and for several, and
:func:`~ptxalloc.verify.lattice.kill_value`, which must agree with it."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from ptxalloc.verify.lattice import State, kill_set, kill_value

values = st.frozensets(st.integers(0, 12), max_size=4)
states = st.tuples(st.dictionaries(st.integers(0, 20), values, max_size=12), values)


def _killed(held: dict, undef: frozenset, ks: frozenset) -> tuple[dict, frozenset]:
    """The definition: each location holding a value of ``ks`` keeps the others; one left
    holding nothing is dropped, unless values are implicitly defined (an absent location
    would then hold them)."""
    out = {}
    for loc, hs in held.items():
        if hs & ks:
            if hs - ks or undef:
                out[loc] = hs - ks
        else:
            out[loc] = hs
    return out, undef - ks


@settings(max_examples=300, deadline=None)
@given(states, st.frozensets(st.integers(0, 12), min_size=1, max_size=3))
def test_kill_set_is_the_definition(state, ks):
    held, undef = state
    s = State(dict(held), undef, frozenset())
    kill_set(s, ks)
    assert (s.held, s.undef) == _killed(held, undef, ks)


@settings(max_examples=300, deadline=None)
@given(states, st.integers(0, 12))
def test_kill_value_is_kill_set_of_one(state, v):
    held, undef = state
    a = State(dict(held), undef, frozenset())
    b = State(dict(held), undef, frozenset())
    kill_value(a, v)
    kill_set(b, frozenset((v,)))
    assert a.same(b) and (a.held, a.undef) == _killed(held, undef, frozenset((v,)))
