"""The checker is not a rubber stamp (issue 5, SPEC section 9): take a correct allocation of real
PTX (``tests/data/pressure_sm80.ptx`` at K = 15, so there is spill code; ``vectors_sm80.ptx``
for register tuples), plant one bug of each kind in the allocated TEXT and require that the
checker — through the API and through ``ptxalloc verify`` — reports it with the right kind of
message.

Each mutation is chosen so that it is a bug for certain, not merely a change: the site is
found by reading the allocated text (a reload whose register still holds another value, a
store right after the definition it saves, a 64-bit definition right before a use of a 32-bit
register it would cover ...).
"""

from __future__ import annotations

import re
from functools import lru_cache

import pytest

from conftest import DATA
from ptxalloc.cli import main
from ptxalloc.errors import VerificationError
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import parse_file
from ptxalloc.verify import parse_allocated, verify_module_text, verify_modules

PRESSURE = DATA / "pressure_sm80.ptx"
VECTORS = DATA / "vectors_sm80.ptx"

_ANN = re.compile(r"//@(\w+)\s+(\S+)")
_FIRST = re.compile(r"^\s*(?:@!?%\w+\s+)?([\w.:]+)\s+([^,;\s]+)")
_REG = re.compile(r"%R(D|Q)?(\d+)\b")


@lru_cache(maxsize=None)
def allocated(path, budget: int = 15) -> str:
    return allocate(path.read_text(), budget, filename=str(path)).ptx


def check(path, text: str) -> None:
    """Run the checker on a (mutated) allocated text."""
    verify_modules(parse_file(str(path)), parse_allocated(text, "mutated.ptx"))


def refuted(path, text: str, pattern: str) -> str:
    with pytest.raises(VerificationError) as e:
        check(path, text)
    message = str(e.value)
    assert re.search(pattern, message), message
    return message


def lines_of(text: str) -> list[str]:
    return text.split("\n")


def annotation(line: str):
    m = _ANN.search(line)
    return (m.group(1), m.group(2)) if m else (None, None)


def first_operand(line: str) -> str | None:
    """The first operand of an instruction line (its destination for most opcodes)."""
    code = line.split("//")[0]
    if not code.strip().endswith(";"):
        return None
    m = _FIRST.match(code)
    return m.group(2) if m else None


def is_instruction(line: str) -> bool:
    code = line.split("//")[0].strip()
    return code.endswith(";") and not code.startswith((".", "{", "}"))


def ends_block(line: str) -> bool:
    s = line.strip()
    return s.endswith(":") or bool(re.match(r"(@!?%\w+\s+)?(bra|ret|exit|brx)\b", s))


def test_the_unmutated_allocations_verify():
    check(PRESSURE, allocated(PRESSURE))
    check(VECTORS, allocated(VECTORS))


# --- the mutations ---------------------------------------------------------------------------

def _swap_sites(text):
    """Original instructions reading two different 32-bit registers, neither of them the
    destination (``add %R1, %R2, %R3``; ``fma %R5, %R5, %R7, %R6`` swaps %R7 and %R6)."""
    for i, line in enumerate(lines_of(text)):
        if not is_instruction(line) or "//@" in line or line.strip().startswith(("st.", "@")):
            continue
        regs = re.findall(r"%R\d+\b", line.split("//")[0])
        sources = [r for r in regs[1:] if r != regs[0]] if len(regs) >= 3 else []
        if len(sources) >= 2 and len(set(sources)) == len(sources):
            yield i, sources[0], sources[1]


def test_swap_two_registers_in_one_instruction():
    text = allocated(PRESSURE)
    lines = lines_of(text)
    i, a, b = next(_swap_sites(text))
    lines[i] = re.sub(rf"{a}\b|{b}\b", lambda m: b if m.group() == a else a, lines[i])
    refuted(PRESSURE, "\n".join(lines), rf"line {i + 1} .*operand \d should hold %[\w$]+#\d+ but "
                                         rf"%R\d+ holds")


def _dropped_reload_sites(text):
    """A reload of v into N where N surely holds another value w: the last write of N before it
    in its block is a reload or remat of w, or N was just stored as w."""
    lines = lines_of(text)
    for i, line in enumerate(lines):
        kind, value = annotation(line)
        if kind != "reload":
            continue
        reg = first_operand(line)
        for j in range(i - 1, -1, -1):
            prev = lines[j]
            if ends_block(prev):
                break
            k2, v2 = annotation(prev)
            if k2 == "spill" and re.search(rf",\s*{re.escape(reg)};", prev):
                if v2 != value:
                    yield i, value
                break
            if is_instruction(prev) and first_operand(prev) == reg:
                if k2 in ("reload", "remat") and v2 != value:
                    yield i, value
                break


