"""How an allocator plugs into the driver's rounds (:mod:`driver`).

A plain allocator is a function ``(Problem, Options) -> Coloring`` called once per round. An
allocator that keeps state across the rounds of one function — seed 004's fat-point allocator
counts its attempts and register targets, and compacts the spill frame once the slots are laid
out — registers a :class:`Session` subclass instead; the driver opens one per function:

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
    from .briggs import Coloring
    from .problem import Problem


class Session:
    """One function's allocation across rounds; subclasses implement :meth:`color`."""

    def __init__(self, fn: "Function", budget: int, options) -> None:
        self.fn = fn
        self.budget = budget

    def color(self, problem: "Problem", options) -> "Coloring":
        raise NotImplementedError

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


def open_session(entry, fn: "Function", budget: int, options) -> Session:
    """The session for a registry entry: a Session subclass is opened for ``fn``; a plain
    allocator function is wrapped."""
    if isinstance(entry, type) and issubclass(entry, Session):
        return entry(fn, budget, options)
    return PlainSession(fn, budget, options, entry)
