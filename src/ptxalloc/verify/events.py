"""The checker's events: what each statement of the allocated function does to the abstract
state (SPEC section 9; the rules are :mod:`.lattice`'s).

Matching (:mod:`.matching`) turns every allocated instruction, and every ``//@removed`` line,
into one event; :mod:`.liveness` reads the original values each touches and :mod:`.dataflow`
applies them. ``idx`` is the event's position, which is also its site for messages
(:meth:`.messages.Messages.site`). Locations are :class:`.locations.Locations` ids, values the
original function's register ids (a callee-saved register's value at entry is a pseudo-value
numbered past them).

The operand-level entries are plain tuples, built once per operand:

* a use ``(location, value, operand code)`` — the code names the operand for messages
  (:meth:`.messages.Messages.describe`);
* a definition ``(location, value)``.
"""

# no ``from __future__ import annotations`` here: typing.NamedTuple would compile each
# field's annotation string (0.35 ms of every checker's start-up, issue 16)
from typing import NamedTuple

Use = tuple[int, int, int]
Def = tuple[int, int]


class InFlight(NamedTuple):
    """The registers an asynchronous instruction keeps using until its wait (ISA table
    ``async_operands``): ``accessed`` its (location, value) pairs, ``wait`` the opcode prefix
    of the wait that retires them, ``family`` the opcode family whose later instructions may
    keep writing the ``accumulators`` among them (the pairs it writes: a ``wgmma``'s ``d``,
    which the next ``wgmma.mma_async`` of a chain reads and writes again with no wait; PTX ISA
    9.7.15.5.1 exempts accumulator accesses across ``wgmma.mma_async`` — not its A fragment,
    which no other instruction may write before the wait)."""

    accessed: tuple[Def, ...]
    wait: str
    family: str
    accumulators: frozenset = frozenset()


class Pending(NamedTuple):
    """One register of an asynchronous instruction not yet waited for, in the state;
    ``accumulator``: the instruction writes it (:class:`InFlight`)."""

    loc: int
    value: int
    wait: str
    line: int
    accumulator: bool = False


class Original(NamedTuple):
    """An original instruction matched with its allocated form. ``uses`` are checked, then
    ``clobber`` (caller-saved registers at a ``call`` under ``abi=1``) is emptied, then ``defs``
    are made (together; only where the old value stays when ``guarded``). ``in_flight`` starts an
    asynchronous access, ``wait_clear`` (a wait's prefix) retires one. ``gen``/``kill``/
    ``touched`` are bitsets of original values for :mod:`.liveness` (a guarded definition does
    not kill)."""

    idx: int
    uses: tuple[Use, ...]
    defs: tuple[Def, ...]
    guarded: bool
    clobber: tuple[int, ...]
    in_flight: InFlight | None
    wait_clear: str | None
    opcode: str
    gen: int
    kill: int
    touched: int


class Copy(NamedTuple):
    """An inserted copy (``//@move``, ``//@spill``, ``//@reload``, ``//@pspill``,
    ``//@preload``, ``//@save``, ``//@restore``, ``//@csave``, ``//@crestore``): ``dst`` gets
    ``src``'s whole value set; ``src`` must hold ``value`` where it is live. ``what`` names the
    copy in messages. ``address``: uses the access needs besides (a shared spill slot's base
    register holding the frame address, :mod:`.shared`)."""

    idx: int
    src: int
    dst: int
    value: int
    what: str
    address: tuple[Use, ...] = ()


class Remat(NamedTuple):
    """``//@remat``: ``dst`` holds {value} afterwards. ``reads``: for a predicate recomputed
    from registers (a ``setp``), per register operand (its location, the operand's value, the
    snapshot location of that operand taken at the removed definition): the location must
    hold the value, and so must the snapshot (the operand not redefined since)."""

    idx: int
    dst: int
    value: int
    reads: tuple[tuple[int, int, int], ...] = ()


class RemovedCopy(NamedTuple):
    """A ``//@removed`` copy ``mov d, s`` whose ends are the one location ``loc``, which must
    hold ``src_value`` and afterwards holds ``dst_value`` too."""

    idx: int
    loc: int
    dst_value: int
    src_value: int


class RemovedDef(NamedTuple):
    """The ``//@removed`` pure definition of a rematerialized value: it is held nowhere
    afterwards. ``snapshots`` (a ``setp`` reading registers): (snapshot location, operand
    value) pairs, each snapshot holding its operand's value from here until the operand is
    redefined or dies in the original."""

    idx: int
    value: int
    snapshots: tuple[tuple[int, int], ...] = ()


class Wait(NamedTuple):
    """``//@serialize``: an inserted ``wgmma.wait_group 0`` retiring the in-flight wgmma
    registers."""

    idx: int


class Serialized(NamedTuple):
    """``//@serialize``: an inserted ``wgmma.commit_group`` or ``wgmma.fence``; it reads and
    writes no register."""

    idx: int


Event = Original | Copy | Remat | RemovedCopy | RemovedDef | Wait | Serialized