def test_drop_a_reload():
    text = allocated(PRESSURE)
    sites = list(_dropped_reload_sites(text))
    assert sites, "no reload to drop"
    for i, value in sites[:5]:
        lines = lines_of(text)
        del lines[i]
        refuted(PRESSURE, "\n".join(lines), rf"should hold {re.escape(value)} but")


def _slots(text):
    """Spill slots by (offset, width) -> the values stored there."""
    out: dict[tuple[int, str], set[str]] = {}
    for line in lines_of(text):
        m = re.search(r"st\.local\.(b\d+)\s+\[__ptxalloc_spill\+(\d+)\].*//@spill (\S+)", line)
        if m:
            out.setdefault((int(m.group(2)), m.group(1)), set()).add(m.group(3))
    return out


def test_reload_from_the_wrong_slot():
    text = allocated(PRESSURE)
    slots = _slots(text)
    lines = lines_of(text)
    for i, line in enumerate(lines):
        m = re.search(r"ld\.local\.(b\d+)\s+\S+, \[__ptxalloc_spill\+(\d+)\];\s*//@reload (\S+)",
                      line)
        if not m:
            continue
        width, off, value = m.group(1), int(m.group(2)), m.group(3)
        other = next((o for (o, w), vals in sorted(slots.items())
                      if w == width and o != off and value not in vals), None)
        if other is None:
            continue
        lines[i] = line.replace(f"[__ptxalloc_spill+{off}]", f"[__ptxalloc_spill+{other}]")
        refuted(PRESSURE, "\n".join(lines),
                rf"line {i + 1} .*reload of {re.escape(value)} reads \[__ptxalloc_spill\+"
                rf"{other}\] \(\d+ bytes\), which holds")
        return
    pytest.fail("no reload to redirect")


def test_store_the_wrong_register():
    text = allocated(PRESSURE)
    lines = lines_of(text)
    reloaded = {annotation(line)[1] for line in lines if annotation(line)[0] == "reload"}
    for i, line in enumerate(lines):
        m = re.search(r"st\.local\.b32\s+\[[^\]]+\], (%R\d+);\s*//@spill (\S+)", line)
        if not m or m.group(2) not in reloaded:
            continue
        prev = lines[i - 1]
        if "//@" in prev or first_operand(prev) != m.group(1):
            continue            # the store must follow the definition it saves
        other = "%R0" if m.group(1) != "%R0" else "%R1"
        lines[i] = line.replace(f"], {m.group(1)};", f"], {other};")
        refuted(PRESSURE, "\n".join(lines),
                rf"line {i + 1} .*spill store of {re.escape(m.group(2))} reads {other}, which "
                rf"holds")
        return
    pytest.fail("no store to corrupt")


def test_pair_overlapping_a_live_32_bit_value():
    """A 64-bit definition moved onto the pair that holds a 32-bit value read right after."""
    text = allocated(PRESSURE)
    lines = lines_of(text)
    decl = re.search(r"\.reg \.b64 %RD<(\d+)>", text)
    for i in range(1, len(lines)):
        use, prev = lines[i], lines[i - 1]
        if not (is_instruction(use) and is_instruction(prev)) or "//@" in use + prev:
            continue
        dst = first_operand(prev)
        if not dst or not re.fullmatch(r"%RD\d+", dst):
            continue
        srcs = re.findall(r"%R(\d+)\b", use.split("//")[0].split(",", 1)[-1])
        for r in map(int, srcs):
            pair = r & ~1
            b = int(dst[3:])
            if pair == b or f"%R{r}" in prev or pair + 1 >= 15 or pair >= int(decl.group(1)):
                continue
            mutated = lines[:]
            mutated[i - 1] = prev.replace(dst, f"%RD{pair}", 1)
            refuted(PRESSURE, "\n".join(mutated),
                    rf"line {i + 1} .*should hold %\w+#\d+ but %R{r} holds nothing")
            return
    pytest.fail("no 64-bit definition before a 32-bit use")


def test_exceed_the_budget():
    text = allocated(PRESSURE)
    lines = lines_of(text)
    for i, line in enumerate(lines):
        if is_instruction(line) and "//@" not in line and re.search(r"%R3\b", line):
            lines[i] = re.sub(r"%R3\b", "%R15", line)
            mutated = re.sub(r"\.reg \.b32 %R<15>;", ".reg .b32 %R<16>;", "\n".join(lines))
            refuted(PRESSURE, mutated, rf"line {i + 1} .*%R15 \(R15\) is outside the budget of 15 "
                                       rf"registers \(R0-R14\)")
            return
    pytest.fail("no %R3 to move")


