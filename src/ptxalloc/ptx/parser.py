"""PTX text to :class:`~ptxalloc.ir.module.Module` (PTX ISA 1.4 to 9.x; SPEC sections 3 and 8).

The parser reads what nvcc, Triton, LLVM, Ocelot and people write: ``.version``/``.target``/
``.address_size``; module-scope variables with initializers; ``.entry``/``.func`` with parameter
and return lists (``.param`` and old-ABI ``.reg``), linkage and performance directives; ``.reg``
declarations with ranges (``%r<100>``), lists and vector types; nested ``{ }`` scopes with their
own declarations and labels (a shadowing label is renamed: ``_FunctionParser.resolve_labels``);
guards; operands of every kind (see :mod:`ptxalloc.ir.operands`); ``call`` lists;
``.callprototype`` and ``.branchtargets``; ``.loc``/``.file``, ``.section`` blocks and comments,
which are all kept for the emitter.

Statements are found by tokens, not lines: a statement ends at its ';', a scope at '{' or '}',
and ``.version``/``.target``/``.address_size``/``.loc``/``.file`` where their operand lists end
(PTX ISA chapter 11), so a whole module may be on one line. The text is read once, left to
right, with anchored patterns that never backtrack past the token they read: a line holding one
simple statement takes a fast path, anything else is read token by token. Registers become
dense ids on first reference.

What ptxas rejects but allocation survives (duplicate labels or registers, unknown opcodes,
wrong operand counts, an unknown ``.version`` or body directive, no function, a ``st.param`` to
the function's own input parameter) is collected as
:class:`~ptxalloc.errors.Diagnostic` warnings in ``Module.warnings``; nothing is printed.
Malformed input raises :class:`~ptxalloc.errors.PtxSyntaxError` with file, line and column.
"""

from __future__ import annotations

import re

from ..errors import Diagnostic, PtxSyntaxError
from ..ir import isa
from ..ir.instruction import (COMMENT, DIRECTIVE, LOC, REG_DECL, SCOPE_CLOSE, SCOPE_OPEN,
                              Instruction, Label, Raw)
from ..ir.module import Function, Module, Param
from ..ir.operands import SINK, Args, Imm, Mem, Neg, Not, Pair, Reg, Sum, Sym, Vec
from ..ir.registers import RegClass, RegTable, class_of_type
from ..util import gc_paused, release_frozen_cycles

_classify = isa.classify
_set_plain_roles = isa.set_plain_roles

# --- body statements -------------------------------------------------------------------------

# Directives without ';' end where their operand list ends (PTX ISA 9.0, 11.6.1 ".file",
# 11.6.2 ".loc", 11.1.1 ".version", 11.1.2 ".target", 11.1.3 ".address_size"), not at the
# newline: a minified module puts statements after them on the same line.
_LOC_GRAMMAR = (r"\.loc[ \t]+\d+[ \t]+\d+[ \t]+\d+(?:[ \t]*,[ \t]*function_name[ \t]+[\w$%.]+"
                r"(?:[ \t]*\+[ \t]*\d+)?[ \t]*,[ \t]*inlined_at[ \t]+\d+[ \t]+\d+[ \t]+\d+)?")
_FILE_GRAMMAR = r'\.file[ \t]+\d+[ \t]+"[^"]*"(?:[ \t]*,[ \t]*\d+[ \t]*,[ \t]*\d+)?'
_LOC = re.compile(_LOC_GRAMMAR)
_LOC_FILE = re.compile(f"{_LOC_GRAMMAR}|{_FILE_GRAMMAR}")
_MODULE_LINE = re.compile(
    rf"\.version\s+\d+\.\d+|\.target\s+\w+(?:[ \t]*,[ \t]*\w+)*|\.address_size\s+\d+"
    rf"|{_LOC_GRAMMAR}|{_FILE_GRAMMAR}")
_LOC_FILE_START = re.compile(r"\.(?:loc|file)\b")
_TO_EOL = re.compile(r"[^\n]*")             # the fallback end of a directive written otherwise
_BLANKS = re.compile(r"\s*")
_STATEMENT_STOP = re.compile(r'[;{}"/]')
# A label: an identifier and a single ':' (never a '::' qualifier) at a statement's start.
_LABEL_AT = re.compile(r"([A-Za-z_$%][\w$%]*)[ \t]*:(?!:)")
_LABELLED_DIRECTIVE = re.compile(r"\s*\.(?:callprototype|branchtargets|calltargets)\b")

_INNER_COMMENT = re.compile(r'"[^"]*"|//[^\n]*|/\*.*?\*/', re.S)


def _blank_comment(m: re.Match) -> str:
    """A comment replaced by spaces (newlines kept, so positions and lines stay right); a
    string is kept as it is."""
    t = m.group()
    return t if t[0] == '"' else re.sub(r"[^\n]", " ", t)


_OPCODE = re.compile(r"[A-Za-z_][\w.:]*$")
_LABEL_PREFIX = re.compile(r"([A-Za-z_$%][\w$%]*)\s*:(?!:)\s*")
_LABEL_LINE = re.compile(r"[A-Za-z_$%][\w$%]*\s*:$")
# a label, then a block comment ending the line (the first '*/' is the last)
_LABEL_THEN_COMMENT = re.compile(r"([A-Za-z_$%][\w$%]*)[ \t]*:(?!:)[ \t]*"
                                 r"(/\*(?:[^*]|\*(?!/))*\*/)")
# a label followed on its line by a .loc or .file, which end where their operands end
_LABEL_THEN_LOC_FILE = re.compile(r"[A-Za-z_$%][\w$%]*\s*:(?!:)\s*\.(?:loc|file)\b")
_DECL_HEAD = re.compile(r"\.reg((?:\s*\.\w+(?:\s+\d+)?)+)\s+(.*)$", re.S)
_REG_NAME = re.compile(r"\s*([A-Za-z_$%][\w$%]*)\s*(?:<\s*(\d+)\s*>)?\s*$")
_SPECIAL = re.compile(
    r"%(?:tid|ntid|laneid|warpid|nwarpid|ctaid|nctaid|smid|nsmid|gridid|lanemask_\w+|clock"
    r"|clock64|clock_hi|pm\d+|pm\d+_64|envreg\d+|globaltimer\w*|total_smem_size"
    r"|dynamic_smem_size|aggr_smem_size|reserved_smem_offset\w*|is_explicit_cluster|clusterid"
    r"|nclusterid|cluster_ctaid|cluster_nctaid|cluster_ctarank|cluster_nctarank"
    r"|current_graph_exec|stackptr)(?:\.[xyzw])?$")
_COMPONENT = re.compile(r"(.+)(\.(?:[xyzwrgba]|b[0-7]{1,4}|h[0-3]{1,2}))$")
_REG_SUM = re.compile(r"([A-Za-z_$%][\w$%]*)\s*([+-]\s*(?:0[xX][0-9a-fA-F]+|\d+)[uU]?)$")
_WORDS = re.compile(r"[A-Za-z_$%][\w$%]*")
_NAME = _WORDS          # fullmatch: a name alone
# ``[name]`` or ``[name+offset]`` with a decimal offset, as the general path splits it (the
# name before the first '+' or '-', the offset the rest)
_REG_ADDRESS = re.compile(r"\[[ \t]*([A-Za-z_$%][\w$%]*)[ \t]*([+-][ \t]*-?\d+)?[ \t]*\]")
# two operands side by side: the end of one, blanks, the start of another
_JUXTAPOSED = re.compile(r"[\w$%)\]}]\s+(?=[\w$%{\[!(])")
_WORD_OR_TOKEN = re.compile(r"[^\s,;]+")
_OFFSET = re.compile(r"([^+\-]*)(.*)", re.S)

