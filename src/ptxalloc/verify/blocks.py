"""Basic blocks for the checker (SPEC section 9, issue 5): the checker's own, lighter than
:class:`ptxalloc.ir.cfg.CFG` (it needs no dominators, loops or frequencies), with the same
cutting rules — a block starts at a label and after a control transfer; ``bra`` (guarded or
not), ``brx.idx`` with its ``.branchtargets`` list, ``ret``, ``exit`` and ``trap`` end a block;
a guarded one falls through as well. Labels are looked up function-wide: the parser resolves
them by ``{ }`` scope and renames shadowing ones, for the original and the allocated text alike.
"""

from __future__ import annotations

from ..errors import PtxSyntaxError
from ..ir.instruction import Instruction, Label
from ..ir.operands import Sym

_TERMINATORS = frozenset(("bra", "brx", "ret", "exit", "trap"))


class Blocks:
    """``first[b]``/``count[b]``: the instruction range of block b (instruction indices in body
    order); ``labels[b]``; ``succs[b]``/``preds[b]``; ``rpo``: the blocks reachable from the
    entry in reverse post-order; ``reachable[b]``."""

    def __init__(self, body: list, branch_targets: dict[str, list[str]], fn_name: str = "",
                 filename: str = "<input>"):
        first: list[int] = [0]
        count: list[int] = [0]
        labels: list[list[str]] = [[]]
        ends: list = []                       # per block: its terminator, or None
        label_block: dict[str, int] = {}
        n = 0
        open_block = True
        for s in body:
            t = type(s)
            if t is Instruction:
                if not open_block:
                    first.append(n)
                    count.append(0)
                    labels.append([])
                    open_block = True
                count[-1] += 1
                n += 1
                op = s.opcode
                if op[0] in "bret" and op.split(".", 1)[0] in _TERMINATORS:
                    ends.append(s)
                    open_block = False
            elif t is Label:
                if (open_block and count[-1]) or not open_block:
                    if open_block:
                        ends.append(None)
                    first.append(n)
                    count.append(0)
                    labels.append([])
                    open_block = True
                labels[-1].append(s.name)
                label_block[s.name] = len(first) - 1
        if open_block:
            ends.append(None)
        nb = len(first)
        succs: list[list[int]] = [[] for _ in range(nb)]
        preds: list[list[int]] = [[] for _ in range(nb)]
        for b in range(nb):
            term = ends[b]
            fall = b + 1 if b + 1 < nb else -1
            out: list[int] = []
            if term is None:
                if fall >= 0:
                    out.append(fall)
            else:
                base = term.opcode.split(".", 1)[0]
                targets: list[str] = []
                if base in ("bra", "brx"):
                    lab = next((op.text for op in term.ops if type(op) is Sym), None)
                    if base == "bra":
                        targets = [lab]
                    else:
                        targets = branch_targets.get(lab, [])
                    for name in targets:
                        if name not in label_block:
                            raise PtxSyntaxError(f"in function '{fn_name}': branch to unknown "
                                                 f"label '{name}'", filename, term.line, 1)
                        out.append(label_block[name])
                if term.guard >= 0 and fall >= 0:
                    out.append(fall)
            seen = set()
            for x in out:
                if x not in seen:
                    seen.add(x)
                    succs[b].append(x)
                    preds[x].append(b)
        self.first = first
        self.count = count
        self.labels = labels
        self.succs = succs
        self.preds = preds
        self.n = nb
        self.instructions = n
        # reverse post-order of the blocks reachable from the entry
        reachable = [False] * nb
        order: list[int] = []
        reachable[0] = True
        stack = [(0, iter(succs[0]))]
        while stack:
            b, it = stack[-1]
            for x in it:
                if not reachable[x]:
                    reachable[x] = True
                    stack.append((x, iter(succs[x])))
                    break
            else:
                stack.pop()
                order.append(b)
        order.reverse()
        self.rpo = order
        self.reachable = reachable