def test_misaligned_pair():
    text = allocated(PRESSURE)
    lines = lines_of(text)
    for i, line in enumerate(lines):
        m = re.search(r"%RD(\d+)\b", line)
        if is_instruction(line) and "//@" not in line and m and int(m.group(1)) % 2 == 0:
            n = int(m.group(1)) + 1
            lines[i] = line.replace(m.group(0), f"%RD{n}")
            mutated = re.sub(r"\.reg \.b64 %RD<\d+>;", ".reg .b64 %RD<15>;", "\n".join(lines))
            refuted(PRESSURE, mutated, rf"line {i + 1} .*%RD{n} is not an even-aligned pair")
            return
    pytest.fail("no pair")


def test_tuple_out_of_order():
    text = allocated(VECTORS, 255)
    lines = lines_of(text)
    for i, line in enumerate(lines):
        m = re.search(r"\{(%R\d+), (%R\d+), (%R\d+), (%R\d+)\}", line)
        if m and ("ld." in line or "st." in line):
            a, b, c, d = m.groups()
            lines[i] = line.replace(m.group(0), "{" + f"{b}, {a}, {c}, {d}" + "}")
            refuted(VECTORS, "\n".join(lines), rf"line {i + 1} .*register tuple \{{{b}, {a}, "
                                               rf"{c}, {d}\}} is not consecutive")
            return
    pytest.fail("no 4-register tuple")


def test_a_removed_copy_that_was_not_redundant():
    """``//@removed mov d, s`` claims both ends share a register: give it two. A removed copy
    between two registers is a removed definition (its value held nowhere afterwards: dead
    code after allocation), so the read of its value is refuted."""
    path = DATA / "texture_sm80.ptx"
    text = allocated(path)
    lines = lines_of(text)
    for i, line in enumerate(lines):
        m = re.match(r"(\s*//@removed mov\.\w+\s+)(%R(\d+)), %R\3;$", line)
        if m:
            other = f"%R{int(m.group(3)) + 1}"
            lines[i] = f"{m.group(1)}{m.group(2)}, {other};"
            refuted(path, "\n".join(lines), r"should hold %\w+#\d+ but .* is held nowhere")
            return
    pytest.fail("no removed copy")


def test_a_guard_inverted():
    text = allocated(PRESSURE)
    lines = lines_of(text)
    for i, line in enumerate(lines):
        m = re.match(r"(\s*)@(%P\d+) ", line)
        if m:
            lines[i] = line.replace(f"@{m.group(2)} ", f"@!{m.group(2)} ", 1)
            refuted(PRESSURE, "\n".join(lines), rf"line {i + 1} .*the guard differs")
            return
    pytest.fail("no guarded instruction")


def test_an_undeclared_register():
    """Through the API the emitted text must parse: an undeclared register is a refutation."""
    text = allocated(PRESSURE).replace(".reg .b32 %R<15>;", ".reg .b32 %R<2>;", 1)
    with pytest.raises(VerificationError, match="does not parse.*not a declared register"):
        verify_module_text(parse_file(str(PRESSURE)), text, [])


def test_a_rematerialization_of_another_constant():
    text = allocated(PRESSURE)
    lines = lines_of(text)
    for i, line in enumerate(lines):
        m = re.search(r"mov\.(\w+)\s+(%R\w+), (0[dDfF][0-9A-Fa-f]+|\d+);\s*//@remat (\S+)", line)
        if m:
            lines[i] = line.replace(f", {m.group(3)};", ", 0d4045000000000000;"
                                    if m.group(3)[:2].lower() == "0d" else ", 12345;")
            refuted(PRESSURE, "\n".join(lines), rf"line {i + 1} .*rematerialization of "
                                               rf"{re.escape(m.group(4))} must repeat its "
                                               rf"definition")
            return
    pytest.fail("no rematerialization")


def test_a_missing_original_instruction():
    text = allocated(PRESSURE)
    lines = lines_of(text)
    for i, line in enumerate(lines):
        if line.strip().startswith("mul.wide.u32"):
            del lines[i]
            refuted(PRESSURE, "\n".join(lines), r"expected the original instruction|is missing")
            return
    pytest.fail("no mul.wide")


# --- the command line ------------------------------------------------------------------------