# --- module level ----------------------------------------------------------------------------

_TOP_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<lc>//[^\n]*)
  | (?P<bc>/\*.*?\*/)
  | (?P<line>\.(?:version|target|address_size|file|loc)\b)
  | (?P<section>\.section\b[^{]*\{[^}]*\})
""", re.X | re.S)
_FUNC_KIND = re.compile(r"\.(entry|func)\b")
_PARAM_NAME = re.compile(r"([A-Za-z_$%][\w$%]*)\s*((?:\[\s*\d*\s*\])*)\s*$")
_TYPE_SIZE = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
              "b32": 4, "u32": 4, "s32": 4, "f32": 4, "f16x2": 4, "bf16x2": 4, "b64": 8,
              "u64": 8, "s64": 8, "f64": 8, "b128": 16, "pred": 1, "tf32": 4}
_PERF = re.compile(r"\.(maxntid|reqntid|minnctapersm|maxnctapersm|maxnreg|noreturn|pragma"
                   r"|explicitcluster|reqnctapercluster|maxclusterrank|abi_preserve"
                   r"|abi_preserve_control|blocksareclusters)\b((?:\"[^\"]*\"|[^.\";])*)")


#: a register type as a simple declaration writes it (".u32") -> its class
_REG_TYPES = {"." + t: class_of_type(t) for t in _TYPE_SIZE}

# A whole line of the commonest kinds, read with one match: one register declaration of one
# scalar register (groups 1-3: the statement, its type, the name), one instruction without
# braces, parentheses, strings, comments or labels (groups 4-7: '!', the guard, the opcode,
# the operand text), a label alone (8), a ``.loc`` (9), or nothing. The operand text holds no
# blank but spaces and tabs, so that it splits as the general path splits it. Any other line
# takes the general path; the quantifiers are possessive, so that a line of another kind (a
# long wgmma with a '{' or a comment) fails at its first misfit instead of backtracking.
_SIMPLE_LINE = re.compile(r"""[ \t]*+(?:
    (\.reg[ \t]++(\.\w++)[ \t]++([A-Za-z_$%][\w$%]*+)[ \t]*+;)
  | (?:@(!?)([A-Za-z_$%][\w$%]*+)[ \t]++)?
    ([A-Za-z_][\w.]*+(?:::[\w.]++)*+)(?:[ \t]++([ \t!#-'*-.0-9<-?A-Z\[\\\]^_`a-z|~]*+))?;
  | ([A-Za-z_$%][\w$%]*+)[ \t]*+:
  | (""" + _LOC_GRAMMAR + r""")
  |
)[ \t\r]*+\n""", re.X)

_KNOWN_VERSION = re.compile(r"[1-9]\.\d+")      # PTX ISA 1.0 to 9.x


class _Source:
    """The text being parsed, with line/column lookup for error messages."""

    def __init__(self, text: str, filename: str, roles: bool = True):
        self.text = text
        self.filename = filename
        self.roles = roles          # give instructions their roles from the ISA table
        self._pos = 0
        self._line = 1
        self.warnings: list[Diagnostic] = []
        self.locs: dict[str, tuple | None] = {}     # .loc text -> its location (add_loc)

    def line_of(self, pos: int) -> int:
        """Line number of a position; cheap when positions are asked for in increasing
        order, as the parser does."""
        if pos >= self._pos:
            self._line += self.text.count("\n", self._pos, pos)
        else:
            self._line = self.text.count("\n", 0, pos) + 1
        self._pos = pos
        return self._line

    def error(self, message: str, pos: int, token: str | None = None) -> PtxSyntaxError:
        """A syntax error at ``pos``, or at the first ``token`` after ``pos`` in the statement
        starting there (up to its ';'), as a whole word when the token starts or ends with one
        (so that ``%r9`` is not found inside ``%r99``). The message is made one line."""
        return PtxSyntaxError(*self._where(message, pos, token))

    def warn(self, message: str, pos: int, token: str | None = None) -> None:
        """Record a warning placed as :meth:`error` places errors."""
        self.warnings.append(Diagnostic(*self._where(message, pos, token)))

    def find_token(self, pos: int, token: str) -> int:
        """Position of ``token`` in the statement starting at ``pos`` (up to its ';'), as a
        whole word when it starts or ends with one; ``pos`` when it is not there."""
        text = self.text
        end = text.find(";", pos)
        end = len(text) if end < 0 else end + 1
        pat = re.escape(token)
        if re.match(r"[\w$%]", token):
            pat = r"(?<![\w$%])" + pat
        if re.search(r"[\w$]$", token):
            pat += r"(?![\w$])"
        m = re.compile(pat).search(text, pos, end)
        return pos if m is None else m.start()

    def _where(self, message: str, pos: int, token: str | None):
        """(message, file, line, column, source line) of a finding at ``pos`` or its token."""
        text = self.text
        pos = max(0, min(pos, len(text)))
        message = re.sub(r"\s*\n\s*", " ", message)
        if token:
            pos = self.find_token(pos, token)
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        if end < 0:
            end = len(text)
        return message, self.filename, self.line_of(pos), pos - start + 1, text[start:end]


#: Directives a function body may hold besides ``.reg`` and ``.loc`` (state spaces of local
#: declarations, ``.pragma``; PTX ISA chapters 5 and 11), by their first dotted word.
_BODY_DIRECTIVES = frozenset((".param", ".local", ".shared", ".global", ".const", ".pragma",
                              ".tex", ".texref", ".samplerref", ".surfref", ".section"))


# the characters the bracket-aware splits look at (every other one is skipped by the regex)
_COMMA_OR_BRACKET = re.compile(r"[,{}\[\]()]")
_PIPE_OR_BRACKET = re.compile(r"[|{}\[\]()]")
_BRACKET = re.compile(r"[{}\[\]()]")


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets, braces and parentheses."""
    if "{" not in text and "[" not in text and "(" not in text:
        return text.split(",")
    out = []
    depth = 0
    start = 0
    for m in _COMMA_OR_BRACKET.finditer(text):
        ch = m.group()
        if ch == ",":
            if depth == 0:
                i = m.start()
                out.append(text[start:i])
                start = i + 1
        elif ch in "{[(":
            depth += 1
        else:
            depth -= 1
    out.append(text[start:])
    return out


def _split_pipe(text: str) -> tuple[str, str | None]:
    """Split ``a|b`` at a '|' outside brackets (``{..}|%p`` is a vector and a predicate)."""
    depth = 0
    for m in _PIPE_OR_BRACKET.finditer(text):
        ch = m.group()
        if ch == "|":
            if depth == 0:
                i = m.start()
                return text[:i], text[i + 1:]
        elif ch in "{[(":
            depth += 1
        else:
            depth -= 1
    return text, None


def _unbalanced_at(text: str) -> int:
    """Index of the first closing bracket without an opener, or of the last opener left
    unclosed; -1 when the brackets balance."""
    opened: list[int] = []
    for m in _BRACKET.finditer(text):
        if m.group() in "{[(":
            opened.append(m.start())
        elif not opened:
            return m.start()
        else:
            opened.pop()
    return opened[-1] if opened else -1


#: opcode -> (known to the ISA table, exact operand count or None, the role of a first
#: register operand under the ISA table's common rule or 0 (``isa.plain_first_role``), and
#: what the parser does more for it: "bra"/"brx" for a branch, "st.param" for a parameter
#: store, else ""), filled on first sight (after checking the opcode's spelling)
_OPCODE_FACTS: dict[str, tuple[bool, int | None, int, str]] = {}


def _opcode_facts(opcode: str) -> tuple[bool, int | None, int, str] | None:
    """The facts of ``opcode`` (see ``_OPCODE_FACTS``); None when it is not spelled as one."""
    if not _OPCODE.match(opcode):
        return None
    known, count = isa.opcode_check(opcode)
    base = opcode.split(".", 1)[0]
    special = (base if base in ("bra", "brx") else
               "st.param" if opcode.startswith("st.param") else "")
    facts = _OPCODE_FACTS[opcode] = (known, count, isa.plain_first_role(opcode), special)
    return facts


class _FunctionParser:
    """Parses one function body; owns the register table and the scoped name map.

    ``names`` maps a register name to its declaration ``[ptype, class, vec, line, id]``; the id
    is -1 until the register is first referenced, so ids stay dense over the registers a
    function really uses. Scopes record what each declaration shadowed.
    """

    def __init__(self, src: _Source, fn: Function, symbols: set[str]):
        self.src = src
        self.fn = fn
        self.regs: RegTable = fn.regs
        self.names: dict[str, list] = {}
        self.scopes: list[list[tuple[str, list | None]]] = [[]]
        self.reg_cache: list[Reg] = []
        # immediates, symbols and plain addresses ([%rd1+8]) by text, one shared object per
        # text; an address depends on what its register names mean, so a declaration or a
        # scope's end empties it (rare after a body's first lines)
        self.constants: dict[str, Imm | Sym | Mem] = {}
        self.symbols = symbols
        self.roles = src.roles
        self.unresolved: list[tuple[str, int]] = []
        self.scope_names: list[set[str]] = [set()]     # names declared in each open scope
        # labels are scoped to their '{ }' block (PTX ISA 9.7.12.1, checked against ptxas):
        # every scope has an id and its parent's; labels and branches remember their scope
        self.scope_parent: list[int] = [-1]            # scope id -> enclosing scope id
        self.scope_stack: list[int] = [0]              # the open scopes, innermost last
        self.label_lines: dict[tuple[int, str], int] = {}   # (scope, name) -> first line
        self.label_defs: list[tuple[str, int, Label]] = []  # (name, scope, statement)
        self.tables: dict[str, tuple[int, Raw, int]] = {}   # .branchtargets: scope, stmt, pos
        self.loc = None                                 # the last .loc's (file, line)
        self.depth = 0                                  # nested '{' scopes open
        self.open_pos = 0                               # the body's '{'
        # (bra|brx, target, position, scope, instruction)
        self.branches: list[tuple[str, str | None, int, int, Instruction]] = []

    # -- declarations --

    def declare(self, declared: list[str], ptype: str, vec: int, line: int, pos: int) -> None:
        """Declare the registers named in ``declared``, all of type ``ptype`` (a range
        ``%r<1000>`` is a thousand names declared at once: most are never referenced)."""
        rclass = class_of_type(ptype)
        if rclass is None:
            raise self.src.error(f"'{ptype}' is not a register type", pos, ptype)
        names = self.names
        if not names.keys().isdisjoint(declared):
            for name in declared:
                if name in names:
                    self.redeclared(name, line, pos)
        if len(self.scopes) > 1:                # the function's own scope is never undone
            self.scopes[-1].extend([(name, names.get(name)) for name in declared])
        for name in declared:
            names[name] = [ptype, rclass, vec, line, -1]
        self.scope_names[-1].update(declared)
        if self.constants:
            self.constants.clear()              # a cached address may name what is declared

    def declare_one(self, name: str, ptype: str, rclass: RegClass, s: str, line: int,
                    pos: int) -> None:
        """The declaration ``s`` (``.reg .u32 %r1;``) of the one scalar register ``name``:
        :meth:`declare`'s work for the commonest declaration, and its statement."""
        names = self.names
        if name in names:
            self.redeclared(name, line, pos)
        if len(self.scopes) > 1:                # the function's own scope is never undone
            self.scopes[-1].append((name, names.get(name)))
        names[name] = [ptype, rclass, 0, line, -1]
        self.scope_names[-1].add(name)
        if self.constants:
            self.constants.clear()
        self.fn.body.append(Raw(REG_DECL, s, line))

    def redeclared(self, name: str, line: int, pos: int) -> None:
        """Warn when ``name``, already declared, was declared in the current scope (ptxas:
        "Duplicate definition of variable"); shadowing an outer scope's name is fine."""
        if name in self.scope_names[-1]:
            self.src.warn(f"register '{name}' is declared twice in one scope (first at line "
                          f"{self.names[name][3]})", pos, name)

    def label(self, name: str, pos: int, line: int) -> None:
        """A label statement; a second definition in the same scope is warned about (ptxas:
        "Duplicate definition of label"); one in another scope is legal (:meth:`resolve_labels`
        tells them apart)."""
        scope = self.scope_stack[-1]
        first = self.label_lines.get((scope, name))
        if first is not None:
            self.src.warn(f"label '{name}' is defined twice in function '{self.fn.name}' "
                          f"(first at line {first})", pos, name)
        else:
            self.label_lines[scope, name] = line
        label = Label(name, line)
        self.label_defs.append((name, scope, label))
        self.fn.body.append(label)

    def reg_decl(self, text: str, pos: int, line: int) -> None:
        """``.reg .v4 .f32 %a, %b<10>`` (text without its ';')."""
        m = _DECL_HEAD.match(text)
        if m is None:
            raise self.src.error("register declaration without a type", pos)
        vec = 0
        ptype = None
        for w in re.findall(r"\.(\w+)", m.group(1)):
            if w in ("v2", "v4", "v8"):
                vec = int(w[1])
            elif w != "align":
                ptype = "." + w
        if ptype is None:
            raise self.src.error("register declaration without a type", pos)
        for part in m.group(2).split(","):
            nm = _REG_NAME.match(part)
            if nm is None:
                raise self.src.error(f"bad register name '{part.strip()}'", pos, part.strip())
            name, count = nm.group(1), nm.group(2)
            self.declare([name] if count is None else [f"{name}{k}" for k in range(int(count))],
                         ptype, vec, line, pos)

    def push_scope(self) -> None:
        self.scopes.append([])
        self.scope_names.append(set())
        self.scope_stack.append(len(self.scope_parent))
        self.scope_parent.append(self.scope_stack[-2])

    def pop_scope(self, pos: int) -> None:
        if len(self.scopes) <= 1:
            raise self.src.error("unbalanced '}'", pos)
        names = self.names
        self.scope_names.pop()
        self.scope_stack.pop()
        self.constants.clear()                  # cached addresses may name what ends here
        for name, prev in reversed(self.scopes.pop()):
            if prev is None:
                del names[name]
            else:
                names[name] = prev

    def materialize(self, name: str, entry: list) -> int:
        """The id of a declared register, created on its first reference."""
        vid = entry[4]
        if vid < 0:
            vid = self.regs.add(name, entry[0], entry[1], entry[2], entry[3])
            self.reg_cache.append(Reg(vid))
            entry[4] = vid
        return vid

    # -- operands --

    def operand(self, tok: str, pos: int):
        e = self.names.get(tok)
        if e is not None:
            vid = e[4]
            if vid < 0:
                vid = self.materialize(tok, e)
            return self.reg_cache[vid]
        got = self.constants.get(tok)
        if got is not None:
            return got
        op = self._operand(tok, pos)
        t = type(op)
        if t is Imm or t is Sym or (t is Mem and not op.rest):
            self.constants[tok] = op            # never changed in place: share one per text
        return op

    def _operand(self, tok: str, pos: int):
        if not tok:
            raise self.src.error("empty operand", pos)
        c = tok[0]
        # the commonest operands besides registers and immediates, read as the general path
        # below reads them: a name alone (a label, a symbol) ...
        if _NAME.fullmatch(tok) is not None:
            if tok == "_":
                return SINK
            if c == "%" and tok not in self.symbols and not _SPECIAL.match(tok):
                self.unresolved.append((tok, pos))
            return Sym(tok)
        # ... and an address of a declared register and a constant offset ([%rd1+16])
        if c == "[":
            m = _REG_ADDRESS.fullmatch(tok)
            if m is not None and m.group(1) in self.names:
                offset = m.group(2)
                return Mem(self.operand(m.group(1), pos),
                           "".join(offset.split()) if offset else "", [], "")
        if "|" in tok:
            a, b = _split_pipe(tok)
            if b is not None:
                return Pair(self.operand(a.strip(), pos), self.operand(b.strip(), pos))
        if c not in "[{(":
            m = _JUXTAPOSED.search(tok)
            if m is not None:
                self.missing_comma(tok, m.end(), pos)
        if c == "%" or c.isalpha() or c == "_" or c == "$":
            if tok == "_":
                return SINK
            m = _COMPONENT.match(tok)
            if m is not None:
                e = self.names.get(m.group(1))
                if e is not None:
                    return Reg(self.materialize(m.group(1), e), m.group(2))
            m = _REG_SUM.match(tok)
            if m is not None and m.group(1) in self.names:
                return Sum(self.operand(m.group(1), pos), "".join(m.group(2).split()))
            self.check_no_register(tok, pos)
            if c == "%" and tok not in self.symbols and not _SPECIAL.match(tok):
                self.unresolved.append((tok, pos))
            return Sym(tok)
        if c == "[":
            suffix = ""
            if tok[-1] != "]":
                close = tok.rfind("]")
                if close < 0 or not re.match(r"\.\w+$", tok[close + 1:]):
                    raise self.src.error(f"unterminated address '{tok}'", pos, tok)
                suffix = tok[close + 1:]
                tok = tok[:close + 1]
            parts = _split_top(tok[1:-1])
            m = _OFFSET.match(parts[0].strip())
            base_text, offset = m.group(1).strip(), "".join(m.group(2).split())
            base = self.operand(base_text, pos) if base_text else None
            if offset:
                self.check_no_register(offset, pos)
            rest = [self.operand(p.strip(), pos) for p in parts[1:]]
            return Mem(base, offset, rest, suffix)
        if c == "{":
            if tok[-1] != "}":
                raise self.src.error(f"unterminated vector '{tok}'", pos, tok)
            return Vec([self.operand(p.strip(), pos) for p in _split_top(tok[1:-1])])
        if c == "!":
            return Not(self.operand(tok[1:].strip(), pos))
        if c == "-" and self._names_register(tok[1:].strip()):
            return Neg(self.operand(tok[1:].strip(), pos))
        if c == "(" and self.in_call:
            if tok[-1] != ")":
                raise self.src.error(f"unterminated list '{tok}'", pos, tok)
            inner = tok[1:-1].strip()
            return Args([self.operand(p.strip(), pos) for p in _split_top(inner)]
                        if inner else [])
        # an immediate in any form, or a constant expression such as ((128 >> 4) << 16)
        self.check_no_register(tok, pos)
        return Imm(tok)

    def missing_comma(self, tok: str, at: int, pos: int) -> None:
        """Report two operands written without a comma between them at the second one (as
        ptxas does); ``at`` is where it starts in the operand text ``tok``."""
        word = _WORD_OR_TOKEN.match(tok, at).group()
        start = self.src.find_token(pos, tok)
        if self.src.text.startswith(tok, start):
            raise self.src.error(f"expected ',' before '{word}'", start + at)
        raise self.src.error(f"expected ',' before '{word}'", pos, word)

    def _names_register(self, tok: str) -> bool:
        """``tok`` is a declared register, or one with a component selector (``%r1.b0``)."""
        if tok in self.names:
            return True
        m = _COMPONENT.match(tok)
        return m is not None and m.group(1) in self.names

    def check_no_register(self, tok: str, pos: int) -> None:
        """Refuse an operand expression that hides a register: its use would be lost."""
        for word in _WORDS.findall(tok):
            if word in self.names:
                raise self.src.error(f"unsupported operand expression '{tok}' (it reads "
                                     f"register '{word}')", pos, tok)

    # -- statements --

    def instruction(self, s: str, pos: int, line: int, loc) -> Instruction:
        """One instruction statement (text without ';')."""
        guard = -1
        neg = False
        if s[0] == "@":
            parts = s[1:].split(None, 1)
            if len(parts) < 2:
                raise self.src.error(f"guard without an instruction in '{s}'", pos)
            gname, s = parts
            if gname[0] == "!":
                neg = True
                gname = gname[1:]
            guard = self.guard(gname, pos)
        parts = s.split(None, 1)
        opcode = parts[0]
        facts = _OPCODE_FACTS.get(opcode) or _opcode_facts(opcode)
        if facts is None:
            raise self.src.error(f"cannot parse statement '{s[:60]}'", pos)
        return self.build(opcode, facts, parts[1] if len(parts) > 1 else "", guard, neg, pos,
                          line, loc)

    def guard(self, name: str, pos: int) -> int:
        """The register id of the guard predicate ``name`` (without its '@' and '!')."""
        e = self.names.get(name)
        if e is None or e[1] != RegClass.PRED:
            raise self.src.error(f"guard '{name}' is not a declared predicate", pos, name)
        vid = e[4]
        return vid if vid >= 0 else self.materialize(name, e)

    def build(self, opcode: str, facts: tuple, rest: str, guard: int, neg: bool, pos: int,
              line: int, loc) -> Instruction:
        """The instruction ``opcode`` (with its :func:`_opcode_facts`) over the operand text
        ``rest`` ('' for none), guarded by the register ``guard`` (-1: none)."""
        if rest:
            o = rest.find("[")
            if "{" in rest or "(" in rest:
                plain = False
            elif o < 0:
                plain = True
            else:
                # one address without commas in it, the common case
                c = rest.find("]", o)
                plain = (c > 0 and rest.count("[") == 1 and rest.count("]") == 1
                         and "," not in rest[o:c])
            if plain:
                # split on the commas; a declared register is looked up inline, and the
                # registers the operands name are collected for the roles (reads: meaningful
                # while every operand is plain, isa.set_plain_roles)
                names = self.names
                cache = self.reg_cache
                ops = []
                reads = []
                plain_reads = True
                for t in rest.split(","):
                    t = t.strip()
                    e = names.get(t)
                    if e is not None:
                        vid = e[4]
                        if vid < 0:
                            vid = self.materialize(t, e)
                        ops.append(cache[vid])
                        reads.append(vid)
                        continue
                    op = self.constants.get(t) or self.operand(t, pos)
                    ops.append(op)
                    ty = type(op)
                    if ty is Mem:
                        if op.rest:
                            plain_reads = False
                        elif type(op.base) is Reg:
                            reads.append(op.base.v)
                    elif ty is not Imm and ty is not Sym:
                        plain_reads = False     # a component, a sum, a sink ...
                if not plain_reads:
                    reads = None
            else:
                bad = _unbalanced_at(rest)
                if bad >= 0:
                    near = rest[bad:bad + 20].split("\n", 1)[0]
                    raise self.src.error(f"unbalanced '{rest[bad]}' in '{rest[:60]}'", pos, near)
                self.in_call = opcode.startswith("call")
                ops = [self.operand(t.strip(), pos) for t in _split_top(rest)]
                reads = None
        else:
            ops = []
            reads = None
        known, count, first, special = facts
        if count != len(ops) and (count is not None or not known):
            if not known:
                self.src.warn(f"unknown opcode '{opcode}'", pos, opcode)
            else:
                self.src.warn(f"'{opcode}' takes {count} operands, not {len(ops)}", pos, opcode)
        instr = Instruction(opcode, ops, guard, neg, line, loc)
        if self.roles:
            if reads is not None and first:
                _set_plain_roles(instr, reads, first if type(ops[0]) is Reg else isa.USE,
                                 self.regs)
            else:
                _classify(instr, self.regs)
        if special:
            if special == "st.param":
                if ops and type(ops[0]) is Mem:
                    self.check_param_store(ops[0], pos)
            else:
                target = next((op.text for op in ops if type(op) is Sym), None)
                self.branches.append((special, target, pos, self.scope_stack[-1], instr))
        return instr

    in_call = False

    def check_param_store(self, address: Mem, pos: int) -> None:
        """Warn of a ``st.param`` to one of the function's own input parameters, which ptxas
        rejects ("Illegal to write to function input parameter"), even where a call's
        ``.param`` of the same name is declared in an inner scope (checked against ptxas)."""
        base = address.base
        if type(base) is not Sym:
            return
        name = base.text
        if any(p.name == name and p.space == "param" for p in self.fn.params):
            self.src.warn(f"Illegal to write to function input parameter '{name}' (ptxas "
                          f"rejects it)", pos, name)

    def statement(self, s: str, pos: int, line: int, loc) -> None:
        """A statement without its ';': a directive, or an instruction possibly preceded by a
        label on the same line."""
        if not s:
            raise self.src.error("empty statement", pos, ";")
        if s[0] == ".":
            self.directive(s, pos, line)
            return
        if ":" in s:
            m = _LABEL_PREFIX.match(s)
            if m is not None:
                name = m.group(1)
                rest = s[m.end():]
                if rest.startswith((".callprototype", ".branchtargets", ".calltargets")):
                    raw = Raw(DIRECTIVE, name + ": " + " ".join(rest.split()) + ";", line)
                    if rest.startswith(".branchtargets"):
                        self.fn.branch_targets[name] = [t.strip() for t in
                                                        rest[14:].split(",")]
                        self.tables[name] = (self.scope_stack[-1], raw, pos)
                    self.fn.body.append(raw)
                    return
                self.label(name, pos, line)         # a warning finds the name itself
                s = rest
                if not s:
                    raise self.src.error(f"label '{name}' followed by an empty statement", pos)
        self.fn.body.append(self.instruction(s, pos, line, loc))

    def parse_body(self, start: int) -> int:
        """Parse statements from ``start`` (just after the body's '{') up to the '}' closing
        the body; returns the position after it.

        A line holding exactly one simple statement, a label or a ``.loc`` takes a fast path
        (the common case). Anything else (statements over several lines or several on a line,
        comments, strings) goes through :meth:`_token`, which reads one token and never looks
        past its end, so the whole body is read in time linear in its length.
        """
        text = self.src.text
        n = len(text)
        body = self.fn.body
        names = self.names
        scopes = self.scopes
        scope_names = self.scope_names
        instruction = self.instruction
        pos = start
        line = self.src.line_of(pos)
        self.depth = 0
        self.open_pos = start - 1
        fresh = True            # pos is at the start of a line (or of the body)
        simple_line = _SIMPLE_LINE.match
        build = self.build
        facts_of = _OPCODE_FACTS.get
        function_scope = scope_names[0]
        while True:
            if fresh:
                m = simple_line(text, pos)
                if m is not None:
                    # the commonest lines in one match (_SIMPLE_LINE)
                    decl, ptype, name, neg, gname, opcode, rest, label, loc = m.groups()
                    if opcode is not None:
                        body.append(build(opcode, facts_of(opcode) or _opcode_facts(opcode),
                                          rest, -1 if gname is None else self.guard(gname, pos),
                                          bool(neg), pos, line, self.loc))
                        pos = m.end()
                        line += 1
                        continue
                    if decl is None:
                        if label is not None:
                            self.label(label, pos, line)
                        elif loc is not None:
                            self.add_loc(loc, line)
                        pos = m.end()               # (or a blank line)
                        line += 1
                        continue
                    rclass = _REG_TYPES.get(ptype)
                    if rclass is not None:
                        if name in names or len(scopes) > 1 or self.constants:
                            self.declare_one(name, ptype, rclass, decl, line, pos)
                        else:
                            # declare_one's work where it has nothing to check or undo
                            names[name] = [ptype, rclass, 0, line, -1]
                            function_scope.add(name)
                            body.append(Raw(REG_DECL, decl, line))
                        pos = m.end()
                        line += 1
                        continue
                nl = text.find("\n", pos)
                if nl < 0:
                    nl = n
                s = text[pos:nl].strip()
                if not s:
                    if nl >= n:
                        raise self.not_closed()
                    pos = nl + 1
                    line += 1
                    continue
                last = s[-1]
                c = s[0]
                if (last == ";" and c != "{" and c != "}" and "/" not in s and '"' not in s
                        and s.count(";") == 1
                        and (c != "." or s[1] not in "lf" or not _LOC_FILE_START.match(s))
                        and (":" not in s or not _LABEL_THEN_LOC_FILE.match(s))):
                    if c == "." and s.startswith(".reg") and "<" not in s and "," not in s:
                        words = s[:-1].split()
                        rclass = (_REG_TYPES.get(words[1]) if len(words) == 3
                                  and words[0] == ".reg" else None)
                        if rclass is not None and words[2][0] != ".":
                            self.declare_one(words[2], words[1], rclass, s, line, pos)
                            pos = nl + 1
                            line += 1
                            continue
                    s = s[:-1]
                    if c != "." and ":" not in s and s:
                        body.append(instruction(s, pos, line, self.loc))
                    else:
                        self.statement(s, pos, line, self.loc)
                    pos = nl + 1
                    line += 1
                    continue
                if last == ":" and _LABEL_LINE.match(s):
                    self.label(s[:-1].rstrip(), pos, line)
                    pos = nl + 1
                    line += 1
                    continue
                if last == "/" and c != "/":
                    # a label and a block comment (Ocelot's "$BB_1_2: /* $Lt_1_3 */"), as the
                    # general path reads them: the label, then the comment on its own
                    m = _LABEL_THEN_COMMENT.fullmatch(s)
                    if m is not None:
                        self.label(m.group(1), pos, line)
                        body.append(Raw(COMMENT, m.group(2), line))
                        pos = nl + 1
                        line += 1
                        continue
                if c == "." and s.startswith(".loc") and _LOC.fullmatch(s) is not None:
                    self.add_loc(s, line)
                    pos = nl + 1
                    line += 1
                    continue
            # the general path: one token
            end = self._token(pos, line)
            if end < 0:
                return -end
            line += text.count("\n", pos, end)
            pos = end
            # back on the fast path when the rest of the line is blank
            while pos < n and text[pos] in " \t\r":
                pos += 1
            fresh = pos < n and text[pos] == "\n"
            if fresh:
                pos += 1
                line += 1

    def not_closed(self, pos: int | None = None) -> PtxSyntaxError:
        """The error for a body that ends (at the end of the input, or where another function
        starts) before its closing '}'."""
        src = self.src
        text = src.text
        opened = self.open_pos
        oline = text.count("\n", 0, opened) + 1
        ocol = opened - text.rfind("\n", 0, opened)
        if pos is None:
            pos = len(text.rstrip())
        return src.error(f"function '{self.fn.name}' opened at {oline}:{ocol} is not closed", pos)

    def add_loc(self, s: str, line: int) -> None:
        """A ``.loc``: the location of the instructions that follow (:func:`_location`). A
        file repeats its ``.loc`` lines (matrix_free: 9,974 of them, 584 different), so each
        text is read once per file."""
        self.fn.body.append(Raw(LOC, s, line))
        locs = self.src.locs
        if s in locs:
            loc = locs[s]
        else:
            loc = locs[s] = _location(s)          # None: a text naming no line, kept as such
        if loc is not None:
            self.loc = loc

    def _token(self, pos: int, line: int) -> int:
        """Read the token at ``pos`` (after blanks): a comment, '{', '}', a ``.loc``/``.file``
        (which end where their operands end), a label, or a statement up to its ';'. Returns
        the position after it, or minus that position for the '}' closing the body."""
        text = self.src.text
        n = len(text)
        body = self.fn.body
        tpos = _BLANKS.match(text, pos).end()
        if tpos >= n:
            raise self.not_closed()
        tline = line + text.count("\n", pos, tpos)
        c = text[tpos]
        if c == "/" and text.startswith(("//", "/*"), tpos):
            end = _skip_string_or_comment(self.src, tpos)
            comment = text[tpos:end]
            prev = body[-1] if body else None
            if (type(prev) is Instruction and prev.line == tline and not prev.comment
                    and "\n" not in comment):
                prev.comment = comment          # a comment trailing the instruction
            else:
                body.append(Raw(COMMENT, comment, tline))
            return end
        if c == "{":
            self.depth += 1
            self.push_scope()
            body.append(Raw(SCOPE_OPEN, "{", tline))
            return tpos + 1
        if c == "}":
            if self.depth == 0:
                return -(tpos + 1)
            self.depth -= 1
            self.pop_scope(tpos)
            body.append(Raw(SCOPE_CLOSE, "}", tline))
            return tpos + 1
        if c == "." and _LOC_FILE_START.match(text, tpos):
            m = _LOC_FILE.match(text, tpos) or _TO_EOL.match(text, tpos)
            s = m.group().rstrip()
            if s.startswith(".loc"):
                self.add_loc(s, tline)
            else:
                body.append(Raw(LOC, s, tline))
            return m.end()
        m = _LABEL_AT.match(text, tpos)
        if m is not None and not _LABELLED_DIRECTIVE.match(text, m.end()):
            self.label(m.group(1), tpos, tline)
            return m.end()
        # a statement: up to the ';' outside braces, strings and comments
        i = tpos
        depth = 0
        commented = False
        search = _STATEMENT_STOP.search
        while True:
            m = search(text, i)
            if m is None:
                raise self.not_closed()
            i = m.start()
            ch = text[i]
            if ch == ";":
                if depth == 0:
                    break
            elif ch == "{":
                if depth == 0 and text[tpos] == "." and _FUNC_KIND.search(text, tpos, i):
                    raise self.not_closed(tpos)     # the next function's body
                depth += 1
            elif ch == "}":
                if depth == 0:
                    raise self.src.error("expected ';' before '}'", i)
                depth -= 1
            else:                               # '"' or '/'
                j = _skip_string_or_comment(self.src, i)
                if j > i:
                    commented = commented or ch == "/"
                    i = j
                    continue
            i += 1
        stmt = text[tpos:i]
        if commented:                           # comments inside a statement are whitespace
            stmt = _INNER_COMMENT.sub(_blank_comment, stmt)
        if stmt[:1] == "." and _FUNC_KIND.search(stmt):
            raise self.not_closed(tpos)
        self.statement(stmt.rstrip(), tpos, tline, self.loc)
        return i + 1

    def directive(self, s: str, pos: int, line: int) -> None:
        if s.startswith(".reg") and (len(s) == 4 or not (s[4].isalnum() or s[4] == "_")):
            self.reg_decl(s, pos, line)
            self.fn.body.append(Raw(REG_DECL, " ".join(s.split()) + ";", line))
        else:
            word = s.split(None, 1)[0]
            if "." + word[1:].split(".", 1)[0] not in _BODY_DIRECTIVES:
                self.src.warn(f"unknown directive '{word}' in a function body", pos, word)
            self.fn.body.append(Raw(DIRECTIVE, " ".join(s.split()) + ";", line))
            for w in re.findall(r"[%$\w]+", s):
                self.symbols.add(w)

    def check_unresolved(self) -> None:
        labels = {name for name, _, _ in self.label_defs}
        for name, pos in self.unresolved:
            if name not in labels and name not in self.symbols:
                raise self.src.error(f"'{name}' is not a declared register", pos, name)
        self.resolve_labels()

    def resolve_labels(self) -> None:
        """Resolve every branch target to the label visible from the branch's scope: the
        innermost enclosing '{ }' block that defines the name, anywhere in it (PTX labels are
        scoped to their block; a label in a sibling or inner block is not visible, as ptxas
        says). Where one name is defined in several scopes, each definition after the first
        gets a fresh name (``waitLoop$1``: '$' is legal in PTX identifiers, and the name is
        one the module does not use) and so do the branches and ``.branchtargets`` lists that
        resolve to it, so that every later pass -- the CFG, the checker's blocks, the emitter
        -- may look labels up function-wide."""
        defs: dict[str, dict[int, str]] = {}        # name -> scope -> its name from now on
        for name, scope, _ in self.label_defs:
            defs.setdefault(name, {})[scope] = name
        taken = set(defs) | self.symbols | set(self.fn.branch_targets)
        for name, scopes in defs.items():
            for scope in list(scopes)[1:]:          # the first definition keeps its name
                k = 1
                while f"{name}${k}" in taken:
                    k += 1
                scopes[scope] = fresh = f"{name}${k}"
                taken.add(fresh)
        for name, scope, label in self.label_defs:
            label.name = defs[name][scope]
        parent = self.scope_parent
        src = self.src

        def visible(name: str, scope: int, pos: int, what: str) -> str:
            by_scope = defs.get(name)
            if by_scope is None:
                raise src.error(what, pos, name)
            s = scope
            while s >= 0:
                got = by_scope.get(s)
                if got is not None:
                    return got
                s = parent[s]
            lines = sorted(line for (sc, nm), line in self.label_lines.items() if nm == name)
            raise src.error(f"{what} (the label at line {lines[0]} is in a '{{ }}' block that "
                            "does not enclose the branch)", pos, name)

        tables = self.fn.branch_targets
        for kind, target, pos, scope, instr in self.branches:
            if target is None:
                raise src.error(f"{kind} without a target label", pos, kind)
            if kind == "bra":
                got = visible(target, scope, pos, f"branch to unknown label '{target}'")
                if got != target:
                    ops = instr.ops
                    i = next(i for i, op in enumerate(ops) if type(op) is Sym)
                    ops[i] = Sym(got)
            elif target not in tables:
                raise src.error(f"brx.idx with unknown target list '{target}'", pos, target)
        for table, (scope, raw, pos) in self.tables.items():
            names = [visible(lab, scope, pos, f"branch target '{lab}' of '{table}' is not a "
                             "label") for lab in tables[table]]
            if names != tables[table]:
                tables[table] = names
                raw.text = f"{table}: .branchtargets {', '.join(names)};"


def _location(s: str) -> tuple | None:
    """The location a ``.loc`` gives the instructions after it, as ``(file index, line,
    column, inlined_at)`` with ``inlined_at`` the ``(file index, line, column)`` of the call it
    was inlined into, or None (PTX ISA 9.0, 11.6.2); None when ``s`` names no line."""
    parts = s.replace(",", " ").split()
    if len(parts) >= 3 and parts[1].isdigit() and parts[2].isdigit():
        col = int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else 0
        inlined = None
        if "inlined_at" in parts:
            at = parts[parts.index("inlined_at") + 1:parts.index("inlined_at") + 4]
            if len(at) == 3 and all(x.isdigit() for x in at):
                inlined = (int(at[0]), int(at[1]), int(at[2]))
        return (int(parts[1]), int(parts[2]), col, inlined)
    return None


def _parse_params(src: _Source, text: str, pos: int, is_return: bool) -> list[Param]:
    params = []
    inner = text.strip()
    if not inner:
        return params
    for part in _split_top(inner):
        part = part.strip()
        if not part:
            continue
        m = _PARAM_NAME.search(part)
        if m is None:
            raise src.error(f"bad parameter '{part}'", pos)
        name, dims = m.group(1), m.group(2)
        words = part[:m.start()].split()
        space = "param"
        ptype = ".b32"
        align = 0
        vec = 0
        k = 0
        while k < len(words):
            w = words[k]
            if w == ".reg":
                space = "reg"
            elif w == ".param":
                space = "param"
            elif w == ".align" and k + 1 < len(words):
                try:
                    align = int(words[k + 1], 0)
                except ValueError:
                    raise src.error(f"bad alignment '{words[k + 1]}' of parameter '{name}'",
                                    pos, words[k + 1]) from None
                k += 1
            elif w in (".v2", ".v4", ".v8"):
                vec = int(w[2])
            elif w.startswith(".v") and "." in w[1:]:
                # ".v2.b16" written without a space
                v, t = w[1:].split(".", 1)
                if v in ("v2", "v4", "v8"):
                    vec = int(v[1])
                    ptype = "." + t
            elif w.lstrip(".") in _TYPE_SIZE:
                ptype = w
            k += 1
        size = _TYPE_SIZE.get(ptype.lstrip("."), 4) * max(vec, 1)
        for d in re.findall(r"\[\s*(\d*)\s*\]", dims):
            size *= int(d) if d else 0
        params.append(Param(name, space, ptype, size, align, vec, is_return))
    return params


_WORD_AT = re.compile(r"\w+")
_HEADER_DIRECTIVES = frozenset((
    "maxntid", "reqntid", "minnctapersm", "maxnctapersm", "maxnreg", "noreturn", "pragma",
    "explicitcluster", "reqnctapercluster", "maxclusterrank", "abi_preserve",
    "abi_preserve_control", "blocksareclusters", "param", "reg", "ptr", "align", "global",
    "shared", "const", "local"))


def parse_param_declaration(text: str) -> Param | None:
    """A ``.param`` declaration statement (``.param .align 8 .b8 param0[16];``) as a
    :class:`Param`, or None when the text is not one."""
    t = text.strip().rstrip(";")
    if not t.startswith(".param"):
        return None
    try:
        params = _parse_params(_Source(t, "<decl>"), t, 0, False)
    except PtxSyntaxError:
        return None
    return params[0] if len(params) == 1 else None


def _skip_string_or_comment(src: _Source, i: int) -> int:
    """The position after the string or comment starting at ``i``; ``i`` itself when none
    starts there."""
    text = src.text
    if text[i] == '"':
        j = text.find('"', i + 1)
        if j < 0:
            raise src.error("unterminated string", i)
        return j + 1
    if text.startswith("//", i):
        j = text.find("\n", i)
        return len(text) if j < 0 else j
    if text.startswith("/*", i):
        j = text.find("*/", i + 2)
        if j < 0:
            raise src.error("unterminated comment", i)
        return j + 2
    return i


def _find_header_end(src: _Source, pos: int) -> tuple[int, str]:
    """Position of the '{' or ';' ending a function header (outside parentheses, comments and
    strings). A ';' followed by the body's '{' ends a ``.pragma "...";`` inside the header
    (PTX ISA: ``.entry foo .pragma "nounroll"; { ... }``), not the header."""
    text = src.text
    depth = 0
    i = pos
    n = len(text)
    seen_kind = False
    stop = _HEADER_STOP.search
    while i < n:
        m = stop(text, i)                   # every other character is skipped
        if m is None:
            break
        i = m.start()
        ch = text[i]
        if ch == '"' or ch == "/":
            j = _skip_string_or_comment(src, i)
            if j > i:
                i = j
                continue
        if ch == ";" and depth == 0:
            m = _AFTER_SEMI.match(text, i + 1)
            if m is not None and text.startswith("{", m.end()):
                i = m.end()
                continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and ch in "{;":
            return i, ch
        elif depth == 0 and ch == ".":
            m = _WORD_AT.match(text, i + 1)
            word = m.group() if m else ""
            if word in ("entry", "func"):
                seen_kind = True
            elif seen_kind and word not in _HEADER_DIRECTIVES:
                # old PTX ends a prototype without ';': the next directive starts here
                return i, ""
            i += 1 + len(word)
            continue
        i += 1
    raise src.error("function header without body or ';'", pos)


_HEADER_STOP = re.compile(r'["/;(){.]')    # the characters _find_header_end looks at
_AFTER_SEMI = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.S)


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)


def _parse_function(src: _Source, start: int, symbols: set[str]) -> tuple[Function | Raw, int]:
    text = src.text
    hend, ch = _find_header_end(src, start)
    header = text[start:hend].rstrip()
    line = src.line_of(start)
    clean = _strip_comments(header)
    if ch != "{":
        symbols.update(re.findall(r"[%$\w]+", clean))
        return Raw(DIRECTIVE, header + ch, line), hend + len(ch)
    km = _FUNC_KIND.search(clean)
    kind = km.group(1)
    linkage = clean[:km.start()].split()
    rest = clean[km.end():].strip()
    returns: list[Param] = []
    if kind == "func" and rest.startswith("("):
        close = _matching_paren(src, rest, 0, start)
        returns = _parse_params(src, rest[1:close], start, True)
        rest = rest[close + 1:].strip()
    m = re.match(r"([A-Za-z_$%][\w$%]*)", rest)
    if m is None:
        raise src.error("function without a name", start)
    name = m.group(1)
    symbols.add(name)
    rest = rest[m.end():].strip()
    params: list[Param] = []
    if rest.startswith("("):
        close = _matching_paren(src, rest, 0, start)
        params = _parse_params(src, rest[1:close], start, False)
        rest = rest[close + 1:].strip()
    directives: dict[str, object] = {}
    for dm in _PERF.finditer(rest):
        key, val = dm.group(1), dm.group(2).strip().rstrip(",").strip()
        if key == "pragma":
            directives.setdefault("pragma", []).append(val)
        elif val:
            nums = [int(x) for x in re.findall(r"\d+", val)]
            directives[key] = nums if len(nums) != 1 else nums[0]
        else:
            directives[key] = True
    fn = Function(name=name, kind=kind, header=header, line=line, linkage=linkage,
                  params=params, returns=returns, directives=directives,
                  filename=src.filename)
    fp = _FunctionParser(src, fn, symbols)
    for p in returns + params:
        symbols.add(p.name)
        if p.space == "reg":
            fp.declare([p.name], p.ptype, p.vec, line, start)
            p.vid = fp.materialize(p.name, fp.names[p.name])
    end = fp.parse_body(hend + 1)
    fp.check_unresolved()
    return fn, end


def _matching_paren(src: _Source, text: str, i: int, pos: int) -> int:
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    raise src.error("unbalanced '(' in function header", pos)


def _statement_end(src: _Source, pos: int) -> int:
    """End of a module-level declaration: the ';' outside braces and strings."""
    text = src.text
    depth = 0
    i = pos
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == '"' or ch == "/":
            j = _skip_string_or_comment(src, i)
            if j > i:
                i = j
                continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise src.error("unbalanced '}'", i)
        elif ch == ";" and depth == 0:
            return i + 1
        i += 1
    raise src.error("declaration is not closed by ';'", pos)


def parse(text: str, filename: str = "<input>", *, roles: bool = True) -> Module:
    """Parse PTX source text into a :class:`Module`. With ``roles=False`` instructions get no
    operand roles, defs or uses (the checker reads those from the original only)."""
    with gc_paused():
        return _parse(text, filename, roles)


def _parse(text: str, filename: str, roles: bool = True) -> Module:
    src = _Source(text, filename, roles)
    module = Module(filename=filename)
    symbols: set[str] = set()
    items = module.items
    pos = 0
    n = len(text)
    token = _TOP_TOKEN.match
    while pos < n:
        m = token(text, pos)
        if m is not None:
            kind = m.lastgroup
            if kind == "ws":
                pass
            elif kind in ("lc", "bc"):
                items.append(Raw(COMMENT, m.group(), src.line_of(pos)))
            elif kind == "line":
                m = _MODULE_LINE.match(text, pos) or _TO_EOL.match(text, pos)
                s = m.group().rstrip()
                items.append(Raw(LOC if s.startswith((".file", ".loc")) else DIRECTIVE, s,
                                 src.line_of(pos)))
                _record_module_line(src, module, s, pos)
            else:
                items.append(Raw(DIRECTIVE, m.group().strip(), src.line_of(pos)))
            pos = m.end()
            continue
        ch = text[pos]
        if ch == ".":
            hm = re.compile(r"(?:\.\w+\s+)*?\.(entry|func)\b").match(text, pos)
            if hm is not None and not re.match(r"[^;{(]*\.callprototype", text[pos:hm.end()]):
                item, pos = _parse_function(src, pos, symbols)
                items.append(item)
                continue
            end = _statement_end(src, pos)
            decl = text[pos:end].strip()
            items.append(Raw(DIRECTIVE, decl, src.line_of(pos)))
            symbols.update(re.findall(r"[%$\w]+", _strip_comments(decl)))
            pos = end
            continue
        raise src.error(f"unexpected '{text[pos:pos + 20].split()[0]}' at module scope", pos)
    if not module.version:
        src.warnings.append(Diagnostic("no .version directive (ptxas requires one)", filename))
    if not module.target:
        src.warnings.append(Diagnostic("no .target directive (ptxas requires one)", filename))
    if not any(type(it) is Function for it in items):
        src.warnings.append(Diagnostic("no function in the module", filename))
    module.warnings = src.warnings
    return module


def _record_module_line(src: _Source, module: Module, s: str, pos: int) -> None:
    words = _strip_comments(s).replace(",", " ").split()
    if words[0] == ".version" and len(words) > 1:
        module.version = words[1]
        if not _KNOWN_VERSION.fullmatch(words[1]):
            src.warn(f"unknown .version '{words[1]}'", pos, words[1])
    elif words[0] == ".target":
        module.target = words[1:]
    elif words[0] == ".address_size" and len(words) > 1:
        try:
            module.address_size = int(words[1])
        except ValueError:
            pass


def parse_file(path: str) -> Module:
    """Parse a PTX file (``-``: standard input, named ``<stdin>`` in errors); unreadable or
    non-UTF-8 files are reported as errors."""
    from ..files import read_input
    release_frozen_cycles()             # the last file's cycles, before this one is built
    data, path = read_input(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        start = data.rfind(b"\n", 0, e.start) + 1
        end = data.find(b"\n", e.start)
        source_line = data[start:len(data) if end < 0 else end].decode("utf-8", "replace")
        column = len(data[start:e.start].decode("utf-8", "replace")) + 1
        raise PtxSyntaxError(f"file is not UTF-8 text (byte 0x{data[e.start]:02x})", path, line,
                             column, source_line) from None
    return parse(text, path)
