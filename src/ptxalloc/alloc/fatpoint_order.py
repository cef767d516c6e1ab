"""The fat-point allocator's allocation order: ptxas's six-list simplify-select classification
(seed 004 "Six-List Classification (sub_93FBE0)"; SPEC section 6).

Every node of one register file is put in one of six lists, the lists are drained onto the
assignment stack, and the fat-point core (:mod:`fatpoint`) colors the stack *in reverse* (the
seed's stack at alloc+744 is a linked list walked from its head: the node pushed last is colored
first). So the nodes drained first — the low-interference ones — are colored last, when they are
sure to find a slot, and the high-interference nodes, drained last, are colored first, in order
of decreasing spill-cost-to-interference ratio: the cheapest ones come last and are the ones
that fail (Chaitin's spill choice).

How the seed's vreg fields map onto :class:`~ptxalloc.alloc.problem.Problem` (decisions, also in
docs/decisions.md):

* *interference cost* (sub_938EA0) is the node's weighted degree ``wdeg`` (degree weighted by
  how many of the node's placements a neighbour can block; plain degree with 32-bit values) in
  the graph that remains once the values the spill guidance chose are taken out;
* *low interference* (sub_939220) is Chaitin's test, ``wdeg < placements`` (placements within
  the budget: K for a 32-bit value): such a node finds a slot whatever its neighbours take;
* *constraint chain* (vreg+144) is any constraint on where the node may go: a register tuple or
  an alignment wider than one register, a precolored neighbour, or a copy to a precolored node;
* *paired* (pair-mode flags 0x300000) is a general-register shape of two or more registers
  (64-bit pairs, quads, tuples); *width > 4 registers* (LargeVec) is a shape of more than eight
  16-bit units;
* *spill cost above the threshold* (alloc+768) is an infinite cost: spill temporaries, which
  must never be spilled again;
* *pre-allocation priority* (vreg+84) is 1 for a node joined by a copy to a precolored node (a
  pre-allocation candidate), else 0; in spill-retry mode LowLate nodes are also given the
  seed's decreasing priority, in classification order.

The classification, in this precedence (the seed lists the criteria, not their order):

1. not low interference -> **LowConf** (first attempt) or **LowLate** (spill-retry mode, the
   seed's ``a3 == 99``);
2. width > 4 registers -> **LargeVec**, merged into VeryHigh after classification;
3. paired -> **VeryHigh**;
4. infinite spill cost, or a constraint chain -> **High**;
5. otherwise -> **Unconstrained**.

Drain: Unconstrained, VeryHigh, High (the simplify phase, each list from its highest node id
down, so that within a list the stack is colored in register-id order, roughly program order);
then LowConf and LowLate (the select phase), each time taking the node with the lowest
``cost / max(wdeg, 1)``, ties to the narrower node (width, vreg+72), then the lower
pre-allocation priority, then the lower id (LowLate: the lower decreasing priority). The
classification is made once per attempt, from the degrees at its start, as the seed's single
walk over the vreg list does; it does not re-simplify as Briggs's worklists do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..target.units import GPR
from .api import Problem

UNCONSTRAINED = "Unconstrained"
VERYHIGH = "VeryHigh"
HIGH = "High"
LOWCONF = "LowConf"
LOWLATE = "LowLate"
LARGEVEC = "LargeVec"

SIMPLIFY_LISTS = (UNCONSTRAINED, VERYHIGH, HIGH)
SELECT_LISTS = (LOWCONF, LOWLATE)
LARGE_UNITS = 8          # more than 4 registers


@dataclass
class Order:
    """The assignment stack of one attempt and how its nodes were classified."""

    stack: list[int] = field(default_factory=list)          # push order; colored in reverse
    lists: dict[str, list[int]] = field(default_factory=dict)   # classification, LargeVec kept
    list_of: dict[int, str] = field(default_factory=dict)

    def coloring_order(self) -> list[int]:
        return self.stack[::-1]


def constrained(p: Problem, n: int, precolored_mask: int, precolored_partner: set[int]) -> bool:
    """Whether ``n`` has a constraint chain (see the module docstring)."""
    sh = p.shape[n]
    return (p.is_group[n] or (sh.file == GPR and sh.align > 2) or bool(p.adj[n] & precolored_mask)
            or n in precolored_partner)


def precolored_partners(p: Problem) -> set[int]:
    """Nodes joined by a copy to a precolored node: the pre-allocation candidates."""
    out: set[int] = set()
    if not p.precolored:
        return out
    for _, d, s, _ in p.moves:
        a, b = p.find(d), p.find(s)
        if a == b:
            continue
        if a in p.precolored and b not in p.precolored:
            out.add(b)
        elif b in p.precolored and a not in p.precolored:
            out.add(a)
    return out


def classify(p: Problem, nodes: list[int], wdeg: dict[int, int], spill_retry: bool = False,
             placements: dict[int, int] | None = None,
             partners: set[int] | None = None) -> dict[str, list[int]]:
    """The six lists for ``nodes`` (ascending id order within each list)."""
    lists: dict[str, list[int]] = {name: [] for name in
                                   (UNCONSTRAINED, VERYHIGH, HIGH, LOWCONF, LOWLATE, LARGEVEC)}
    placements = placements if placements is not None else p.placements
    precolored_mask = 0
    for f in p.precolored:
        precolored_mask |= 1 << f
    partners = precolored_partners(p) if partners is None else partners
    cost = p.cost
    shape = p.shape
    for n in sorted(nodes):
        if wdeg[n] >= placements[n]:
            lists[LOWLATE if spill_retry else LOWCONF].append(n)
            continue
        sh = shape[n]
        if sh.file == GPR and sh.units > LARGE_UNITS:
            lists[LARGEVEC].append(n)
        elif sh.file == GPR and sh.units >= 4:
            lists[VERYHIGH].append(n)
        elif math.isinf(cost[n]) or constrained(p, n, precolored_mask, partners):
            lists[HIGH].append(n)
        else:
            lists[UNCONSTRAINED].append(n)
    return lists


def select_key(p: Problem, n: int, wdeg: int, pre: int, tail: int) -> tuple:
    """The select-phase key, lowest selected first: spill cost over interference, then width,
    then pre-allocation priority ``pre``, then ``tail`` (the id, or LowLate's decreasing
    priority)."""
    c = p.cost[n]
    ratio = c / max(wdeg, 1) if not math.isinf(c) else math.inf
    return (ratio, p.shape[n].units, pre, tail, n)


def order(p: Problem, nodes: list[int], wdeg: dict[int, int] | None = None,
          spill_retry: bool = False, placements: dict[int, int] | None = None,
          partners: set[int] | None = None) -> Order:
    """Classify ``nodes`` and drain the lists onto the assignment stack; ``partners`` is
    ``precolored_partners(p)`` when the caller has it already."""
    wdeg = wdeg if wdeg is not None else p.wdeg
    partners = precolored_partners(p) if partners is None else partners
    lists = classify(p, nodes, wdeg, spill_retry, placements, partners)
    out = Order(lists=lists)
    stack = out.stack
    list_of = out.list_of
    for name in SIMPLIFY_LISTS:
        members = lists[name]
        if name == VERYHIGH:
            members = sorted(members + lists[LARGEVEC])      # LargeVec merged into VeryHigh
        for n in reversed(members):
            stack.append(n)
            list_of[n] = name
    for n in lists[LARGEVEC]:
        list_of[n] = LARGEVEC
    for name in SELECT_LISTS:
        members = lists[name]
        count = len(members)
        keys = sorted(select_key(p, n, wdeg[n], 1 if n in partners else 0,
                                 (count - i) if name == LOWLATE else n)
                      for i, n in enumerate(members))
        for key in keys:
            n = key[-1]
            stack.append(n)
            list_of[n] = name
    return out
