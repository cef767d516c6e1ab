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
    """Original instructions reading two different 32-bit registers."""
    for i, line in enumerate(lines_of(text)):
        if not is_instruction(line) or "//@" in line or line.strip().startswith(("st.", "@")):
            continue
        regs = re.findall(r"%R\d+\b", line.split("//")[0])
        if len(regs) == 3 and len({regs[1], regs[2]}) == 2 and regs[0] not in regs[1:]:
            yield i, regs[1], regs[2]


def test_swap_two_registers_in_one_instruction():
    text = allocated(PRESSURE)
    lines = lines_of(text)
    i, a, b = next(_swap_sites(text))
    lines[i] = re.sub(rf"{a}\b|{b}\b", lambda m: b if m.group() == a else a, lines[i])
    refuted(PRESSURE, "\n".join(lines), rf"line {i + 1} .*operand \d should hold %\w+#\d+ but "
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
    """``//@removed mov d, s`` claims both ends share a register: give it two."""
    path = DATA / "texture_sm80.ptx"
    text = allocated(path)
    lines = lines_of(text)
    for i, line in enumerate(lines):
        m = re.match(r"(\s*//@removed mov\.\w+\s+)(%R(\d+)), %R\3;$", line)
        if m:
            other = f"%R{int(m.group(3)) + 1}"
            lines[i] = f"{m.group(1)}{m.group(2)}, {other};"
            refuted(path, "\n".join(lines), rf"line {i + 1} .*a removed copy must have both ends "
                                             rf"in one register, not {m.group(2)} and {other}")
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
