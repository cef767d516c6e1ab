"""The fat-point allocator's knobs, by their ptxas names (seed 004 "Key Knobs", "Budget Pressure
Model"; SPEC section 6).

ptxas reads 87 OCG knobs (indices 613-699) for register allocation; ptxalloc exposes the ones
its fat-point allocator models, under the names and defaults the seed gives:

========================================  =====  ========  =====================================
name                                      index  default   role
========================================  =====  ========  =====================================
RegAllocThresholdForDiscardConflicts        684        50  a slot with more conflicts is skipped
RegAllocNumNonSpillTrials                   639         2  SPILL retries after the NOSPILL try
RegTgtMaxThreads                              -       119  budget model: max threads breakpoint
RegTgtPressureThreshold                       -       160  budget model: pressure breakpoint
RegTgtCoeffA                                  -       0.2  budget fraction below the threshold
RegTgtCoeffB                                  -       1.0  budget fraction at the top
RegTgtCoeffC                                  -       0.3  linear occupancy model: y at minimum
RematParamLoads                               -         1  rematerialize kernel parameter loads
RematPredicates                               -         1  spilled setp recomputed from live registers
SpillReloadFromRegister                       -         1  a reload of a value still in a register: mov
SpillDeadStores                               -         1  remove stores no reload reads
SpillSplitRegions                             -         1  one reload serves a block's run of uses
SpillSplitLoops                               -         1  one reload before a loop serves its uses
SpillSlotsToRegisters                         -         2  a slot with a register free: copies
SpillReloadsToRegisters                       -         1  a reload a free register serves: copies
SpillVectorize                                -         1  adjacent spill accesses as .v2/.v4
SpillStaticWeight                             -        10  cost per word of spill code, static
SerializeWgmma                                -         1  wgmma groups serialized, spilled around
SplitToMaxLive                                -         1  above MaxLive: split at block ends (2: any copies)
PredicateSlots                                -         1  K = 255: spilled predicates in slots
PostAllocCleanup                              -         1  after allocation: copy propagation, dead code
schedule                                      -         2  ptxalloc's own: 1 = schedule first, 2 = or not, fewer spill bytes
ScheduleStoresLast                            -         1  the schedule's second order: stores last
hoist                                         -         0  ptxalloc's own: 1/2 = hoist (2: inner)
promote                                       -         0  ptxalloc's own: 1 = .local to registers
recompute                                     -         1  ptxalloc's own: recompute at the use
induction                                     -         0  ptxalloc's own: pointer families as a counter
TupleReuse                                    -         1  results into a tuple's dying members' registers
SpillEvict                                    -         1  briggs: a failed node evicts cheaper ones
SpillUncoalesced                              -         1  briggs: keep the uncoalesced coloring if cheaper
SpillEvictGroup                               -         2  briggs: give way (2: or not, fewer bytes)
========================================  =====  ========  =====================================

``RematParamLoads`` and the other switches of the passes around the allocator (issue 13) are
ptxalloc's own, for every allocator: 1 on, 0 off. ``schedule`` is not a fat-point knob either:
it switches ptxalloc's pressure-aware scheduling before allocation
(:mod:`ptxalloc.passes.schedule`) for every allocator; at 2 a function whose scheduled code
spills is allocated as written too and the allocation with fewer spill bytes kept
(:func:`ptxalloc.pipeline.allocate_either_order`). ``hoist`` and ``promote`` switch the
two pre-passes of seed 004's pipeline, HoistInvariants (:mod:`ptxalloc.passes.hoist`) and
ConvertMemoryToRegisterOrUniform (:mod:`ptxalloc.passes.promote`), likewise for every allocator;
``recompute`` its recomputation of cheap values, addresses and predicates at their uses
(:mod:`ptxalloc.passes.recompute`), ``induction`` its rewriting of loop-carried pointer families
as one induction variable (:mod:`ptxalloc.passes.induction`). ``SpillEvict`` and ``SpillUncoalesced`` are second chances
for briggs's spill choice after select (:mod:`ptxalloc.alloc.choice`; docs/decisions.md,
"Second chances for the spill choice"); 0 gives the seeds' Briggs coloring exactly.
``SpillEvictGroup`` lets one colored node give way to several nodes select left out, in every
round (docs/decisions.md, "Briggs's spill bytes at K = 24 and 32"); at 2 (the default) a
function of at most 1,000 instructions where that changed a choice is allocated without it too
and the fewer spill bytes kept (docs/decisions.md, "Giving way judged by the whole function");
0 with the two above gives the seeds' coloring.
``SpillStaticWeight`` (a number, 0 = the seeds' cost) adds to each value's spill cost that many
units per 32-bit word of spill code its definitions and uses would need, for every allocator
(docs/decisions.md, "Spill code counted statically").

Two decisions (docs/decisions.md, "Fat-point allocator"):

* The seed gives no default for ``RegAllocNumNonSpillTrials``; 2 keeps a failed round to at most
  three fat-point passes (one NOSPILL attempt and two SPILL retries, the second one register
  lower), which measured as good as larger values on the corpus at a fraction of the time.
* The budget model's five values are "knob-overridable" in the seed (allocator state +1624 ...
  +1648) but their knob names are not given. ptxalloc names them in the seed's ``RegTgt*``
  family; these five names are ptxalloc's, not NVIDIA's.

``--knob NAME=VALUE`` (repeatable) sets one; a name not in the table is a usage error that lists
the known ones.
"""

