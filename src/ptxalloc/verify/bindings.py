"""The calling convention's register bindings, derived by the checker itself from the original
function (SPEC section 7, seed 003; docs/allocated-ptx.md, "The calling convention").

With budget K, arguments are assigned in order from their sizes: up to 4 bytes the next
register, 8 bytes the next even pair, over 8 bytes a pair slot that binds nothing (by reference);
what does not fit below R(min(8, K)) binds nothing (stack). The return value binds R0 (R0:R1)
unless it is over 8 bytes. An instruction that moves a bound value in or out of ``.param`` space
must use the bound register itself:

* in a ``.func`` whose parameters are all ``.param``: every unguarded ``ld.param r, [p+0]`` of
  its own parameter p, and every unguarded ``st.param [ret+0], r`` into its single ``.param``
  return value;
* at a call: the last ``st.param [a+0], r`` before the call into its i-th argument a, and the
  first ``ld.param r, [ret+0]`` after it from its return parameter;
* an old-ABI ``call (r), f, (a, b)``: its register arguments (the first occurrence of each
  value decides) and its single register result.

``r`` binds only when it is one whole register of the parameter's size: a 64-bit register for an
8-byte parameter, a 16- or 32-bit one for a smaller one, never a predicate or a vector register.
Parameter sizes come from the ``.param`` declaration in scope (the function's own, nvcc's
per-call-sequence blocks, the module's), 4 bytes when none is found.

The checker shares no code with the allocators: this is its own reading of the documented rule.
"""

from __future__ import annotations

from ..ir.instruction import DIRECTIVE, SCOPE_CLOSE, SCOPE_OPEN, Instruction, Raw
from ..ir.module import Function
from ..ir.operands import Args, Mem, Reg, Sym
from ..ptx.parser import parse_param_declaration
from .convention import ARG_REGS
from .locations import CLASS_BITS


class Binding:
    """One register operand the convention binds: ``path`` is (operand index, member index or
    -1), ``reg`` the first bound register, ``what`` names the binding for messages."""

    __slots__ = ("path", "reg", "size", "what")

    def __init__(self, path: tuple[int, int], reg: int, size: int, what: str):
        self.path = path
        self.reg = reg
        self.size = size
        self.what = what

    def wanted(self, stem: str, cls: str, vec: int) -> str:
        """The physical register the bound operand must be."""
        r = self.reg
        if vec > 1:
            return f"a %{stem}V register starting at R{r}"
        if cls == "GPR64":
            return f"%{stem}RD{r} (R{r}:R{r + 1})"
        if cls == "H16":
            return f"%{stem}H{2 * r} (the low half of R{r})"
        return f"%{stem}R{r}"


def argument_registers(sizes: list[int], budget: int) -> list[int | None]:
    """The first register of each argument, or None where it binds nothing."""
    limit = min(ARG_REGS, budget)
    out: list[int | None] = []
    nxt = 0
    for size in sizes:
        if size > 8:                        # by reference: a pair slot, nothing bound
            nxt += (nxt & 1) + 2
            out.append(None)
        elif size > 4:
            nxt += nxt & 1
            out.append(nxt if nxt + 2 <= limit else None)
            nxt += 2
        else:
            out.append(nxt if nxt < limit else None)
            nxt += 1
    return out


def return_register_of(size: int, budget: int) -> int | None:
    if size > 8 or (size > 4 and budget < 2):
        return None
    return 0


def _param_name(op) -> tuple[str, bool] | None:
    """(symbol, whether the offset is 0) of a ``[sym+off]`` address."""
    if type(op) is Mem and type(op.base) is Sym and not op.rest:
        return op.base.text, op.offset in ("", "+0")
    return None


def _fits(cls: str, vec: int, size: int) -> bool:
    if cls == "PRED" or vec > 1:
        return False
    width = CLASS_BITS[cls] // 8
    return width == 8 if size > 4 else width <= 4


