"""The independent checker (SPEC section 9, issue 5): proves each allocation from the original
PTX and the allocated PTX alone (docs/allocated-ptx.md), sharing no code with the allocators.

* :func:`verify_module_text` — what ``allocate`` runs (unless ``--no-verify``): parses the
  emitted text back, checks that it is the allocated function held in memory (no emitter
  drift), proves every allocated function and marks its result ``verified``.
* :func:`verify_modules` / :func:`verify_files` — ``ptxalloc verify ORIGINAL.ptx
  ALLOCATED.ptx``.

A refuted allocation raises :class:`~ptxalloc.errors.VerificationError` (exit status 1);
input that cannot be compared raises :class:`CheckerInputError` (exit status 2).

One function's proof is :func:`.checker.check_function`, in modules of one job each:
:mod:`.header` (the ``//@ptxalloc`` header, the ``//@`` annotations), :mod:`.matching` (the
two texts paired, every statement decoded into an event of :mod:`.events`),
:mod:`.placements` (legal placements), :mod:`.locations` (physical names, overlaps),
:mod:`.blocks` (the allocated CFG), :mod:`.bindings` and :mod:`.convention` (the calling
convention), :mod:`.liveness`, :mod:`.lattice` (the abstract domain and the transfer rules,
stated formally), :mod:`.dataflow` (the fixpoint) and :mod:`.messages`. Nothing here imports
``alloc``, ``spill``, ``analysis`` or ``target``.
"""

from __future__ import annotations

import time

from ..errors import PtxSyntaxError, VerificationError
from ..ir.instruction import COMMENT, Instruction, Label, Raw, Removed
from ..ir.operands import Imm, Reg, Sym
from ..ir.module import Function, Module
from ..util import gc_paused
from .checker import CheckerInputError, FunctionProof, check_function, read_header

__all__ = ["verify_module_text", "parse_allocated", "verify_modules", "verify_files", "check_function",
           "CheckerInputError", "FunctionProof", "read_header"]


def parse_allocated(text: str, filename: str = "<allocated>") -> Module:
    """Parse allocated PTX. The ``//@`` annotations trailing inserted instructions are cut off
    before the parser sees them and put back on their instructions (by line) afterwards: the
    parser's fast path takes lines without comments, and the text parsed is otherwise the
    same."""
    from ..ptx.parser import parse
    lines = text.split("\n")
    notes: dict[int, str] = {}
    for i, line in enumerate(lines):
        j = line.find("//@")
        if j > 0:
            code = line[:j].rstrip()
            head = code.lstrip()[:1]
            if code.endswith(";") and head and head not in "./{}":
                notes[i + 1] = line[j:].rstrip()
                lines[i] = code
    if not notes:
        return parse(text, filename, roles=False)
    module = parse("\n".join(lines), filename, roles=False)
    for fn in module.functions:
        for st in fn.body:
            if type(st) is Instruction:
                note = notes.get(st.line)
                if note is not None and not st.comment:
                    st.comment = note
    return module


def verify_module_text(module: Module, text: str, results) -> list[FunctionProof]:
    """Prove every allocated function of ``text`` (the emitted module) against ``module`` (the
    parsed original); ``results`` are the allocator's FunctionResults, each set ``verified =
    True`` when proven. Raises VerificationError on the first refutation."""
    with gc_paused():
        return _verify_module_text(module, text, results)


def _verify_module_text(module: Module, text: str, results) -> list[FunctionProof]:
    t0 = time.perf_counter()
    try:
        allocated = parse_allocated(text, f"{module.filename} (allocated)")
    except PtxSyntaxError as e:
        raise VerificationError(f"the allocated PTX does not parse: {e}") from None
    proofs = []
    decls = module.declarations()
    ofns = {f.name: f for f in module.functions}
    afns = {f.name: f for f in allocated.functions}
    for r in results:
        t1 = time.perf_counter()
        orig = ofns.get(r.name)
        fn = afns.get(r.name)
        if orig is None or fn is None:
            raise VerificationError(f"function '{r.name}' is missing from the "
                                    f"{'original' if orig is None else 'allocated'} module")
        if r.function is not None:
            check_no_drift(fn, r.function, r.names)
        header = read_header(fn)
        if header is None:
            raise VerificationError(f"function '{r.name}': the allocated PTX carries no "
                                    f"//@ptxalloc header")
        budget = getattr(r, "budget", None)
        if budget is not None and header.get("budget") != str(budget):
            raise VerificationError(f"function '{r.name}': the header says budget="
                                    f"{header.get('budget')}, the allocation was for {budget}")
        proof = check_function(orig, fn, header, decls)
        r.verified = True
        elapsed = time.perf_counter() - t1
        proof.seconds = elapsed
        if isinstance(getattr(r, "seconds", None), dict):
            r.seconds["verify"] = r.seconds.get("verify", 0.0) + elapsed
        proofs.append(proof)
    if proofs:
        # the parse of the text is shared by every function: charge it to the first
        proofs[0].seconds += time.perf_counter() - t0 - sum(p.seconds for p in proofs)
    return proofs


