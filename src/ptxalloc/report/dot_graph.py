"""``ptxalloc graph``: one function's interference graph in Graphviz DOT (seed 000 phase 2, seed
002 "Interference Graph Construction"; issue 15).

Nodes are the function's virtual registers as written (:class:`~ptxalloc.analysis.interference.
InterferenceGraph` of the parsed function), labelled with the name and the physical register
the allocation gave it; nodes on one physical register share a fill colour (the colour is a hash
of the register's name, so it is the same from run to run). A spilled or rematerialized value
(its register lives only in the short temporaries of its reloads) is a red double octagon
labelled ``spilled``/``remat``. An edge is an interference (solid); a copy ``mov d, s`` is a
dashed edge, bold where coalescing gave both ends one register. Predicates interfere only with
predicates (their own file) and are drawn as diamonds.
"""

from __future__ import annotations

import hashlib

from ..ir.registers import RegClass
from ..util import bits


def _colour(name: str) -> str:
    """A light fill colour fixed by ``name``."""
    h = int(hashlib.md5(name.encode()).hexdigest()[:4], 16) / 0xFFFF
    return f'"{h:.3f} 0.35 0.95"'


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _label(*lines: str | None) -> str:
    """A quoted label of the lines given (None left out), one under another."""
    return _quote("\n".join(x for x in lines if x))


def interference_dot(fn, graph, result=None) -> str:
    """The DOT text of ``fn``'s interference ``graph``; ``result`` (a FunctionResult) gives the
    physical registers and the spilled values, None draws the graph unallocated."""
    regs = fn.regs
    used = set()
    for ins in fn.instructions():
        used.update(ins.defs)
        used.update(ins.uses)
    spilled: dict[str, str] = {}
    names: list[str] | None = None
    if result is not None:
        names = result.names
        for row in result.extra.get("spills", {}).get("values", []):
            spilled[row["name"]] = ("remat" if row.get("recomputations") and not row.get("stores")
                                    else "spilled")
    title = f"interference of {fn.name}"
    if result is not None:
        title += f" ({result.allocator}, budget {result.budget})"
    out = [f"graph {_quote(fn.name)} {{", f"  label={_quote(title)};",
           "  labelloc=t; overlap=false; splines=true;",
           '  node [style=filled, fontname="monospace", fontsize=10];']
    for v in sorted(used):
        name = regs.names[v]
        shape = "diamond" if regs.classes[v] == RegClass.PRED else "ellipse"
        if name in spilled:
            out.append(f"  n{v} [label={_label(name, spilled[name])}, "
                       f'shape=doubleoctagon, color="#d62728", fillcolor="#ffe5e5"];')
            continue
        phys = names[v] if names is not None and v < len(names) and names[v] != name else None
        fill = _colour(phys) if phys else '"#eeeeee"'
        out.append(f"  n{v} [label={_label(name, phys)}, shape={shape}, fillcolor={fill}];")
    for u in sorted(used):
        for v in bits(graph.adj[u]):
            if v > u and v in used:
                out.append(f"  n{u} -- n{v};")
    seen = set()
    for _, d, s in graph.moves:
        key = (min(d, s), max(d, s))
        if d == s or key in seen or d not in used or s not in used:
            continue
        seen.add(key)
        joined = (names is not None and max(d, s) < len(names) and names[d] == names[s]
                  and regs.names[d] != names[d])
        style = '"dashed,bold"' if joined else "dashed"
        out.append(f"  n{key[0]} -- n{key[1]} [style={style}, color=\"#555555\", "
                   f"constraint=false];")
    out.append("}")
    return "\n".join(out) + "\n"