from __future__ import annotations

from ..errors import UsageError


class Knob:
    """One knob: its name, the ptxas knob index where the seed gives one, default, whether it
    is an integer, its range, what it does and what reads it (``scope``: the fat-point
    allocator, ``briggs`` the briggs allocator, ``budget`` for ``--registers auto``, ``all`` for
    every allocator). A plain class:
    ``--help`` builds the table on every command, and dataclasses would cost start-up."""

    __slots__ = ("name", "index", "default", "integer", "minimum", "doc", "maximum", "scope")

    def __init__(self, name: str, index: int | None, default: float, integer: bool,
                 minimum: float, doc: str, maximum: float | None = None,
                 scope: str = "fatpoint"):
        self.name = name
        self.index = index
        self.default = default
        self.integer = integer
        self.minimum = minimum
        self.doc = doc
        self.maximum = maximum
        self.scope = scope

    def __repr__(self) -> str:
        return f"Knob({self.name!r}, default={self.default:g}, scope={self.scope!r})"


#: the knob ``--pressure-limit N`` sets (seed 001's ``-nvptx-regalloc-pressure-limit``, "max
#: register pressure before aggressive spilling": the budget model's pressure breakpoint)
PRESSURE_KNOB = "RegTgtPressureThreshold"

KNOBS: dict[str, Knob] = {k.name: k for k in (
    Knob("RegAllocThresholdForDiscardConflicts", 684, 50, True, 0,
         "slots with more interference conflicts than this are skipped by the fat-point scan"),
    Knob("RegAllocNumNonSpillTrials", 639, 2, True, 0,
         "SPILL retries (spill guidance, target-minus-one descent) after a failed NOSPILL try"),
    Knob("RegTgtMaxThreads", None, 119, True, 1,
         "budget model: the max-threads breakpoint of the piecewise-linear fraction",
         scope="budget"),
    Knob("RegTgtPressureThreshold", None, 160, True, 1,
         "budget model: the pressure breakpoint where the fraction starts to rise",
         scope="budget"),
    Knob("RegTgtCoeffA", None, 0.2, False, 0, "budget model: fraction up to the threshold",
         scope="budget"),
    Knob("RegTgtCoeffB", None, 1.0, False, 0, "budget model: fraction at the top of the file",
         scope="budget"),
    Knob("RegTgtCoeffC", None, 0.3, False, 0,
         "budget model: the linear occupancy model's value at the lowest occupancy",
         scope="budget"),
    Knob("RematParamLoads", None, 1, True, 0,
         "1: a kernel's loads of its own parameters are rematerialized instead of spilled",
         maximum=1, scope="all"),
    Knob("RematPredicates", None, 1, True, 0,
         "1: where more predicates are live than P0-P6 hold, a predicate whose setp reads "
         "registers live at each of its uses (and not redefined since) is recomputed there "
         "when it spills, no general register holding it (spill/remat.py), 0 = off",
         maximum=1, scope="all"),
    Knob("SpillReloadFromRegister", None, 1, True, 0,
         "1: a reload of a value another register still holds becomes a register copy",
         maximum=1, scope="all"),
    Knob("SpillDeadStores", None, 1, True, 0,
         "1: spill stores that no reload reads are removed after allocation",
         maximum=1, scope="all"),
    Knob("SpillSplitRegions", None, 1, True, 0,
         "1: a spilled value's uses in a block share one reload where pressure allows "
         "(split around uses, spill/split.py)", maximum=1, scope="all"),
    Knob("SpillSplitLoops", None, 1, True, 0,
         "1: a spilled value a loop reads but never writes is reloaded once before the loop "
         "where the loop has room (split at loop boundaries, spill/split.py)",
         maximum=1, scope="all"),
    Knob("SpillSlotsToRegisters", None, 2, True, 0,
         "1: after allocation, a spill slot whose whole live range has a register free "
         "below the high-water mark becomes copies to and from that register "
         "(spill/promote.py), 2 = any register of the budget", maximum=2, scope="all"),
    Knob("SpillReloadsToRegisters", None, 1, True, 0,
         "1: after allocation, a reload that a register free since the slot's previous "
         "access in the block can serve becomes copies through that register "
         "(spill/promote.py)", maximum=1, scope="all"),
    Knob("SpillVectorize", None, 1, True, 0,
         "1: values stored or reloaded together get adjacent aligned spill slots, and runs "
         "of 2 or 4 adjacent spill stores or reloads are written as one .v2/.v4 access "
         "(spill/slots.py, spill/vectorize.py)", maximum=1, scope="all"),
    Knob("SpillStaticWeight", None, 10, False, 0,
         "cost added per 32-bit word of spill code a value's definitions and uses would "
         "store or reload (0: the seeds' frequency-weighted cost alone)", scope="all"),
    Knob("SplitToMaxLive", None, 1, True, 0,
         "1: a function that spills nothing and ends above MaxLive is split at block ends "
         "(register copies) and colored again, kept when it uses fewer registers and leaves "
         "at most 2 copies in loops (alloc/block_split.py), 2 = whatever the copies, "
         "0 = off", maximum=2, scope="all"),
    Knob("PredicateSlots", None, 1, True, 0,
         "1: at K = 255, a function that spills predicates into general registers, stores "
         "nothing to memory and ends above MaxLive is allocated again with its spilled "
         "predicates in "
         "spill slots (a register only around each definition and use, spill/rewrite.py), "
         "kept where its fewer registers let more warps fit on an SM (registers go 8 per "
         "thread at a time; the slots cost local-memory traffic); 3 = that, kept wherever it "
         "uses fewer registers; 2 = spilled predicates always go to slots, 0 = never",
         maximum=3, scope="all"),
    Knob("PostAllocCleanup", None, 1, True, 0,
         "1: after allocation, reads of an inserted copy's destination read its source "
         "within a block, and dead definitions are removed (alloc/cleanup.py), 0 = off",
         maximum=1, scope="all"),
    Knob("schedule", None, 2, True, 0,
         "ptxalloc's own: 1 = pressure-aware scheduling within blocks before allocation "
         "(passes/schedule.py), 2 = that, and where the scheduled code spills the code as "
         "written is allocated too and the one spilling fewer bytes kept (pipeline.py), "
         "0 = off", maximum=2, scope="all"),
    Knob("ScheduleStoresLast", None, 1, True, 0,
         "1: the schedule also tries, per segment, a second order that keeps stores and what "
         "forms their operands last and computes each result right after its loads, kept "
         "where its peak pressure is lower (passes/schedule.py), 0 = the first order alone",
         maximum=1, scope="all"),
    Knob("hoist", None, 0, True, 0,
         "ptxalloc's own: 1 = loop-invariant instructions hoisted to loop preheaders before "
         "allocation (ptxas's HoistInvariants, passes/hoist.py), 2 = out of innermost loops "
         "only, 0 = off", maximum=2, scope="all"),
    Knob("promote", None, 0, True, 0,
         "ptxalloc's own: 1 = function-local .local arrays accessed at constant offsets "
         "promoted to registers before allocation (ptxas's ConvertMemoryToRegisterOrUniform, "
         "passes/promote.py), 0 = off", maximum=1, scope="all"),
    Knob("recompute", None, 2, True, 0,
         "ptxalloc's own: 1 = cheap values, addresses and predicates recomputed at their uses "
         "before allocation (passes/recompute.py), 2 = also with the definitions of operands "
         "not live there (chains up to four deep; a 32-bit index and a shared base kept for a "
         "64-bit offset or address), "
         "0 = off", maximum=2, scope="all"),
    Knob("induction", None, 0, True, 0,
         "ptxalloc's own: 1 = loop-carried families of 64-bit pointers advanced by one stride "
         "rewritten as one counter plus each pointer's offset before recomputation, kept when "
         "MaxLive falls (passes/induction.py), 0 = off", maximum=1, scope="all"),
    Knob("SerializeWgmma", None, 1, True, 0,
         "1: where the registers of wgmma groups in flight at once do not fit the budget, each "
         "group is waited for at its commit (passes/serialize_wgmma.py), and registers of "
         "wgmma groups may spill around their in-flight windows (spill/windows.py); 0 = "
         "neither: such registers never leave their registers", maximum=1, scope="all"),
    Knob("TupleReuse", None, 1, True, 0,
         "1: a value computed from a register tuple's member read for the last time (a "
         "wgmma score's fma) is merged into the tuple on that member's register, as ptxas "
         "writes in place (alloc/tuple_reuse.py); 0 = a tuple's registers stay taken until "
         "its last member dies", maximum=1, scope="coalescing"),
    Knob("SpillEvict", None, 1, True, 0,
         "1: after the first round's select, a node left without a register takes the placement of colored "
         "neighbours that cost less to spill than it (alloc/choice.py), 0 = the seeds' select",
         maximum=1, scope="briggs"),
    Knob("SpillUncoalesced", None, 1, True, 0,
         "1: when the first round's coalesced coloring spills, the uncoalesced problem is colored too and the "
         "cheaper spill choice kept (alloc/choice.py), 0 = the coalesced one always",
         maximum=1, scope="briggs"),
    Knob("SpillEvictGroup", None, 2, True, 0,
         "1: after every round's select, a colored node whose registers would seat several "
         "nodes left without one, together costlier in cycles and in bytes of spill code, "
         "gives way to them (alloc/choice.py), 2 = and a function of at most 1,000 "
         "instructions where it changed a choice is allocated without it too, the fewer "
         "spill bytes kept, 0 = off", maximum=2, scope="briggs"),
)}