def test_verify_command_exit_codes(tmp_path, capsys):
    good = tmp_path / "good.ptx"
    good.write_text(allocated(PRESSURE))
    assert main(["verify", str(PRESSURE), str(good)]) == 0
    out = capsys.readouterr().out
    assert out.count("verified: kernel") == len(parse_file(str(PRESSURE)).functions)

    lines = lines_of(allocated(PRESSURE))
    i, a, b = next(_swap_sites("\n".join(lines)))
    lines[i] = re.sub(rf"{a}\b|{b}\b", lambda m: b if m.group() == a else a, lines[i])
    bad = tmp_path / "bad.ptx"
    bad.write_text("\n".join(lines))
    assert main(["verify", str(PRESSURE), str(bad)]) == 1
    err = capsys.readouterr().err
    assert re.search(rf"line {i + 1} .*should hold", err), err

    assert main(["verify", str(PRESSURE), str(PRESSURE)]) == 2      # no allocation header
    assert "no function carries a //@ptxalloc header" in capsys.readouterr().err
    assert main(["verify", str(VECTORS), str(good)]) == 2            # other functions
    assert "functions differ" in capsys.readouterr().err
    broken = tmp_path / "broken.ptx"
    broken.write_text(allocated(PRESSURE).replace("budget=15", "budget=many", 1))
    assert main(["verify", str(PRESSURE), str(broken)]) == 2
    capsys.readouterr()
    assert main(["verify", str(PRESSURE), str(tmp_path / "missing.ptx")]) == 2


# --- the calling convention's bindings (docs/allocated-ptx.md) -------------------------------
# Each mutation keeps the data flow consistent (the value is moved where the rest of the
# function expects it, with a //@move naming it, or renamed throughout the function): only the
# register the convention binds is wrong, so nothing but the binding check can refute it.

CALLS = DATA / "calls_sm80.ptx"


def _span(lines: list[str], name: str) -> tuple[int, int]:
    """(first, last) line index of the body of function ``name``."""
    start = next(i for i, line in enumerate(lines)
                 if line.startswith(".") and line.rstrip().endswith(f" {name}("))
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    return start, end


def _declare(lines: list[str], span: tuple[int, int], family: str, n: int) -> None:
    """Make the function declare %<family><n>."""
    typ = {"R": ".b32", "RD": ".b64"}[family]
    for i in range(*span):
        m = re.match(rf"(\s*\.reg {typ} %{family}<)(\d+)(>;)", lines[i])
        if m:
            lines[i] = f"{m.group(1)}{max(int(m.group(2)), n + 1)}{m.group(3)}"
            return
    head = next(i for i in range(*span) if "//@ptxalloc" in lines[i])
    lines.insert(head + 1, f"\t.reg {typ} %{family}<{n + 1}>;")


def _free_register(lines: list[str], span: tuple[int, int]) -> int:
    """A 32-bit register the function does not use."""
    used = {int(r) for line in lines[span[0]:span[1]] for r in re.findall(r"%R(\d+)\b", line)}
    return max(used) + 1


def _original_value(name: str, opcode: str, param: str, operand: int) -> str:
    """``%r5#3``: the register operand of the first ``opcode`` instruction of function
    ``name`` in the original that addresses ``param``."""
    fn = parse_file(str(CALLS)).function(name)
    for ins in fn.instructions():
        if ins.opcode.startswith(opcode) and param in ins.render(fn.regs.names.__getitem__):
            v = ins.ops[operand].v
            return f"{fn.regs.names[v]}#{v}"
    raise AssertionError(f"no {opcode} of {param} in {name}")