def _statements(body) -> list:
    """The instructions, removed-instruction lines and labels of a body, in order."""
    out = []
    for s in body:
        t = type(s)
        if t is Instruction or t is Removed or t is Label:
            out.append(s)
        elif t is Raw and s.kind == COMMENT and s.text.startswith("//@removed"):
            out.append(s)
    return out


def _render(s, name) -> str:
    t = type(s)
    if t is Instruction:
        return s.render(name) + ("\t" + s.comment if s.comment else "")
    if t is Removed:
        return "//@removed " + s.instr.render(name)
    if t is Label:
        return s.name + ":"
    return s.text


def _same(p, m, pnames: list[str], mnames: list[str]) -> bool:
    """Whether parsed statement ``p`` renders like in-memory statement ``m`` (registers by
    name); compares operand by operand, rendering only what is not a plain register,
    immediate or symbol."""
    if type(p) is not Instruction or type(m) is not Instruction:
        return _render(p, pnames.__getitem__) == _render(m, mnames.__getitem__)
    if (p.opcode != m.opcode or p.comment != m.comment or p.guard_neg != m.guard_neg
            or len(p.ops) != len(m.ops)):
        return False
    if p.guard >= 0 or m.guard >= 0:
        if p.guard < 0 or m.guard < 0 or pnames[p.guard] != mnames[m.guard]:
            return False
    for x, y in zip(p.ops, m.ops):
        tx = type(x)
        if tx is not type(y):
            return False
        if tx is Reg:
            if x.comp != y.comp or pnames[x.v] != mnames[y.v]:
                return False
        elif tx is Imm or tx is Sym:
            if x.text != y.text:
                return False
        elif x.render(pnames.__getitem__) != y.render(mnames.__getitem__):
            return False
    return True


def check_no_drift(parsed: Function, in_memory: Function, names: list[str]) -> None:
    """The allocated PTX, parsed back, is the allocated function held in memory: every
    instruction, removed-instruction line and label renders the same (no emitter drift)."""
    a = _statements(parsed.body)
    b = _statements(in_memory.body)
    pnames = parsed.regs.names
    for x, y in zip(a, b):
        if not _same(x, y, pnames, names):
            text = " ".join(_render(x, pnames.__getitem__).split())
            want = " ".join(_render(y, names.__getitem__).split())
            raise VerificationError(f"function '{parsed.name}', line {x.line}: the emitted PTX "
                                    f"reads '{text}' where the allocation holds '{want}' "
                                    f"(emitter drift)")
    if len(a) != len(b):
        raise VerificationError(f"function '{parsed.name}': the emitted PTX has {len(a)} "
                                f"instructions and labels, the allocation {len(b)} (emitter "
                                f"drift)")


def verify_modules(original: Module, allocated: Module) -> list[FunctionProof]:
    """Prove every allocated function of ``allocated`` against ``original``. Functions without
    a ``//@ptxalloc`` header must be unchanged. Raises CheckerInputError when the modules do
    not correspond or nothing in ``allocated`` is an allocation."""
    ofns = original.functions
    afns = allocated.functions
    if [f.name for f in ofns] != [f.name for f in afns]:
        raise CheckerInputError(
            f"the functions differ: {original.filename} has "
            f"{', '.join(f.name for f in ofns) or 'none'}; {allocated.filename} has "
            f"{', '.join(f.name for f in afns) or 'none'}")
    proofs = []
    decls = original.declarations()
    for o, a in zip(ofns, afns):
        header = read_header(a)
        if header is None:
            _check_unchanged(o, a)
            continue
        proofs.append(check_function(o, a, header, decls))
    if not proofs:
        raise CheckerInputError(f"{allocated.filename}: no function carries a //@ptxalloc "
                                f"header (is it an allocated file?)")
    return proofs


def _check_unchanged(o: Function, a: Function) -> None:
    x = [s.render(o.regs.names.__getitem__) for s in o.body if type(s) is Instruction]
    y = [s.render(a.regs.names.__getitem__) for s in a.body if type(s) is Instruction]
    if x != y:
        raise CheckerInputError(f"function '{a.name}' carries no //@ptxalloc header but differs "
                                f"from the original")


def verify_files(original_path: str, allocated_path: str) -> list[FunctionProof]:
    """``-`` (standard input) may name one of the two files."""
    from ..files import read_input
    from ..ptx.parser import parse_file
    data, name = read_input(allocated_path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckerInputError(f"{name}: not UTF-8 text") from None
    with gc_paused():
        original = parse_file(original_path)
        return verify_modules(original, parse_allocated(text, name))
