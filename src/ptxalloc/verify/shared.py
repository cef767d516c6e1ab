"""The checker's reading of a shared-memory spill area (seed 004 "Spilling Overview": SMEM the
alternative spill destination; ``space=shared`` in the header; docs/allocated-ptx.md,
"Spilling to shared memory"; docs/checker.md).

The allocation's own record is not trusted. The checker establishes three facts itself:

* **The area.** The function declares ``.shared .align 16 .b8 ARRAY[M]`` with ``M >= frame x
  block`` and a frame of a multiple of 16 bytes (each thread's frame then starts 16-aligned,
  so a slot aligned within the frame is aligned in memory), and the header's ``block`` covers the threads the function can have: at least the
  product of the allocated function's ``.reqntid``/``.maxntid``, which must equal the
  original's — or, where the original has none (``--block-size``), be a ``.maxntid`` the
  allocation added, so no launch can have more threads than the area has frames. A shared
  area in a function without launch bounds is refused.
* **The address.** Every ``//@sbase`` instruction is evaluated symbolically (:class:`BaseRun`):
  it must be an unguarded ``mov.u32`` of ``%tid``/``%ntid`` or of the array, or a
  ``mad.lo.u32`` of registers and immediates written earlier in the same unbroken run of
  ``//@sbase`` instructions. A register whose term is exactly this thread's frame address,
  ``(index*frame+ARRAY)`` over the linear thread index (``%tid.x`` only when ``.reqntid`` makes
  the block one-dimensional: ``.maxntid`` bounds only the product of the dimensions), holds
  the pseudo-value :data:`BASE` afterwards; any other write holds :data:`SCRATCH`. Both are values of the dataflow like any other, so an
  overwrite of the base register before a spill access is caught there.
* **The slots.** A spill store or reload addresses ``[R+off]`` with ``R`` a 32-bit register
  that must hold :data:`BASE` where the access is (a use the dataflow checks); the offset is a
  slot of the frame as for local memory. Distinct threads' frames are disjoint because their
  linear indices are, so a slot behaves as thread-private memory.
"""

from __future__ import annotations

from ..errors import VerificationError
from ..ir.instruction import Instruction
from ..ir.operands import Imm, Reg, Sym

#: pseudo-values past the original values (a callee-saved register's entry value is n + r)
BASE_OFFSET = 1000
SCRATCH_OFFSET = 1001
SPECIALS = ("%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z")


#: the seed's reason (seed 004), stated again here: the checker imports nothing of the allocator
ABI_REASON = "Smem spilling should not be enabled when functions use abi (seed 004)"


def frame_address(array: str, frame: int, one_dimensional: bool) -> str:
    """The term this thread's frame address has (the checker's own statement of the layout,
    independent of the allocator's): ``(index*frame+array)`` over the linear thread index
    ``((%tid.z*%ntid.y+%tid.y)*%ntid.x+%tid.x)``, or ``%tid.x`` in a one-dimensional block."""
    index = "%tid.x" if one_dimensional else "((%tid.z*%ntid.y+%tid.y)*%ntid.x+%tid.x)"
    return f"({index}*{frame}+{array})"


def pseudo_name(k: int) -> str | None:
    """The name of pseudo-value ``n + k`` when it is one of this module's, else None."""
    if k == BASE_OFFSET:
        return "the shared spill frame's address"
    if k == SCRATCH_OFFSET:
        return "a step of the shared spill frame's address"
    return None


def launch_dims(directives: dict) -> tuple[str, list[int]] | None:
    """The launch bound (``.reqntid`` before ``.maxntid``) and its three dimensions (missing
    ones are 1), None without."""
    for key in ("reqntid", "maxntid"):
        val = directives.get(key)
        if val:
            dims = [max(1, int(d)) for d in (val if isinstance(val, list) else [val])]
            return key, dims + [1] * (3 - len(dims))     # .maxntid 256 is .maxntid 256, 1, 1
    return None


