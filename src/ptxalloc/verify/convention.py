"""The checker's own copy of the calling convention's registers (SPEC section 7, seed 003;
docs/allocated-ptx.md, "The calling convention").

R0-R7 carry arguments; R0-R23 are caller-saved, R24-R30 callee-saved, R31 the frame pointer;
R32 and up are caller-saved too. Every range is clipped to the budget K. The checker keeps these
copies so that it shares no code with the allocators; tests/unit/test_checker_abi.py ties them
to :mod:`ptxalloc.target.abi`.
"""

ARG_REGS = 8                    # R0-R7 carry arguments
CALLER_SAVED = range(0, 24)
UPPER_CALLER_SAVED_FROM = 32    # R32 and up: caller-saved as well
CALLEE_SAVED = range(24, 31)
FRAME_POINTER = 31


def caller_saved(budget: int) -> tuple[int, ...]:
    """The registers a ``call`` destroys with budget K: R0-R23 and R32 and up, below K."""
    return tuple(r for r in (*CALLER_SAVED, *range(UPPER_CALLER_SAVED_FROM, budget))
                 if r < budget)


def callee_saved(budget: int) -> tuple[int, ...]:
    """The registers a ``.func`` must give back as they were at entry: R24-R30, below K."""
    return tuple(r for r in CALLEE_SAVED if r < budget)


def reserves_frame_pointer(budget: int) -> bool:
    """Whether R31, the frame pointer, exists (K > 31) and so may not be allocated."""
    return budget > FRAME_POINTER