def _mutate_binding(kind: str) -> tuple[str, int, str]:
    """The allocated calls file (K = 15) with one binding broken: (text, line index, the
    register now used)."""
    lines = lines_of(allocated(CALLS))
    if kind == "own argument":                  # rename R0 throughout: ld.param into R<n>
        span = _span(lines, "_Z6op_addff")
        n = _free_register(lines, span)
        for i in range(*span):
            lines[i] = re.sub(r"%R0\b", f"%R{n}", lines[i])
        i = next(i for i in range(*span) if "[_Z6op_addff_param_0]" in lines[i])
        _declare(lines, span, "R", n)
        return "\n".join(lines), i, f"%R{n}"
    if kind == "own pair argument":             # rename RD2 throughout: ld.param into RD8
        span = _span(lines, "_Z5mix64dxPKx")
        for i in range(*span):
            lines[i] = re.sub(r"%RD2\b", "%RD8", lines[i])
        i = next(i for i in range(*span) if "[_Z5mix64dxPKx_param_1]" in lines[i])
        _declare(lines, span, "RD", 8)
        return "\n".join(lines), i, "%RD8"
    name, pattern, opcode, param, operand = {
        "return value": ("_Z4sum8iiiiiiii", r"st\.param\.b32\s+\[func_retval0\+0\], %R0;",
                         "st.param", "func_retval0", 1),
        "call result": ("_Z3fibi", r"ld\.param\.b32\s+%R0, \[retval0\+0\];", "ld.param",
                        "retval0", 0),
        "call argument": ("_Z3fibi", r"st\.param\.b32\s+\[param0\+0\], %R0;", "st.param",
                          "param0", 1),
    }[kind]
    span = _span(lines, name)
    n = _free_register(lines, span)
    value = _original_value(name, opcode, param, operand)
    i = next(i for i in range(*span) if re.search(pattern, lines[i]))
    indent = re.match(r"\s*", lines[i]).group()
    lines[i] = re.sub(r"%R0\b", f"%R{n}", lines[i])
    if operand == 1:        # a store: move the value to R<n> first
        lines.insert(i, f"{indent}mov.b32\t%R{n}, %R0;\t//@move {value}")
        i += 1
    else:                   # a load: move it from R<n> where the function expects it
        lines.insert(i + 1, f"{indent}mov.b32\t%R0, %R{n};\t//@move {value}")
    _declare(lines, (span[0], span[1] + 1), "R", n)     # declared already: no line moves
    return "\n".join(lines), i, f"%R{n}"


BINDINGS = {
    "own argument": r"the function's own argument 1 '_Z6op_addff_param_0' must be in %R0",
    "own pair argument": r"the function's own argument 2 '_Z5mix64dxPKx_param_1' must be in "
                         r"%RD2 \(R2:R3\)",
    "return value": r"the return value stored into 'func_retval0' must be in %R0",
    "call result": r"the call's result read from 'retval0' must be in %R0",
    "call argument": r"argument 1 'param0' of the call on line \d+ must be in %R0",
}


@pytest.mark.parametrize("kind", list(BINDINGS))
def test_a_binding_of_the_calling_convention_broken(kind, tmp_path, capsys):
    text, i, reg = _mutate_binding(kind)
    refuted(CALLS, text, rf"line {i + 1} '[^']*{re.escape(reg)}[^']*'.*: {re.escape(reg)} "
                         rf"breaks the calling convention's binding \(abi=1, budget 15\): "
                         rf"{BINDINGS[kind]}")
    bad = tmp_path / "bad.ptx"
    bad.write_text(text)
    assert main(["verify", str(CALLS), str(bad)]) == 1
    assert re.search(BINDINGS[kind], capsys.readouterr().err)


@pytest.mark.parametrize("k", [4, 6, 7, 15, 40])
def test_the_bindings_are_clipped_to_the_budget(k):
    """No false refutation where the argument registers are clipped (K < 8: later arguments
    bind nothing) or the budget is wide."""
    check(CALLS, allocated(CALLS, k))


OLD_ABI = DATA / "hand" / "old_abi_call.ptx"


@pytest.mark.parametrize("kind,edits,message", [
    ("argument", [(r"add\.u32\t%R1, %R4, 3;", "add.u32\t%R5, %R4, 3;"),
                  (r"call\t\(%R0\), old_f, \(%R0, %R1\);", "call\t(%R0), old_f, (%R0, %R5);")],
     r"operand 3 member 2: %R5 breaks the calling convention's binding \(abi=1, budget 8\): "
     r"register argument 2 of the call must be in %R1"),
    ("result", [(r"call\t\(%R0\), old_f, \(%R0, %R1\);", "call\t(%R5), old_f, (%R0, %R1);"),
                (r"add\.u32\t%R0, %R0, %R4;", "add.u32\t%R0, %R5, %R4;")],
     r"operand 1 member 1: %R5 breaks the calling convention's binding \(abi=1, budget 8\): "
     r"the call's register result must be in %R0"),
])
def test_a_binding_of_an_old_abi_register_call_broken(kind, edits, message):
    """``call (%r3), old_f, (%r1, %r2)`` passes registers: its arguments and result are bound
    too. The register is renamed, to the free R5, where the value is made and where it is
    read."""
    text = allocated(OLD_ABI, 8)
    check(OLD_ABI, text)
    assert not re.search(r"%R5\b|%RD4\b", text)
    text = text.replace(".reg .b32 %R<5>;", ".reg .b32 %R<6>;", 1)
    for pattern, new in edits:
        text, n = re.subn(pattern, new, text, count=1)
        assert n == 1, pattern
    refuted(OLD_ABI, text, message)