def _unknown(name: str) -> UsageError:
    return UsageError(f"unknown knob '{name}' (known: {', '.join(KNOBS)})")


def parse_knob(text: str) -> tuple[str, float]:
    """``NAME=VALUE`` as given to ``--knob``."""
    name, eq, value = text.partition("=")
    name = name.strip()
    if not eq or not name:
        raise UsageError(f"--knob takes NAME=VALUE, not '{text}'")
    if name not in KNOBS:
        raise _unknown(name)
    return name, _value(KNOBS[name], value.strip())


def _value(knob: Knob, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"knob {knob.name} takes a number, not '{value}'") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise UsageError(f"knob {knob.name} takes a finite number, not '{value}'")
    if knob.integer:
        if v != int(v):
            raise UsageError(f"knob {knob.name} takes a whole number, not '{value}'")
        v = int(v)
    if v < knob.minimum:
        raise UsageError(f"knob {knob.name} must be at least {knob.minimum:g}, not '{value}'")
    if knob.maximum is not None and v > knob.maximum:
        raise UsageError(f"knob {knob.name} must be at most {knob.maximum:g}, not '{value}'")
    return v


def parse_knobs(texts: list[str] | None) -> dict[str, float]:
    """Every ``--knob NAME=VALUE``; a later one overrides an earlier one."""
    out: dict[str, float] = {}
    for t in texts or ():
        name, v = parse_knob(t)
        out[name] = v
    return out


