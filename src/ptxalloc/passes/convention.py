"""Pre-pass: bind arguments and results to the calling convention's registers (seed 003;
SPEC section 7; :mod:`ptxalloc.alloc.convention` states the rules).

In PTX, arguments and results travel through ``.param`` space, so the model binds the
registers that move them in and out of it:

* in a ``.func``, the result of ``ld.param`` of its own parameter i is bound to that argument's
  register, and the source of ``st.param`` into its return parameter to R0 (R0:R1);
* at a call site, the source of ``st.param`` into the call's i-th argument parameter is bound to
  the argument register, and the result of ``ld.param`` from the call's return parameter to R0;
* an old-ABI ``call (%r1), f, (%r2)`` passes registers directly: its return and argument
  registers are bound the same way.

Each binding goes through a fresh *precolored* register and a copy (``mov``) to or from the
original value, so coalescing decides whether the value itself can live in the convention's
register; precolored registers make their placement unavailable to every neighbour (seed 002
edge cases 2 and 3). A tail call — a call whose result is only returned — is detected and
counted (PTX has no jump to another function, so it stays a call).
"""

from __future__ import annotations

from itertools import islice

from ..alloc.convention import ConventionInfo
from ..analysis.calls import is_call
from ..ir import build
from ..ir.edits import Edit, EditKind
from ..ir.instruction import DIRECTIVE, SCOPE_CLOSE, SCOPE_OPEN, Instruction, Raw
from ..ir.module import Function
from ..ir.operands import Args, Mem, Reg, Sym
from ..ir.registers import RegClass
from ..ptx.parser import parse_param_declaration
from ..target.abi import Convention, assign_arguments, return_register


def _param_base(op) -> tuple[str, str] | None:
    """(symbol, offset text) of a ``[sym+off]`` address."""
    if type(op) is Mem and type(op.base) is Sym and not op.rest:
        return op.base.text, op.offset
    return None


def _whole(offset: str) -> bool:
    return offset in ("", "+0")


def _with_param_sizes(fn: Function, module_decls: list[str]):
    """Each instruction of ``fn`` with the sizes of the ``.param`` symbols declared where it
    stands: nvcc declares ``param0``, ``param1`` ... afresh, with other sizes, in the scope of
    every call sequence, so a name means what its innermost declaration says."""
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


