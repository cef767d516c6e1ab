"""What to spill when a node that may not be spilled finds no placement (SPEC section 5;
seed 002 edge cases 2 and 3).

Spill temporaries, registers bound to the calling convention and registers of asynchronous
instructions in flight are never spilled. When the allocator leaves one of them without a
placement, :meth:`Relief.relieve` picks one placement for it and spills the spillable members of the
neighbours that hold it instead, or fixes the node to that placement when neighbours that
cannot be spilled but can move (other temporaries) hold it; :func:`stuck_message` says why
allocation is impossible when no placement can be freed.
"""

from __future__ import annotations

from typing import Callable

from ..ir.module import Function
from ..util import bits
from .api import Coloring, Problem
from .matrix import UnitMatrix


def spillable(problem: Problem, node: int, unspillable: set[int]) -> list[int]:
    """The members of a node that may be spilled: not spill temporaries, not bound to a
    convention register (coalescing may have merged such registers with ordinary values)."""
    return [v for v in problem.members[node] if v not in unspillable]


class Relief:
    """The reliefs of one round (:meth:`relieve`, one per unspillable node left without a
    placement in ``coloring``): the coloring's unit matrix, and each neighbour's spillable
    members with their cost, found once for all of them (issue 16: on Triton's attention
    kernels at K = 64 and 128 a round relieves up to 400 nodes, whose neighbours are coalesced
    nodes of dozens of members)."""

    def __init__(self, problem: Problem, coloring: Coloring, unspillable: set[int]):
        self.problem = problem
        self.unspillable = unspillable
        self.matrix = UnitMatrix.for_problem(problem, coloring.start)
        self._spillable: dict[int, tuple[list[int], float]] = {}

    def _spill_of(self, node: int) -> tuple[list[int], float]:
        """The spillable members of ``node`` and the sum of their costs."""
        got = self._spillable.get(node)
        if got is None:
            members = spillable(self.problem, node, self.unspillable)
            costs = self.problem.reg_cost
            got = self._spillable[node] = (members, sum(costs[v] for v in members))
        return got

    def relieve(self, node: int) -> tuple[set[int], int | None] | None:
        """How the unspillable ``node`` gets a placement next round: the registers to spill
        (the spillable members of the colored neighbours on one placement) and, when that
        placement is also held by neighbours that cannot be spilled but can move (other
        temporaries), the placement to fix ``node`` to, so that those move elsewhere. A
        neighbour fixed by the convention gives way too when ordinary values were coalesced
        into it: spilling them leaves the convention's short-lived register alone. The
        placement needing fewest moves, then the cheapest spills, wins; None when every
        placement is held by a convention register alone."""
        problem, matrix = self.problem, self.matrix
        best = None
        for s, _ in problem.regfile.placements(problem.shape[node]):
            cost = 0.0
            moved = 0
            chosen: list[int] = []
            for m in bits(matrix.conflicts(node, s)):
                members, members_cost = self._spill_of(m)
                if not members:
                    if m in problem.precolored:
                        break           # a convention register alone: it cannot go anywhere
                    moved += 1
                    continue
                cost += members_cost
                chosen.extend(members)
            else:
                key = (moved, cost)
                if best is None or key < best[0]:
                    best = (key, set(chosen), s if moved else None)
        return (best[1], best[2]) if best else None


def stuck_message(fn: Function, problem: Problem, node: int, budget: int,
                  name: Callable[[int], str]) -> str:
    """The error for a ``node`` no placement can be freed for, naming the first instruction of
    ``fn`` that reads or writes it (registers named by ``name``)."""
    v = problem.members[node][0]
    for ins in fn.instructions():
        if v in ins.defs or v in ins.uses:
            return (f"{fn.filename}:{ins.line}: function '{fn.name}': cannot allocate "
                    f"'{ins.render(name)}' within {budget} registers: its operands and the "
                    f"values that must stay live across it (registers bound by the calling "
                    f"convention, registers of asynchronous tensor instructions) do not fit")
    return f"function '{fn.name}': cannot allocate within {budget} registers"