def find_bindings(fn: Function, module_decls: list[str], budget: int,
                  classes: list[str]) -> dict[int, list[Binding]]:
    """The bindings of ``fn`` (the original) by ``id`` of its instructions; ``classes`` are its
    registers' class names."""
    regs = fn.regs
    vec = regs.vec
    found: dict[int, list[Binding]] = {}

    def bind(ins: Instruction, path: tuple[int, int], reg: int, size: int, what: str) -> None:
        i, j = path
        op = ins.ops[i] if j < 0 else ins.ops[i].items[j]
        if (type(op) is Reg and not op.comp and ins.guard < 0
                and _fits(classes[op.v], vec[op.v], size)):
            found.setdefault(id(ins), []).append(Binding(path, reg, size, what))

    own_arg: dict[str, tuple[int, int, int]] = {}
    if fn.kind == "func" and all(p.space == "param" for p in fn.params):
        for k, (p, r) in enumerate(zip(fn.params, argument_registers(
                [p.size for p in fn.params], budget))):
            if r is not None:
                own_arg[p.name] = (r, p.size, k)
    own_ret: dict[str, tuple[int, int]] = {}
    if fn.kind == "func" and len(fn.returns) == 1 and fn.returns[0].space == "param":
        r = return_register_of(fn.returns[0].size, budget)
        if r is not None:
            own_ret[fn.returns[0].name] = (r, fn.returns[0].size)
    last_store: dict[str, Instruction] = {}
    pending_ret: dict[str, tuple[int, int]] = {}
    for ins, sizes in _with_param_sizes(fn, module_decls):
        opc = ins.opcode
        if opc.startswith("st.param") and len(ins.ops) == 2:
            pn = _param_name(ins.ops[0])
            if pn is not None:
                last_store[pn[0]] = ins
                if pn[1] and pn[0] in own_ret:
                    r, size = own_ret[pn[0]]
                    bind(ins, (1, -1), r, size, f"the return value stored into '{pn[0]}'")
        elif opc.startswith("ld.param") and len(ins.ops) == 2:
            pn = _param_name(ins.ops[1])
            if pn is not None and pn[1]:
                if pn[0] in own_arg:
                    r, size, k = own_arg[pn[0]]
                    bind(ins, (0, -1), r, size, f"the function's own argument {k + 1} "
                                                f"'{pn[0]}'")
                elif pn[0] in pending_ret:
                    r, size = pending_ret.pop(pn[0])
                    bind(ins, (0, -1), r, size, f"the call's result read from '{pn[0]}'")
        elif ins.base == "call":
            rets, args = _call_lists(ins)
            if args and all(type(a) is Sym for a in args):
                names = [a.text for a in args]
                arg_sizes = [sizes.get(n, 4) for n in names]
                for k, (name, r, size) in enumerate(zip(names, argument_registers(
                        arg_sizes, budget), arg_sizes)):
                    st = last_store.pop(name, None)
                    if st is not None and r is not None and _param_name(st.ops[0])[1]:
                        found.pop(id(st), None)      # a call argument's binding decides
                        bind(st, (1, -1), r, size, f"argument {k + 1} '{name}' of the call "
                                                   f"on line {ins.line}")
            if len(rets) == 1 and type(rets[0]) is Sym:
                r = return_register_of(sizes.get(rets[0].text, 4), budget)
                if r is not None:
                    pending_ret[rets[0].text] = (r, sizes.get(rets[0].text, 4))
            _register_call(ins, budget, classes, vec, found)
    return found


def _register_call(ins: Instruction, budget: int, classes: list[str], vec: list[int],
                   found: dict[int, list[Binding]]) -> None:
    """Old ABI: ``call (%r1), f, (%r2, %r3)`` passes registers; each value's first occurrence
    decides its register."""
    ret_i, arg_i = _call_list_positions(ins)
    out: list[Binding] = []
    if arg_i >= 0:
        items = ins.ops[arg_i].items
        reg_at = [j for j, a in enumerate(items) if type(a) is Reg and not a.comp]
        skip = {j for j in reg_at if classes[items[j].v] == "PRED"}   # no unit to check
        sizes = [CLASS_BITS[classes[items[j].v]] // 8 * max(1, vec[items[j].v]) for j in reg_at]
        first: dict[int, tuple[int, int]] = {}
        for k, (j, r) in enumerate(zip(reg_at, argument_registers(sizes, budget))):
            v = items[j].v
            if v not in first and r is not None:
                first[v] = (r, k)
            got = first.get(v)
            if got is not None and j not in skip:
                out.append(Binding((arg_i, j), got[0], sizes[k],
                                   f"register argument {got[1] + 1} of the call"))
    if ret_i >= 0:
        items = ins.ops[ret_i].items
        reg_at = [j for j, a in enumerate(items) if type(a) is Reg and not a.comp]
        if len(reg_at) == 1:
            v = items[reg_at[0]].v
            size = CLASS_BITS[classes[v]] // 8 * max(1, vec[v])
            r = return_register_of(size, budget)
            if r is not None and classes[v] != "PRED":
                out.append(Binding((ret_i, reg_at[0]), r, size, "the call's register result"))
    if out:
        found.setdefault(id(ins), []).extend(out)


def _call_list_positions(ins: Instruction) -> tuple[int, int]:
    """Operand indexes of a call's return list and argument list (-1 where it has none)."""
    ret_i = arg_i = -1
    seen_target = False
    for i, op in enumerate(ins.ops):
        if type(op) is Args:
            if seen_target:
                arg_i = i
            else:
                ret_i = i
        else:
            seen_target = True
    return ret_i, arg_i


def _call_lists(ins: Instruction) -> tuple[list, list]:
    """(return list, argument list) of a call."""
    ret_i, arg_i = _call_list_positions(ins)
    return (ins.ops[ret_i].items if ret_i >= 0 else [],
            ins.ops[arg_i].items if arg_i >= 0 else [])


def _with_param_sizes(fn: Function, module_decls: list[str]):
    """Each instruction of ``fn`` with the sizes of the ``.param`` symbols declared where it
    stands (a name means what its innermost declaration says)."""
    sizes: dict[str, int] = {}
    for text in module_decls:
        p = parse_param_declaration(text)
        if p is not None:
            sizes[p.name] = p.size
    stack: list[list[tuple[str, int | None]]] = [[]]
    for s in fn.body:
        t = type(s)
        if t is Instruction:
            yield s, sizes
        elif t is Raw:
            if s.kind == SCOPE_OPEN:
                stack.append([])
            elif s.kind == SCOPE_CLOSE and len(stack) > 1:
                for name, prev in reversed(stack.pop()):
                    if prev is None:
                        sizes.pop(name, None)
                    else:
                        sizes[name] = prev
            elif s.kind == DIRECTIVE and s.text.startswith(".param"):
                p = parse_param_declaration(s.text)
                if p is not None:
                    stack[-1].append((p.name, sizes.get(p.name)))
                    sizes[p.name] = p.size
