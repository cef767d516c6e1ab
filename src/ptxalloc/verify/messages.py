"""The checker's error messages (docs/checker.md): every refutation names the function, the
allocated instruction with its PTX line (and the original line), the operand, the value
expected and what the location holds instead.
"""

from __future__ import annotations

from ..errors import VerificationError
from ..ir.module import Function
from .lattice import State
from .locations import SLOT, Locations


class Messages:
    """Names values, locations and sites of one checked function, and builds its errors.

    ``sites[idx]`` is (allocated instruction or removed-line text, PTX line, original
    instruction or None) for event ``idx``; matching appends one per event.
    """

    def __init__(self, original: Function, allocated: Function, locs: Locations):
        self.what = "kernel" if original.is_entry else "function"
        self.name = original.name
        self.onames = original.regs.names
        self.anames = allocated.regs.names
        self.locs = locs
        self.sites: list[tuple] = []
        self.specials: list[str] = []

    def where_fn(self) -> str:
        return f"{self.what} '{self.name}'"

    def vname(self, v: int) -> str:
        """An original value, ``name#id``; a callee-saved register's value at entry,
        ``Rn@entry``; the shared spill frame's address (:mod:`.shared`)."""
        n = len(self.onames)
        if v >= n:
            from .shared import pseudo_name
            return pseudo_name(v - n) or f"R{v - n}@entry"
        return f"{self.onames[v]}#{v}"

    def site(self, idx: int) -> str:
        ins, line, o = self.sites[idx]
        if type(ins) is str:
            text = ins
        else:
            text = ins.render(self.anames.__getitem__)
            if ins.comment:
                text += " " + ins.comment
        text = " ".join(text.split())
        orig = f" (original line {o.line})" if o is not None and o.line != line else ""
        return f"{self.where_fn()}, line {line} '{text}'{orig}"

    def fail_at(self, idx: int, message: str) -> VerificationError:
        """The error for event ``idx`` (to raise)."""
        return VerificationError(f"{self.site(idx)}: {message}")

    def show(self, st: State, loc: int) -> str:
        """What location ``loc`` holds in ``st``."""
        hs = st.held.get(loc)
        implicit = hs is None
        if implicit:
            hs = st.undef
        if not hs:
            return "nothing"
        names = sorted(self.vname(v) for v in hs)
        if len(names) > 6:
            names = names[:6] + [f"... ({len(hs)} values)"]
        body = "{" + ", ".join(names) + "}"
        return body + (" (values undefined at entry)" if implicit else "")

    def hint(self, st: State, v: int, loc: int) -> str:
        """Where else ``v`` is held, for an error about ``loc``."""
        locs = [self.locs.display[x] for x, hs in st.held.items() if x != loc and v in hs]
        if v in st.undef:
            return ""
        if locs:
            return f"; {self.vname(v)} is in {', '.join(sorted(locs))}"
        return f"; {self.vname(v)} is held nowhere"

    def special(self, text: str) -> int:
        """A code naming a use that is no operand (for messages)."""
        self.specials.append(text)
        return -1 - len(self.specials)

    def describe(self, code: int) -> str:
        """The operand a use code names: ``i << 6 | member + 1``, -1 the guard, below that a
        special use."""
        if code == -1:
            return "guard"
        if code < -1:
            return self.specials[-2 - code]
        i, member = code >> 6, (code & 63) - 1
        return f"operand {i + 1}" + (f" member {member + 1}" if member >= 0 else "")

    def use_error(self, st: State, idx: int, loc: int, v: int, desc: str) -> VerificationError:
        name = self.locs.display[loc]
        return self.fail_at(idx, f"{desc} should hold {self.vname(v)} but {name} holds "
                                 f"{self.show(st, loc)}{self.hint(st, v, loc)}")

    def copy_error(self, st: State, idx: int, src: int, v: int, what: str) -> VerificationError:
        locs = self.locs
        name = locs.display[src]
        extra = ""
        if locs.space(src) == SLOT:
            for o in locs.overlaps[src]:
                if o != src and v in st.held.get(o, ()):
                    extra = (f" (it was written at another width: {locs.display[o]} "
                             f"holds it)")
                    break
        return self.fail_at(idx, f"{what} of {self.vname(v)} reads {name}, which holds "
                                 f"{self.show(st, src)}{extra}{self.hint(st, v, src)}")


def first_diff(a: list, b: list) -> str:
    """The first difference of two lists of texts (allocated, original)."""
    for x, y in zip(a, b):
        if x != y:
            return f"'{x}' where the original has '{y}'"
    if len(a) > len(b):
        return f"extra '{a[len(b)]}'"
    return f"'{b[len(a)]}' is missing"