def check_area(where: str, original: dict, directives: dict, array_decl: str | None,
               array: str, frame: int, block: int) -> bool:
    """Check the area's declaration and block size against the allocated function's launch
    bound ``directives`` (the original's, or a ``.maxntid`` added where ``original`` has
    none); returns whether the block is one-dimensional (only then may the address use
    ``%tid.x`` alone)."""
    import re

    m = re.match(r"\.shared\s+\.align\s+(\d+)\s+\.b8\s+" + re.escape(array)
                 + r"\s*\[(\d+)\]\s*;$", array_decl or "")
    if m is None:
        raise VerificationError(f"{where}: the shared spill area '{array}' is not declared as "
                                f"'.shared .align 16 .b8 {array}[{frame * block}];'")
    if int(m.group(1)) < 16:
        raise VerificationError(f"{where}: the shared spill area must be .align 16")
    if frame % 16:
        # the array is .align 16 and slots are aligned within the frame (up to 16 bytes):
        # only a frame of a multiple of 16 keeps them aligned in every thread's frame
        raise VerificationError(f"{where}: the shared spill frame of {frame} bytes is not a "
                                f"multiple of 16: the threads' frames after the first would "
                                f"misalign their slots")
    if int(m.group(2)) < frame * block:
        raise VerificationError(f"{where}: the shared spill area has {m.group(2)} bytes, less "
                                f"than the frame of {frame} x {block} threads")
    bound, before = launch_dims(directives), launch_dims(original)
    if bound is None:
        raise VerificationError(f"{where}: a shared spill area needs a launch bound (.reqntid "
                                f"or .maxntid): without one a launch may have more threads "
                                f"than the area's {block} frames")
    if before is not None and bound != before:
        raise VerificationError(f"{where}: the launch bound .{bound[0]} "
                                f"{', '.join(map(str, bound[1]))} differs from the "
                                f"original's .{before[0]} {', '.join(map(str, before[1]))}")
    if before is None and bound[0] != "maxntid":
        raise VerificationError(f"{where}: the allocation may add a .maxntid to a function "
                                f"without launch bounds, not a .{bound[0]}")
    key, dims = bound
    threads = 1
    for d in dims:
        threads *= d
    if block < threads:
        raise VerificationError(f"{where}: the shared spill area holds {block} threads' frames "
                                f"but the launch bound allows {threads} threads")
    # .maxntid bounds the product only (__launch_bounds__(N) is .maxntid N, 1, 1 and 2-D
    # launches of N threads are legal): only .reqntid fixes a one-dimensional shape
    return key == "reqntid" and all(d == 1 for d in dims[1:])


class BaseRun:
    """Symbolic evaluation of the ``//@sbase`` instructions (module docstring). ``terms``
    maps a physical register name to its term within the current unbroken run."""

    def __init__(self, array: str, frame: int, one_dimensional: bool):
        self.array = array
        self.want = frame_address(array, frame, one_dimensional)
        self.terms: dict[str, str] = {}

    def interrupt(self) -> None:
        """Any other statement ends the run: no register keeps a term across it."""
        if self.terms:
            self.terms = {}

    def step(self, ins: Instruction, names: list[str], stem: str) -> tuple[int, bool] | str:
        """Evaluate one ``//@sbase`` instruction: (the register it writes, whether it now
        holds the frame address), or why the instruction is not a legal step."""
        ops = ins.ops
        if ins.guard >= 0:
            return "an //@sbase instruction may not be guarded"
        if not ops or type(ops[0]) is not Reg or ops[0].comp:
            return "an //@sbase instruction must write one whole register"
        dst = ops[0].v
        if not names[dst].startswith(f"%{stem}R") or not names[dst][len(stem) + 2:].isdigit():
            return f"an //@sbase instruction must write a 32-bit %{stem}R register"
        if ins.opcode == "mov.u32" and len(ops) == 2 and type(ops[1]) is Sym:
            src = ops[1].text
            if src not in SPECIALS and src != self.array:
                return (f"an //@sbase mov may read %tid, %ntid or the spill area "
                        f"'{self.array}', not '{src}'")
            term = src
        elif ins.opcode == "mad.lo.u32" and len(ops) == 4:
            parts = []
            for op in ops[1:]:
                if type(op) is Imm:
                    parts.append(op.text.strip())
                elif type(op) is Reg and not op.comp and names[op.v] in self.terms:
                    parts.append(self.terms[names[op.v]])
                else:
                    return ("an //@sbase mad may read only immediates and registers written "
                            "earlier in the same //@sbase sequence")
            term = f"({parts[0]}*{parts[1]}+{parts[2]})"
        else:
            return "an //@sbase instruction must be 'mov.u32 R, SRC' or 'mad.lo.u32 R, a, b, c'"
        self.terms[names[dst]] = term
        return dst, term == self.want
