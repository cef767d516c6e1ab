"""Text- and token-level mutation operators over real PTX (issue 11): the input fuzzer's
vocabulary, shared by ``bench/fuzz_inputs.py`` (thousands of mutants, ptxas as the oracle) and
``tests/property/test_fuzz_inputs.py`` (a CI-sized run in process).

Each operator takes the text of a PTX file and a ``random.Random`` and returns the mutated text,
or None when it does not apply to this text (no ``.shared`` to qualify, no instruction with two
operands ...). They mimic how real PTX varies and breaks: statements joined on one line or the
whole module minified, whitespace and comments in odd places, a deleted line / token / ``;`` /
brace, a duplicated line, swapped operands, a register of another class, another type suffix,
``::cta``/``::cluster`` qualifiers, a truncated file, stray or non-UTF-8 bytes, a missing or
unknown ``.version``/``.target``, deeply nested ``{ }`` scopes.

Texts are ``str`` decoded with ``errors="surrogateescape"`` so that bytes which are not UTF-8
survive a round trip: read with :func:`read_ptx`, write with :func:`to_bytes`.

A mutant is a pure function of (seed, index, sources): :func:`make_mutant`.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

ENCODING = {"encoding": "utf-8", "errors": "surrogateescape"}


def read_ptx(path) -> str:
    return Path(path).read_text(**ENCODING)


def to_bytes(text: str) -> bytes:
    return text.encode(**ENCODING)


# --- where things are --------------------------------------------------------------------------

_TOKEN = re.compile(r"%?[\w$.:]+|[{}();,\[\]<>|@!+\-]")
_BOUNDARY = re.compile(r"(?<=[\s,;\[\]{}()])|(?=[\s,;\[\]{}()])")
_INSTRUCTION = re.compile(
    r"^(?P<head>[ \t]*(?:@!?%\w+[ \t]+)?[a-z][\w.:]*[ \t]+)(?P<ops>[^;\n{}]*?)(?P<tail>[ \t]*;)",
    re.M)
_REGISTER = re.compile(r"%([a-z]+)(\d+)\b")
_TYPE_SUFFIX = re.compile(r"(?<=[a-z0-9])\.(?:[usb](?:8|16|32|64)|f(?:16|32|64)|pred)\b")
_STATE_SPACE = re.compile(r"\.(?:shared|global|local|const|param)\b(?!::)")
_LINE_COMMENT = re.compile(r'"[^"\n]*"|//[^\n]*')
_FUNCTION_HEAD = re.compile(r"\.(?:entry|func)\b")
_TYPES = [".u8", ".s8", ".b8", ".u16", ".s16", ".b16", ".f16", ".u32", ".s32", ".b32", ".f32",
          ".u64", ".s64", ".b64", ".f64", ".pred"]
_UNKNOWN_TARGETS = ["sm_999", "sm_19", "sm_", "gfx90a", "sm_89x", "compute_1000"]
_NON_UTF8 = ["\udcff", "\udcfe\udcff", "\udcc3(", "\udce2\udc82", "\udced\udca0\udc80",
             "\udcc0\udc80", "\udc80"]


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _nonblank(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line.strip()]


def _pick(rng: random.Random, matches: list):
    return rng.choice(matches) if matches else None


def _splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


_NOT_CODE = re.compile(r'"[^"\n]*"|//[^\n]*|/\*.*?\*/', re.S)
_LINE_DIRECTIVE = re.compile(r"^[ \t]*\.(?:loc|file|pragma|section)\b[^\n]*", re.M)


def _boundary(text: str, rng: random.Random) -> int | None:
    """A position between two tokens (where whitespace or punctuation is) in code: not inside
    a comment, a string or a line directive (``.loc``, ``.file`` ...), so that what is inserted
    there keeps the meaning of the program."""
    spans = [m.span() for p in (_NOT_CODE, _LINE_DIRECTIVE) for m in p.finditer(text)]
    for _ in range(20):
        i = rng.randrange(len(text) + 1) if text else 0
        if 0 < i < len(text) and (text[i - 1] in " \t\n,;[]{}()" or text[i] in " \t\n,;[]{}()") \
                and not any(a < i <= b for a, b in spans):
            return i
    return None


def _body_lines(lines: list[str]) -> list[int]:
    """Indices of the statement lines inside function bodies (after the opening brace of an
    ``.entry``/``.func``, before its closing one), found by counting braces."""
    inside, depth, seen_head, out = False, 0, False, []
    for i, line in enumerate(lines):
        code = line.split("//", 1)[0]
        if not inside and _FUNCTION_HEAD.search(code):
            seen_head = True
        opened, closed = code.count("{"), code.count("}")
        if inside and depth > 0 and opened == closed == 0 and code.strip():
            out.append(i)
        if seen_head and opened:
            inside, seen_head = True, False
        depth += opened - closed
        if inside and depth <= 0:
            inside, depth = False, 0
    return out


# --- the operators -----------------------------------------------------------------------------

def _strip_line_comment(line: str) -> str:
    return _LINE_COMMENT.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", line)


def join_lines(text: str, rng: random.Random) -> str | None:
    """Several statements or directives on one line (the ``//`` comments of all but the last
    dropped, so the program means what it meant)."""
    lines = _lines(text)
    if len(lines) < 3:
        return None
    start = rng.randrange(len(lines) - 1)
    count = rng.randint(2, 8)
    run = lines[start:start + count]
    joined = " ".join([_strip_line_comment(line).strip() for line in run[:-1]]
                      + [run[-1].strip()])
    return "\n".join(lines[:start] + [joined] + lines[start + count:])


def minify(text: str) -> str | None:
    """The whole module on one line: ``//`` comments (outside strings) dropped, whitespace
    squeezed."""
    return re.sub(r"\s+", " ", _strip_line_comment(text)).strip() + "\n"


def minify_module(text: str, rng: random.Random) -> str | None:
    return minify(text)


def split_whitespace(text: str, rng: random.Random) -> str | None:
    """Newlines, tabs and blank space between two tokens."""
    i = _boundary(text, rng)
    if i is None:
        return None
    return _splice(text, i, i, rng.choice(["\n", "  ", "\t", "\n\n\t ", " \r\n", "\n\t\t\n"]))


def insert_comment(text: str, rng: random.Random) -> str | None:
    """A ``/* */`` comment (on one line or across lines) between tokens, or a ``//`` comment at
    the end of a line."""
    if rng.random() < 0.35:
        lines = _lines(text)
        i = rng.randrange(len(lines))
        lines[i] += rng.choice([" // note", "//", " // { } ; /*", "\t// x, y;"])
        return "\n".join(lines)
    i = _boundary(text, rng)
    if i is None:
        return None
    return _splice(text, i, i, rng.choice(["/* c */", "/**/", " /* a\n b */ ", "/*\n*/",
                                           "/* // */", "/* { ; } */"]))


def delete_line(text: str, rng: random.Random) -> str | None:
    lines = _lines(text)
    i = _pick(rng, _nonblank(lines))
    if i is None:
        return None
    return "\n".join(lines[:i] + lines[i + 1:])


def _delete_match(text: str, rng: random.Random, pattern: re.Pattern) -> str | None:
    m = _pick(rng, list(pattern.finditer(text)))
    return None if m is None else _splice(text, m.start(), m.end(), "")


def delete_token(text: str, rng: random.Random) -> str | None:
    return _delete_match(text, rng, _TOKEN)


_SEMICOLON = re.compile(";")
_OPEN = re.compile(r"\{")
_CLOSE = re.compile(r"\}")


def delete_semicolon(text: str, rng: random.Random) -> str | None:
    return _delete_match(text, rng, _SEMICOLON)


def delete_open_brace(text: str, rng: random.Random) -> str | None:
    return _delete_match(text, rng, _OPEN)


def delete_close_brace(text: str, rng: random.Random) -> str | None:
    return _delete_match(text, rng, _CLOSE)


def duplicate_line(text: str, rng: random.Random) -> str | None:
    """A line twice: a duplicate label, a double declaration, an instruction run twice."""
    lines = _lines(text)
    special = [i for i in _nonblank(lines)
               if re.match(r"\s*(?:[\w$]+:|\.(?:reg|shared|local|global|const|param)\b)",
                           lines[i])]
    candidates = special if special and rng.random() < 0.6 else _nonblank(lines)
    i = _pick(rng, candidates)
    if i is None:
        return None
    return "\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:])


def _split_operands(ops: str) -> list[str]:
    """Operands split at the commas outside ``{}``/``[]``/``()``."""
    parts, depth, cur = [], 0, []
    for ch in ops:
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def swap_operands(text: str, rng: random.Random) -> str | None:
    sites = [m for m in _INSTRUCTION.finditer(text) if len(_split_operands(m.group("ops"))) >= 2]
    m = _pick(rng, sites)
    if m is None:
        return None
    ops = _split_operands(m.group("ops"))
    a, b = rng.sample(range(len(ops)), 2)
    ops[a], ops[b] = ops[b].strip(), ops[a].strip()
    ops = [o.strip() for o in ops]
    return _splice(text, m.start("ops"), m.end("ops"), ", ".join(ops))


def replace_register_class(text: str, rng: random.Random) -> str | None:
    """A register replaced by one of another class (``%r3`` -> ``%rd7``, ``%f1`` -> ``%p2``)."""
    uses = [m for m in _REGISTER.finditer(text)
            if not text[text.rfind("\n", 0, m.start()) + 1:m.start()].lstrip().startswith(".reg")]
    prefixes = sorted({m.group(1) for m in uses})
    m = _pick(rng, uses)
    if m is None:
        return None
    others = [p for p in prefixes if p != m.group(1)] or [p for p in ("r", "rd", "p", "f")
                                                           if p != m.group(1)]
    new = f"%{rng.choice(others)}{rng.randint(0, 9)}"
    return _splice(text, m.start(), m.end(), new)


def change_type_suffix(text: str, rng: random.Random) -> str | None:
    """An opcode's (or a declaration's) type suffix replaced by another type."""
    m = _pick(rng, list(_TYPE_SUFFIX.finditer(text)))
    if m is None:
        return None
    return _splice(text, m.start(), m.end(), rng.choice([t for t in _TYPES if t != m.group(0)]))


def insert_scope_qualifier(text: str, rng: random.Random) -> str | None:
    """``::cta``/``::cluster`` (and ``::entry``/``::func`` on ``.param``) after a state space."""
    m = _pick(rng, list(_STATE_SPACE.finditer(text)))
    if m is None:
        return None
    choices = ["::entry", "::func"] if m.group(0) == ".param" else ["::cta", "::cluster"]
    return _splice(text, m.end(), m.end(), rng.choice(choices))


def truncate(text: str, rng: random.Random) -> str | None:
    if len(text) < 2:
        return None
    return text[:rng.randrange(1, len(text))]


def insert_byte(text: str, rng: random.Random) -> str | None:
    """One random byte anywhere (a control character, punctuation, a lone high byte)."""
    b = rng.randrange(256)
    ch = chr(b) if b < 0x80 else chr(0xDC00 + b)
    i = rng.randrange(len(text) + 1)
    return _splice(text, i, i, ch)


def insert_non_utf8(text: str, rng: random.Random) -> str | None:
    """Bytes that are not UTF-8, inside a comment (which ptxas may well accept) or in code."""
    bad = rng.choice(_NON_UTF8)
    comments = [m for m in re.finditer(r"//[^\n]*", text)]
    if comments and rng.random() < 0.5:
        m = rng.choice(comments)
        i = rng.randint(m.start() + 2, m.end())
    else:
        i = rng.randrange(len(text) + 1)
    return _splice(text, i, i, bad)


def _drop_directive(text: str, name: str) -> str | None:
    m = re.search(rf"^[ \t]*\.{name}\b[^\n]*\n?", text, re.M)
    return None if m is None else _splice(text, m.start(), m.end(), "")


def drop_version(text: str, rng: random.Random) -> str | None:
    return _drop_directive(text, "version")


def drop_target(text: str, rng: random.Random) -> str | None:
    return _drop_directive(text, "target")


def unknown_target(text: str, rng: random.Random) -> str | None:
    m = re.search(r"^([ \t]*\.target[ \t]+)([\w]+)", text, re.M)
    if m is None:
        return None
    return _splice(text, m.start(2), m.end(2), rng.choice(_UNKNOWN_TARGETS))


def nest_scopes(text: str, rng: random.Random) -> str | None:
    """A run of a function's statements wrapped in ``{ }`` scopes nested 1 to 2,000 deep."""
    lines = _lines(text)
    body = _body_lines(lines)
    if not body:
        return None
    a = rng.randrange(len(body))
    b = min(len(body) - 1, a + rng.randint(0, 10))
    first, last = body[a], body[b]
    if any(lines[i].split("//", 1)[0].count("{") or lines[i].split("//", 1)[0].count("}")
           for i in range(first, last + 1)):
        last = first
    depth = rng.choice([1, 2, 3, 8, 40, 200, 2000])
    return "\n".join(lines[:first] + ["{" * depth] + lines[first:last + 1] + ["}" * depth]
                     + lines[last + 1:])


