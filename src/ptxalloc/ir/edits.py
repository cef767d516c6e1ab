"""Typed records of the code an allocation inserts (``Instruction.origin``; SPEC sections 5, 7
and 8; docs/allocated-ptx.md).

Every instruction the allocator inserts carries an :class:`Edit`: what kind of code it is, the
original value it concerns and, for a store to or a reload from the spill array, the
:class:`Slot` it accesses. The passes and spill modules build them (:mod:`ptxalloc.passes`,
:mod:`ptxalloc.spill.rewrite`, :mod:`ptxalloc.spill.saves`); slot layout, lazy reload, frame
compaction and the statistics decode them; :meth:`Edit.annotation` writes the ``//@`` comment
the checker reads. An instruction of the input has ``origin`` None.

====================  ==================================================  ====================
kind                  the inserted instruction                            ``//@`` annotation
====================  ==================================================  ====================
``spill``             stores a spilled value to its slot                  ``//@spill %r5#12``
``reload``            reloads a spilled value from its slot               ``//@reload %r5#12``
``remat``             recomputes a value (a copy of its definition)       ``//@remat %r5#12``
``pspill``            ``selp`` of a spilled predicate into its register   ``//@pspill %p1#3``
``preload``           ``setp`` of a spilled predicate from its register   ``//@preload %p1#3``
``save``              stores a value before a call                        ``//@save %r5#12``
``restore``           reloads it after the call                           ``//@restore %r5#12``
``csave``             stores a callee-saved register on entry             ``//@csave R24``
``crestore``          reloads it before a ``ret``                         ``//@crestore R24``
``move``              a copy of legalization, the convention or a split   ``//@move %r5#12``
``serialize``         a ``wgmma.wait_group 0`` of serialization           ``//@serialize``
``sbase``             computes the shared spill frame's address at entry  ``//@sbase``
====================  ==================================================  ====================
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from ..records import record


class EditKind(Enum):
    """What an inserted instruction is; the value is the word of its ``//@`` annotation."""

    SPILL = "spill"
    RELOAD = "reload"
    REMAT = "remat"
    PSPILL = "pspill"
    PRELOAD = "preload"
    SAVE = "save"
    RESTORE = "restore"
    CSAVE = "csave"
    CRESTORE = "crestore"
    MOVE = "move"
    SERIALIZE = "serialize"
    SBASE = "sbase"


#: the kinds that store to a spill slot, and those that reload from one
STORES = frozenset((EditKind.SPILL, EditKind.SAVE, EditKind.CSAVE))
LOADS = frozenset((EditKind.RELOAD, EditKind.RESTORE, EditKind.CRESTORE))


class Slot(NamedTuple):
    """A spill slot: ``("value", register)`` for a spilled register, ``("save", register)`` for
    a value saved around calls, ``("callee", n)`` for the callee-saved register Rn."""

    kind: str
    id: int

    def order(self) -> tuple[str, str]:
        """The order slots are laid out in: by kind, then by the decimal text of the id (the
        text order the slot keys have always been sorted in; the frame layout depends on it)."""
        return self.kind, str(self.id)


def value_slot(v: int) -> Slot:
    """The slot of spilled register ``v``."""
    return Slot("value", v)


def save_slot(v: int) -> Slot:
    """The slot that keeps register ``v``'s value across calls."""
    return Slot("save", v)


def callee_slot(r: int) -> Slot:
    """The slot that keeps the caller's value of callee-saved register Rr."""
    return Slot("callee", r)


@record(frozen=True, slots=True)
class Edit:
    """The origin of one inserted instruction: its ``kind``, the original value it concerns
    (``value``, a register id of the input; -1 for none), the spill ``slot`` it accesses, and
    for a callee-saved save or restore the physical ``register`` number."""

    kind: EditKind
    value: int = -1
    slot: Slot | None = None
    register: int = -1

    @property
    def stores(self) -> bool:
        """Whether the instruction stores to a spill slot."""
        return self.kind in STORES

    @property
    def loads(self) -> bool:
        """Whether the instruction reloads from a spill slot."""
        return self.kind in LOADS

    def annotation(self, names: list[str]) -> str:
        """The ``//@`` comment (``names``: the input's register names by id)."""
        word = self.kind.value
        if self.register >= 0:
            return f"//@{word} R{self.register}"
        if self.value < 0:
            return f"//@{word}"
        return f"//@{word} {names[self.value]}#{self.value}"


@record(frozen=True, slots=True)
class Merged:
    """The origin of a merged spill access: the :class:`Edit` of each member, in slot order
    (all of one kind, each with its slot)."""

    edits: tuple[Edit, ...]

    @property
    def kind(self) -> EditKind:
        """The members' kind."""
        return self.edits[0].kind

    @property
    def slot(self) -> Slot:
        """The first member's slot (the access's lowest address)."""
        return self.edits[0].slot

    @property
    def stores(self) -> bool:
        """Whether the access stores to spill slots."""
        return self.edits[0].stores

    @property
    def loads(self) -> bool:
        """Whether the access reloads from spill slots."""
        return self.edits[0].loads

    def annotation(self, names: list[str]) -> str:
        """The kind once, then every member's value or register (``//@spill %a#1 %b#2``)."""
        return " ".join([f"//@{self.kind.value}"] + [
            e.annotation(names).split(None, 1)[1] for e in self.edits])