def bind_convention(fn: Function, conv: Convention, module_decls: list[str],
                    origin_of: dict[int, int]) -> ConventionInfo:
    """Bind argument and result values to the convention's registers (in place); returns what
    the convention found (calls, the precolored registers and the values bound to them). New
    registers are recorded in ``origin_of`` with the value they carry."""
    info = ConventionInfo()
    instrs = fn.instructions()
    info.calls = sum(1 for ins in instrs if is_call(ins))
    info.leaf = info.calls == 0
    info.active = fn.kind == "func" or not info.leaf
    info.guarded_ret = any(ins.base == "ret" and ins.guard >= 0
                           for ins in instrs)
    if not info.active:
        return info
    regs = fn.regs
    # the function's own parameters and return value
    # (register, size in bytes) of each parameter the convention binds
    own_arg: dict[str, tuple[int, int]] = {}
    if fn.kind == "func" and all(p.space == "param" for p in fn.params):
        for p, r in zip(fn.params, assign_arguments([p.size for p in fn.params], conv)):
            if r is not None:
                own_arg[p.name] = (r, p.size)
    own_ret: dict[str, tuple[int, int]] = {}
    if fn.kind == "func" and len(fn.returns) == 1 and fn.returns[0].space == "param":
        r = return_register(fn.returns[0].size, conv)
        if r is not None:
            own_ret[fn.returns[0].name] = (r, fn.returns[0].size)
    # call sites: which st.param feeds which argument, which ld.param reads which result
    bind_use: dict[int, tuple[int, int]] = {}       # id(st.param) -> (register, size)
    bind_def: dict[int, tuple[int, int]] = {}       # id(ld.param) -> (register, size)
    last_store: dict[str, Instruction] = {}
    pending_ret: dict[str, tuple[int, int]] = {}
    for ins, sizes in _with_param_sizes(fn, module_decls):
        opc = ins.opcode
        if opc.startswith("st.param") and len(ins.ops) == 2:
            pb = _param_base(ins.ops[0])
            if pb is not None:
                last_store[pb[0]] = ins
                if pb[0] in own_ret and _whole(pb[1]):
                    bind_use[id(ins)] = own_ret[pb[0]]
        elif opc.startswith("ld.param") and len(ins.ops) == 2:
            pb = _param_base(ins.ops[1])
            if pb is not None and _whole(pb[1]):
                if pb[0] in own_arg:
                    bind_def[id(ins)] = own_arg[pb[0]]
                elif pb[0] in pending_ret:
                    bind_def[id(ins)] = pending_ret.pop(pb[0])
        elif is_call(ins):
            rets, args = _call_lists(ins)
            arg_names = [a.text for a in args if type(a) is Sym]
            if len(arg_names) == len(args):
                arg_sizes = [sizes.get(n, 4) for n in arg_names]
                regs_for = assign_arguments(arg_sizes, conv)
                for name, r, size in zip(arg_names, regs_for, arg_sizes):
                    st = last_store.pop(name, None)
                    if st is not None and r is not None:
                        pb = _param_base(st.ops[0])
                        if _whole(pb[1]):
                            bind_use[id(st)] = (r, size)
            if len(rets) == 1 and type(rets[0]) is Sym:
                size = sizes.get(rets[0].text, 4)
                r = return_register(size, conv)
                if r is not None:
                    pending_ret[rets[0].text] = (r, size)
    info.tail_calls = _tail_calls(fn)
    # rewrite: precolored temporaries and copies
    body = []
    for s in fn.body:
        if type(s) is not Instruction:
            body.append(s)
            continue
        pre: list[Instruction] = []
        post: list[Instruction] = []
        new = s
        if id(s) in bind_use:
            src = s.ops[1]
            reg, size = bind_use[id(s)]
            if type(src) is Reg and not src.comp and s.guard < 0 and _fits(regs, src.v, size):
                t = _precolored(fn, src.v, reg, info, origin_of)
                pre.append(_move(regs, t, src.v, origin_of, s.line))
                new = s.copy_with([s.ops[0], Reg(t)])
        elif id(s) in bind_def:
            dst = s.ops[0]
            reg, size = bind_def[id(s)]
            if type(dst) is Reg and not dst.comp and s.guard < 0 and _fits(regs, dst.v, size):
                t = _precolored(fn, dst.v, reg, info, origin_of)
                new = s.copy_with([Reg(t), s.ops[1]])
                post.append(_move(regs, dst.v, t, origin_of, s.line))
        elif is_call(s):
            new = _bind_register_call(fn, s, conv, info, origin_of, pre, post)
        body.extend(pre)
        body.append(new)
        body.extend(post)
    fn.body = body
    return info


def _call_lists(ins: Instruction) -> tuple[list, list]:
    """(return list, argument list) of a call."""
    rets: list = []
    args: list = []
    seen_target = False
    for op in ins.ops:
        if type(op) is Args:
            if seen_target:
                args = op.items
            else:
                rets = op.items
        else:
            seen_target = True
    return rets, args