# operators whose mutant means what its source meant (ptxas agrees on every corpus file):
# ptxalloc must allocate it as it allocates the source
MEANING_PRESERVING = ("join_lines", "minify_module", "split_whitespace", "insert_comment")

OPERATORS = {op.__name__: op for op in (
    join_lines, minify_module, split_whitespace, insert_comment, delete_line, delete_token,
    delete_semicolon, delete_open_brace, delete_close_brace, duplicate_line, swap_operands,
    replace_register_class, change_type_suffix, insert_scope_qualifier, truncate, insert_byte,
    insert_non_utf8, drop_version, drop_target, unknown_target, nest_scopes)}


@dataclass(frozen=True)
class Mutant:
    index: int
    operator: str
    source: str            # the name of the file it came from
    text: str              # surrogate-escaped: write with to_bytes()


def make_mutant(seed: int, index: int, sources: list[tuple[str, str]],
                operators: list[str] | None = None) -> Mutant:
    """Mutant ``index`` of a run: its operator is chosen round robin over ``operators`` (every
    operator gets its share), its source file and position by a generator seeded with
    (seed, index), so a mutant is reproduced by its seed and index alone, whatever the order
    or parallelism of the run. ``sources`` are (name, text) pairs."""
    names = operators or list(OPERATORS)
    op = names[index % len(names)]
    rng = random.Random(f"{seed}:{index}")
    for _ in range(50):
        name, text = rng.choice(sources)
        out = OPERATORS[op](text, rng)
        if out is not None and out != text:
            return Mutant(index, op, name, out)
    raise ValueError(f"operator {op} applies to none of the sources")
