"""The GPU calling convention (seed 003; SPEC section 7).

* Arguments: the first eight 32-bit register slots, R0-R7, in order; a 64-bit argument takes
  the next even pair (RD0 = R0:R1 ... RD3 = R6:R7); what does not fit goes on the stack;
  aggregates over 64 bits are passed by reference (a pointer, which takes a pair slot).
* Return value: R0, or R0:R1 for 64 bits; larger aggregates by reference.
* R0-R23 are caller-saved: a call may destroy them. R24-R31 are callee-saved: a function that
  uses one saves it on entry and restores it before every return. R31 is the frame pointer and
  is never allocated. The seed's convention covers R0-R31; the registers above, R32 and up, are
  caller-saved too (the project's decision: a callee may use them freely, a caller keeps
  nothing there across a call without saving it — as with every register the convention does
  not promise to preserve).

Every range is clipped to the budget: with K registers only R0 .. R(K-1) exist, so with K = 15
the argument registers are R0-R7, every register is caller-saved and none is callee-saved; with
K = 28 the callee-saved registers are R24-R27. Predicates are outside the convention (the seed
gives them no role): they are neither passed nor destroyed by calls.
"""

from __future__ import annotations

from ..records import record

ARG_REGS = 8
CALLER_SAVED = range(0, 24)
CALLEE_SAVED = range(24, 31)        # R31 is the frame pointer
FRAME_POINTER = 31
ARG_FACTOR = 2.0                    # seed 003 spill-cost factors
CALLEE_SAVED_FACTOR = 1.5


@record(frozen=True)
class Convention:
    """The convention's registers for a budget of K."""

    k: int

    @property
    def arg_regs(self) -> int:
        return min(ARG_REGS, self.k)

    @property
    def caller_saved(self) -> range:
        return range(0, min(CALLER_SAVED.stop, self.k))

    @property
    def callee_saved(self) -> range:
        return range(CALLEE_SAVED.start, max(CALLEE_SAVED.start, min(CALLEE_SAVED.stop, self.k)))

    @property
    def reserves_frame_pointer(self) -> bool:
        return self.k > FRAME_POINTER

    @property
    def upper_caller_saved(self) -> range:
        """R32 and up, caller-saved as well (outside the seed's R0-R31)."""
        return range(32, max(32, self.k))

    def caller_saved_units(self) -> int:
        """Unit mask of the caller-saved registers (two units per register): R0-R23 and R32
        and up, clipped to the budget."""
        mask = 0
        for r in (self.caller_saved, self.upper_caller_saved):
            if len(r):
                mask |= ((1 << (2 * len(r))) - 1) << (2 * r.start)
        return mask

    def callee_saved_units(self) -> int:
        r = self.callee_saved
        return ((1 << (2 * len(r))) - 1) << (2 * r.start) if len(r) else 0


def assign_arguments(sizes: list[int], conv: Convention) -> list[int | None]:
    """The first register of each argument (by size in bytes), or None for one passed on the
    stack. An aggregate over 8 bytes travels by reference: it takes a pair slot for its
    pointer but no value of the callee is bound to it (the caller and callee read it from
    memory)."""
    out: list[int | None] = []
    nxt = 0
    for size in sizes:
        if size > 8:
            nxt += nxt & 1
            nxt += 2
            out.append(None)
            continue
        if size > 4:
            nxt += nxt & 1
            if nxt + 2 <= conv.arg_regs:
                out.append(nxt)
            else:
                out.append(None)
            nxt += 2
        else:
            out.append(nxt if nxt < conv.arg_regs else None)
            nxt += 1
    return out


def return_register(size: int, conv: Convention) -> int | None:
    """R0 (R0:R1 for 64 bits); None for aggregates over 8 bytes (by reference) or a budget too
    small to hold it."""
    if size > 8 or (size > 4 and conv.k < 2):
        return None
    return 0