SCOPES = {"fatpoint": "the fat-point allocator (--allocator fatpoint)",
          "briggs": "the briggs allocator (--allocator briggs)",
          "budget": "the budget model of --registers auto",
          "coalescing": "the allocators that coalesce copies (briggs, fatpoint)",
          "all": "every allocator (ptxalloc's passes around allocation)"}


def inapplicable(knobs: dict[str, float], allocator: str, registers) -> list[str]:
    """Warnings for knobs set where nothing reads them: a fat-point knob with another
    allocator, a coalescing knob with an allocator that does not coalesce, a budget-model
    knob without ``--registers auto``."""
    out = []
    for name in knobs:
        scope = KNOBS[name].scope
        if (scope in ("fatpoint", "briggs") and allocator != scope) or \
                (scope == "coalescing" and not _coalesces(allocator)) or \
                (scope == "budget" and registers != "auto"):
            out.append(f"knob {name} has no effect here: only {SCOPES[scope]} reads it")
    return out


def _coalesces(allocator: str) -> bool:
    """Whether the registered allocator ``allocator`` coalesces copies (unknown: True, its
    error comes from the driver)."""
    from . import api
    try:
        return api.get(allocator).coalesces
    except KeyError:
        return True


def help_text() -> str:
    """The knob table for ``--help``: name, default, who reads it and what it does."""
    import textwrap
    return "\n".join(textwrap.fill(f"{k.name}={k.default:g} [{k.scope}]: {k.doc}", 88,
                                   initial_indent="  ", subsequent_indent="      ")
                     for k in KNOBS.values())


def resolve(knobs: dict[str, float] | None) -> dict[str, float]:
    """The full knob table: the defaults with ``knobs`` applied (checked, so that the API gives
    the same errors as the command line)."""
    out = {name: k.default for name, k in KNOBS.items()}
    for name, v in (knobs or {}).items():
        if name not in KNOBS:
            raise _unknown(name)
        out[name] = _value(KNOBS[name], v)
    return out