def _bind_register_call(fn: Function, ins: Instruction, conv: Convention,
                        info: ConventionInfo, origin_of: dict[int, int], pre: list,
                        post: list) -> Instruction:
    """Old ABI: ``call (%r1), f, (%r2, %r3)`` passes registers; bind them."""
    regs = fn.regs
    rets, args = _call_lists(ins)
    reg_args = [a for a in args if type(a) is Reg and not a.comp]
    reg_rets = [r for r in rets if type(r) is Reg and not r.comp]
    if not reg_args and not reg_rets:
        return ins
    arg_regs = assign_arguments([build.width_bytes(regs, a.v) for a in reg_args], conv)
    mapping: dict[int, Reg] = {}
    for a, r in zip(reg_args, arg_regs):
        # predicates are outside the convention (target/abi.py): they keep their place in the
        # numbering (as the checker's verify/bindings.py counts) but are not bound
        if r is not None and a.v not in mapping and regs.classes[a.v] != RegClass.PRED:
            t = _precolored(fn, a.v, r, info, origin_of)
            pre.append(_move(regs, t, a.v, origin_of, ins.line))
            mapping[a.v] = Reg(t)
    ret_map: dict[int, Reg] = {}
    if len(reg_rets) == 1:
        r = return_register(build.width_bytes(regs, reg_rets[0].v), conv)
        if r is not None and regs.classes[reg_rets[0].v] != RegClass.PRED:
            v = reg_rets[0].v
            t = _precolored(fn, v, r, info, origin_of)
            post.append(_move(regs, v, t, origin_of, ins.line))
            ret_map[v] = Reg(t)
    new_ops = []
    seen_target = False
    for op in ins.ops:
        if type(op) is Args:
            table = mapping if seen_target else ret_map
            op = Args([table.get(it.v, it) if type(it) is Reg and not it.comp else it
                       for it in op.items])
        else:
            seen_target = True
        new_ops.append(op)
    return ins.copy_with(new_ops)


def _fits(regs, v: int, size: int) -> bool:
    """Whether register ``v`` can stand for a parameter of ``size`` bytes in its convention
    register: a 64-bit register for an 8-byte one, a 32- or 16-bit register for a smaller one
    (``ld.param.s32 %rd1, [p]`` widens a 4-byte parameter into a pair: it binds nothing)."""
    width = build.width_bytes(regs, v)
    if regs.classes[v] == RegClass.PRED or regs.vec[v] > 1:
        return False
    return width == 8 if size > 4 else width <= 4


def _precolored(fn: Function, like: int, reg: int, info: ConventionInfo,
                origin_of: dict[int, int]) -> int:
    regs = fn.regs
    t = regs.like(like, f"{regs.names[like]}$abi")
    origin_of[t] = origin_of.get(like, like)
    info.precolored[t] = 2 * reg
    info.bound_values.add(like)
    return t


def _move(regs, dst: int, src: int, origin_of: dict[int, int], line: int) -> Instruction:
    mv = build.copy(regs, dst, src, line)
    mv.origin = Edit(EditKind.MOVE, origin_of.get(dst, dst))
    return mv


def _tail_calls(fn: Function) -> int:
    """Calls followed, in their block, only by moving their result to the function's return
    parameter and returning."""
    ret_names = {p.name for p in fn.returns}
    count = 0
    instrs = fn.instructions()
    for i, ins in enumerate(instrs):
        if not is_call(ins):
            continue
        rets, _ = _call_lists(ins)
        names = {r.text for r in rets if type(r) is Sym}
        carried: set[int] = {r.v for r in rets if type(r) is Reg}
        ok = False
        for nxt in islice(instrs, i + 1, None):
            opc = nxt.opcode
            if opc.startswith("ld.param"):
                pb = _param_base(nxt.ops[1]) if len(nxt.ops) == 2 else None
                if pb is None or pb[0] not in names:
                    break
                carried.update(nxt.defs)
            elif opc.startswith("st.param"):
                pb = _param_base(nxt.ops[0]) if len(nxt.ops) == 2 else None
                if pb is None or pb[0] not in ret_names or not set(nxt.uses) <= carried:
                    break
            elif nxt.is_copy and set(nxt.uses) <= carried:
                carried.update(nxt.defs)
            elif nxt.base == "ret" and nxt.guard < 0:
                ok = True
                break
            else:
                break
        count += ok
    return count
