"""The independent checker: a proof that an allocated function computes what the original
computes (SPEC section 9, issue 5), in the manner of regalloc2's ``src/checker.rs``.

It reads two functions — the original (virtual registers) and the allocated one as parsed back
from the emitted PTX — and shares no code with the allocators: it uses the parser, the IR and
the ISA table (which operands an instruction defines and uses, which vectors are register
tuples, which registers an asynchronous instruction keeps using), and nothing of ``analysis``,
``alloc``, ``spill`` or ``target``. docs/checker.md sums it up. The proof, in order:

1. :mod:`.header` — the ``//@ptxalloc`` header (budget, stem, spill array, frame, ``abi``) and
   the ``//@`` annotations;
2. :mod:`.matching` — pairs every allocated statement with the original's or checks it as an
   inserted one of its documented form, decodes names into locations and checks each is a
   legal placement (:mod:`.placements`, :mod:`.locations`, the convention's bindings of
   :mod:`.bindings`), and emits one typed event per
   statement (:mod:`.events`) over the allocated CFG (:mod:`.blocks`); :mod:`.uniform`
   confirms that whatever lives in a uniform register (``%UR``, ``%URD``, ``%UP``) is uniform;
3. :mod:`.liveness` — the checker's own liveness of the original values: the values read
   before any definition, and where each value dies;
4. :mod:`.dataflow` — the forward fixpoint of :mod:`.lattice`'s transfer rules (the formal
   lattice and the rule table open that module), checking every use;
5. :mod:`.messages` — every refutation names the function, the allocated instruction with its
   PTX line (and the original line), the operand, the value expected and what the location
   holds instead.

A scheduled allocation (``schedule=1`` in the header) is proven against the original with its
instructions in the order its ``//@schedule`` lines record, once :mod:`.schedule` has validated
that order as a dependence-respecting permutation of the original (docs/checker.md). Hoisting
(``hoist=1``, :mod:`.hoist`) and memory-to-register promotion (``promote=1``, :mod:`.promote`)
are replayed and validated the same way, before the schedule, in the pipeline's order, and
so are loop-carried pointer families as one induction variable (``induction=1``,
:mod:`.induction`) and recomputation at the use (``recompute=1``, :mod:`.recompute`: the
original rewritten as its ``//@recompute``/``//@dead`` lines say, once the rewriting is proven
equivalent).
"""

from __future__ import annotations

import time

from ..ir.instruction import COMMENT, Raw
from ..ir.module import Function
from ..records import field, record
from .dataflow import Dataflow
from .header import EARLIER_HEADER, CheckerInputError, Header, read_header
from .liveness import liveness
from .locations import Locations
from .matching import Matcher, refuse_unnamed_records
from .messages import Messages
# the validators of hoist, promote, induction (off by default) and recompute (records in about
# half the functions) are imported when a header names their pass (start-up, issue 16)
from .schedule import scheduled_original
from .uniform import check_uniform

__all__ = ["FunctionProof", "FunctionChecker", "check_function", "read_header",
           "CheckerInputError"]


@record
class FunctionProof:
    """What the checker proved about one function."""

    name: str
    kind: str
    allocator: str
    budget: int
    arch: str
    instructions: int = 0           # original instructions
    inserted: dict[str, int] = field(default_factory=dict)
    removed: int = 0
    blocks: int = 0
    block_visits: int = 0
    locations: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        """The ``verified:`` line ``ptxalloc verify`` prints."""
        ins = ", ".join(f"{n} {k}" for k, n in sorted(self.inserted.items()) if n) or "nothing"
        what = "kernel" if self.kind == "entry" else "function"
        return (f"verified: {what} '{self.name}' ({self.allocator}, budget {self.budget}, "
                f"{self.arch}): {self.instructions} instructions, inserted {ins}, "
                f"{self.removed} removed; {self.blocks} blocks, {self.block_visits} block visits, "
                f"{self.seconds * 1e3:.1f} ms")


class FunctionChecker:
    """Checks one allocated function against its original: header, matching, liveness,
    dataflow."""

    def __init__(self, original: Function, allocated: Function, header: dict[str, str],
                 module_decls: list[str] = ()):
        self.orig = original
        self.alloc = allocated
        self.module_decls = list(module_decls)
        what = "kernel" if original.is_entry else "function"
        self.header = Header.parse(header, f"{what} '{original.name}'")
        self.locs = Locations(self.header.spill)
        self.msgs = Messages(original, allocated, self.locs)

    def run(self) -> FunctionProof:
        t0 = time.perf_counter()
        h = self.header
        proof = FunctionProof(self.orig.name, self.orig.kind, h.allocator, h.budget, h.arch)
        matched = Matcher(self.orig, self.alloc, h, self.module_decls, self.locs,
                          self.msgs).match()
        check_uniform(self.alloc, h.stem, h.arch, h.abi)
        live = liveness(matched.cfg, matched.events, len(self.orig.regs), matched.in_params)
        proof.instructions = matched.instructions
        proof.inserted = matched.inserted
        proof.removed = matched.removed
        proof.blocks = matched.cfg.n
        proof.block_visits = Dataflow(matched.cfg, matched.events, live, self.locs, self.msgs,
                                      matched.entry).run()
        proof.locations = len(self.locs)
        proof.seconds = time.perf_counter() - t0
        return proof


def refuse_earlier_run(original: Function, allocated: Function) -> None:
    """Raise CheckerInputError when ``allocated`` is the allocation of an earlier run's output
    (it carries that run's neutralized header) but ``original`` is not that output: two steps,
    each to be verified against its own input. Checked before any pass record is replayed,
    since the records count the earlier output's instructions, not the original's."""
    if read_header(original) is not None:
        return
    for s in allocated.body:
        if type(s) is Raw and s.kind == COMMENT and s.text.startswith(EARLIER_HEADER):
            what = "kernel" if original.is_entry else "function"
            raise CheckerInputError(
                f"{what} '{original.name}': the allocated file is the allocation of an earlier "
                f"run's output (line {s.line} carries that run's header); verify each step "
                f"against its own input")


def check_function(original: Function, allocated: Function,
                   header: dict[str, str] | None = None,
                   module_decls: list[str] = ()) -> FunctionProof:
    """Prove ``allocated`` (parsed from allocated PTX) computes what ``original`` computes;
    raises VerificationError naming what is wrong."""
    if header is None:
        header = read_header(allocated)
        if header is None:
            raise CheckerInputError(f"function '{allocated.name}' carries no //@ptxalloc header")
    refuse_earlier_run(original, allocated)
    refuse_unnamed_records(allocated, Header.parse(header, f"function '{original.name}'"),
                           f"function '{original.name}'")
    # the pre-passes' records replayed on the original, each validated, in pipeline order
    if header.get("hoist") == "1":
        from .hoist import hoisted_original
        original = hoisted_original(original, allocated)
    if header.get("promote") == "1":
        from .promote import promoted_original
        original = promoted_original(original, allocated, module_decls)
    if header.get("induction") == "1":
        from .induction import induced_original
        original = induced_original(original, allocated)
    if header.get("recompute") == "1":
        from .recompute import recomputed_original
        # proven against the original rewritten by its records, once they are proven
        original = recomputed_original(original, allocated)
    if header.get("schedule") == "1":
        # proven against the original in the recorded order, once that order is validated
        original = scheduled_original(original, allocated)
    return FunctionChecker(original, allocated, header, module_decls).run()
