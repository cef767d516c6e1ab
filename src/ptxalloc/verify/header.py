"""The checker's reading of an allocated function's ``//@ptxalloc`` header and ``//@``
annotations (docs/allocated-ptx.md, "The header" and "Annotations"; SPEC section 9).

The header names what the proof needs besides the two texts: the budget K, the stem of the
physical register names, the spill array and its frame size, and ``abi=1`` when the calling
convention applies. Annotations mark the instructions the allocator inserted (``//@spill v#n``
and the other copies, ``//@csave Rn``, ``//@serialize``) or removed (``//@removed``).
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import PtxallocError
from ..ir.instruction import COMMENT, Raw
from ..ir.module import Function

HEADER = "//@ptxalloc"
EARLIER_HEADER = "// @ptxalloc"     # an earlier run's header, neutralized (allocated-ptx.md)
REMOVED = "//@removed"
SERIALIZE = "//@serialize"
SBASE = "//@sbase"                  # a step of the shared spill frame's address (.shared)
#: the records of the pre-passes off by default, and recomputation's (here, not in their
#: validators or ptxalloc.ir: the matcher skips them without importing those, issue 16)
HOIST = "//@hoist"
PROMOTE = "//@promote"
INDUCTION = "//@induction"        # ptxalloc.ir.induction writes them
RECOMPUTE = "//@recompute"        # ptxalloc.ir.recompute writes these two
DEAD = "//@dead"

# The two annotation patterns are texts, compiled by re on first use: only inserted code
# carries annotations, and a function without spill code never reads them (start-up, issue 16).

#: An inserted copy's annotation: group 1 the kind, 2 and 3 the original value's name and id;
#: or a callee save: group 4 the kind, 5 the register number.
ANNOTATION = (r"//@(spill|reload|remat|move|pspill|preload|save|restore)\s+(\S+)#(\d+)"
              r"\s*$|//@(csave|crestore)\s+R(\d+)\s*$")


#: A merged spill access (``.v2``/``.v4``: docs/allocated-ptx.md, "Merged spill accesses"):
#: group 1 the kind, 2 its two to four values ``name#id``; or group 3 the kind of a merged
#: callee save, 4 its registers ``Rn``.
MERGED = (r"//@(spill|reload|save|restore)((?:\s+\S+#\d+){2,4})\s*$"
          r"|//@(csave|crestore)((?:\s+R\d+){2,4})\s*$")


class CheckerInputError(PtxallocError):
    """The two files cannot be compared at all (no allocation header, functions that do not
    correspond, an unreadable header): exit status 2."""

    exit_code = 2


def read_header(fn: Function) -> dict[str, str] | None:
    """The ``//@ptxalloc`` header of an allocated function as key/value pairs, or None when the
    function carries none (it was not allocated)."""
    for s in fn.body:
        if type(s) is Raw and s.kind == COMMENT and s.text.startswith(HEADER):
            out = {}
            for part in s.text[len(HEADER):].split():
                k, eq, v = part.partition("=")
                if not eq:
                    raise CheckerInputError(f"function '{fn.name}': malformed allocation header "
                                            f"'{s.text}'")
                out[k] = v
            return out
        if type(s) is Raw and s.kind == COMMENT:
            continue
        return None
    return None


class Header(NamedTuple):
    """What the proof reads from the header: budget K (1..255), the register-name stem, the
    spill array (None when there is none) and its frame in bytes, whether ``abi=1``, whether
    ``schedule=1`` (the function was allocated from the original reordered as its
    ``//@schedule`` lines say: :mod:`.schedule`), ``hoist=1`` and ``promote=1`` (likewise for
    the ``//@hoist`` lines, :mod:`.hoist`, and the ``//@promote`` lines, :mod:`.promote`),
    ``recompute=1`` (the original rewritten as its ``//@recompute`` and ``//@dead`` lines say:
    :mod:`.recompute`), ``induction=1`` (likewise its ``//@induction`` lines: :mod:`.induction`), and with ``space=shared block=N`` the spill array is a ``.shared`` area
    of N threads' frames (:mod:`.shared`)."""

    budget: int
    stem: str
    spill: str | None
    frame: int
    abi: bool
    allocator: str
    arch: str
    scheduled: bool = False
    hoisted: bool = False
    promoted: bool = False
    recomputed: bool = False
    shared: bool = False            # space=shared: the spill array is a .shared area
    block: int = 0                  # shared: the threads whose frames it holds
    induced: bool = False           # induction=1: pointer families as one counter (.induction)

    @classmethod
    def parse(cls, fields: dict[str, str], where: str) -> "Header":
        """The header's fields checked; ``where`` names the function for errors."""
        try:
            budget = int(fields.get("budget", ""))
        except ValueError:
            raise CheckerInputError(f"{where}: allocation header without a budget")
        if not 1 <= budget <= 255:
            raise CheckerInputError(f"{where}: budget {budget} is not 1..255")
        if "stem" not in fields:
            raise CheckerInputError(f"{where}: allocation header without a stem")
        try:
            frame = int(fields.get("frame", "0"))
        except ValueError:
            raise CheckerInputError(f"{where}: bad frame size '{fields['frame']}'")
        space = fields.get("space", "local")
        if space not in ("local", "shared"):
            raise CheckerInputError(f"{where}: unknown spill space '{space}'")
        block = 0
        if space == "shared":
            try:
                block = int(fields.get("block", ""))
            except ValueError:
                raise CheckerInputError(f"{where}: space=shared without a block size")
            if not 1 <= block <= 1024 or not fields.get("spill"):
                raise CheckerInputError(f"{where}: space=shared needs a spill area and a "
                                        f"block of 1..1024 threads")
        return cls(budget, fields["stem"], fields.get("spill") or None, frame,
                   fields.get("abi") == "1", fields.get("allocator", "?"),
                   fields.get("arch", "?"), fields.get("schedule") == "1",
                   fields.get("hoist") == "1", fields.get("promote") == "1",
                   fields.get("recompute") == "1", space == "shared", block,
                   induced=fields.get("induction") == "1")
