"""How an allocator plugs into the driver's rounds (:mod:`driver`).

The driver asks each allocator (:class:`~ptxalloc.alloc.api.Allocator`) to ``open`` a session
per function. A plain allocator's session calls its ``color(problem, options)`` once per round
(:class:`PlainSession`, the default). An allocator that keeps state across the rounds of one
function — seed 004's fat-point allocator counts its attempts and register targets, and
compacts the spill frame once the slots are laid out — returns its own :class:`Session`
subclass:

* ``color(problem, options)`` — each round, after coalescing;
* ``slots(cfg, frame)`` — once, after the spill slots got their offsets; returns the frame size
  (a session may move slots, patching the stores and reloads of ``cfg``);
* ``finish(result)`` — once, on the finished :class:`~driver.FunctionResult` (notes, report
  fields).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from ..ir.cfg import CFG
    from ..ir.module import Function
    from .api import Coloring, Problem


class Session:
    """One function's allocation across rounds; subclasses implement :meth:`color`."""

    def __init__(self, fn: "Function", budget: int, options) -> None:
        self.fn = fn
        self.budget = budget

    def color(self, problem: "Problem", options) -> "Coloring":
        raise NotImplementedError

    def forget(self, back: int) -> None:
        """The coloring made ``back`` calls of :meth:`color` ago (1: the last) was discarded
        by the driver: the session's log keeps only the colorings kept."""

    def slots(self, cfg: "CFG", frame: int) -> int:
        return frame

    def finish(self, result) -> None:
        pass


class PlainSession(Session):
    """A plain allocator function, called once per round."""

    def __init__(self, fn: "Function", budget: int, options,
                 color: Callable[["Problem", object], "Coloring"]) -> None:
        super().__init__(fn, budget, options)
        self._color = color

    def color(self, problem: "Problem", options) -> "Coloring":
        return self._color(problem, options)

