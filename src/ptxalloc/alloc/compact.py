"""Register compaction: recolor a finished allocation to lower its high-water mark.

Briggs's select (and the fat-point scan) decide *which* values stay in registers; the colors
they pick depend on the simplify order, which the seeds fix by spill-cost priority, not by what
keeps the register count low. Once an allocation has no spill left, this pass recolors the same
interference graph greedily in program order — each node, in the order its first definition
appears in the blocks' reverse post-order, takes the lowest free placement of its shape — and
keeps the result only if it uses fewer registers and still fits the budget. For code in SSA form
(most of what nvcc and Triton emit) the program order is a perfect elimination order of the
chordal interference graph, so with 32-bit values this reaches MaxLive. Above it, the squeaky
wheel (:func:`squeaky_wheel`) colors in program order below the bound again and again, each
node that found no room moved to the front (registers defined twice, aligned pairs and groups
fragmented by the narrow values before them), then a bounded
backtracking search tries one register fewer at a time; a greedy clique bounds it from below
(:func:`clique_registers`: a count at the bound needs no search, and a graph whose clique needs
more than a rival coloring uses is not searched), as do two register tuples whose neighbours
fill the file (:func:`tight_tuples_rule_out`: alignment, which no clique sees), and a search
asked again with the same
inputs is answered from memory (:func:`_remembered_search`). What every coloring of one
problem reads (program order, copy partners, each node's earlier neighbours) is built once
(:class:`_Graph`). Time figures: docs/decisions.md, "Where ``allocate``'s time goes, phase by
phase", "Large files, round 5" and "Compaction, the pre-passes and finish on large files".

It changes no spill decision and no value's class or alignment; the checker proves the result
like any other. docs/decisions.md records it as the project's addition to the seeds.
"""

from __future__ import annotations

import sys
from functools import reduce
from operator import itemgetter, or_
from weakref import WeakKeyDictionary

from ..target.units import GPR
from ..target.units import blocked_starts as _blocked_starts
from ..util import bits, numpy_when_worth
from .api import Coloring, Problem


def high_water(p: Problem, start: dict[int, int]) -> int:
    """Registers used: highest GPR register index + 1 (0 when none)."""
    top = -1
    for n, s in start.items():
        sh = p.shape[n]
        if sh.file == GPR:
            top = max(top, (s + sh.units - 1) // 2)
    return top + 1


def _program_order(p: Problem) -> list[int]:
    prog = p.program
    defs, uses, blocks = prog.defs, prog.uses, prog.blocks
    first: dict[int, int] = {}
    pos = 0
    for bid in prog.order:
        lo, hi = blocks[bid][0], blocks[bid][1]
        for i in range(lo, hi):
            for v in defs[i] + uses[i]:
                n = p.find(v)
                if n not in first:
                    first[n] = pos
            pos += 1
    nodes = [n for n in p.members if n not in p.precolored]
    return sorted(nodes, key=lambda n: (first.get(n, -1), n))


def _move_partners(p: Problem) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for _, d, s, _ in p.moves:
        a, b = p.find(d), p.find(s)
        if a != b and p.shape[a] == p.shape[b] and not p.interferes(a, b):
            out.setdefault(a, []).append(b)
            out.setdefault(b, []).append(a)
    return out


class _Graph:
    """What every coloring of one finished problem reads, built once per problem: the nodes
    in program order, the copy partners, and each node's *earlier* neighbours (precolored, or
    before it in program order), unpacked from the adjacency bitset once and gathered by an
    ``itemgetter`` (:func:`_gatherers`). A coloring in program order finds a node's colored
    neighbours among those only (renderer.ptx: 33 neighbours a node on average, half of them
    earlier); one whose order takes some nodes ahead gathers those apart (:func:`_greedy`).
    The three greedy colorings, every squeaky-wheel run and the search of one problem share it
    (renderer.ptx: 304 unpackings of every node's neighbours for 110 functions before).
    ``rows`` holds per node what :func:`_greedy` reads of it, in one tuple (one look-up a node
    in the colorings' inner loop): the gatherer of its earlier neighbours, its copy partners,
    its shape, units, the bitmask of that many units and whether it is a general register."""

    def __init__(self, p: Problem):
        self.order = _program_order(p)
        self.partners = partners = _move_partners(p)
        adj, shape = p.adj, p.shape
        earlier = 0
        for n in p.precolored:
            earlier |= 1 << n
        before = {}
        for n in self.order:
            before[n] = bits(adj[n] & earlier)
            earlier |= 1 << n
        gather = _gatherers(before)
        self.rows = {}
        for n in self.order:
            sh = shape[n]
            self.rows[n] = (gather[n], tuple(partners.get(n, ())), sh, sh.units,
                            (1 << sh.units) - 1, sh.file == GPR)
        self._regfile = p.regfile
        self._starts: dict = {}

    def starts(self, limit_units: int | None) -> dict:
        """Per shape (filled in by :meth:`start_mask`), the bitset of the start units of its
        placements, general registers' below ``limit_units`` (all when None)."""
        got = self._starts.get(limit_units)
        if got is None:
            got = self._starts[limit_units] = {}
        return got

    def start_mask(self, sh, limit_units: int | None) -> int:
        """``starts(limit_units)[sh]``, computed on first use."""
        known = self.starts(limit_units)
        got = known.get(sh)
        if got is None:
            got = known[sh] = _start_mask(
                (s, m) for s, m in self._regfile.placements(sh)
                if limit_units is None or sh.file != GPR or s + sh.units <= limit_units)
        return got


_graphs: WeakKeyDictionary = WeakKeyDictionary()    # problem -> (its stamp, its _Graph)


def _graph(p: Problem) -> _Graph:
    """``p``'s :class:`_Graph`, built on first use; built again if coalescing changed ``p``
    since (compaction runs once allocation is over, so in practice once)."""
    stamp = (p.merges, len(p.members), len(p.precolored))
    got = _graphs.get(p)
    if got is None or got[0] != stamp:
        got = _graphs[p] = (stamp, _Graph(p))
    return got[1]


def _greedy(p: Problem, order: list[int], best_fit: bool, limit_units: int | None = None,
            failed: list[int] | None = None, ahead: int | dict[int, int] = 0
            ) -> dict[int, int] | None:
    """Lowest-free-placement coloring in ``order``. A node first tries the placement of a
    copy partner already colored (so the copy disappears); with ``best_fit`` a value narrower
    than a pair prefers a free placement inside a pair that is already partly used, so that
    free pairs stay whole. With ``limit_units`` general registers are placed below that unit
    only; a node that finds no placement is appended to ``failed`` (when given).

    ``ahead`` says which nodes ``order`` may color before a node besides its earlier ones in
    program order (:class:`_Graph`), so that each node gathers the units of the neighbours
    colored before it: a bitset for every node (0: ``order`` is the program order; the
    squeaky wheel's nodes moved to the front), or a bitset per node (the wider values, for
    the order that colors wide values first)."""
    graph = _graph(p)
    shape = p.shape
    start = dict(p.precolored)
    held = [0] * p.nregs                # node -> the units it holds (0: not colored yet)
    for n, s in start.items():
        held[n] = shape[n].mask(s)
    rows, adj = graph.rows, p.adj
    per_node = ahead if type(ahead) is dict else None
    unit = held.__getitem__
    starts_of = graph.starts(limit_units)
    for n in order:
        gather, partners, sh, w, ones, gpr = rows[n]
        # the units of the colored neighbours: C-level gathers and ORs (a neighbour not
        # colored yet holds none)
        forbidden = reduce(or_, gather(held), 0)
        if ahead:
            extra = adj[n] & (ahead if per_node is None else per_node[n])
            if extra:
                forbidden = reduce(or_, map(unit, bits(extra)), forbidden)
        choice = None
        for m in partners:
            sm = start.get(m)
            if sm is not None and not ones << sm & forbidden and (
                    limit_units is None or not gpr or sm + w <= limit_units):
                choice = sm
                break
        if choice is None:
            starts = starts_of.get(sh)
            if starts is None:
                starts = graph.start_mask(sh, limit_units)
            if best_fit and w < 4 and gpr:
                choice = _lowest_free(starts, w, forbidden, True)
            else:                               # _lowest_free, inlined for the usual widths
                free = starts & ~(forbidden | forbidden >> 1 if w == 2 else forbidden if w == 1
                                  else _blocked_starts(forbidden, w))
                choice = (free & -free).bit_length() - 1 if free else None
            if choice is None:
                if failed is not None:
                    failed.append(n)
                return None
        start[n] = choice
        held[n] = ones << choice
    return start


def _gatherers(neighbour_lists: dict[int, list[int]]) -> dict:
    """Per node, a function taking a list indexed by node and returning the entries of the
    nodes of its list (an ``itemgetter``; a tuple whatever their number)."""
    out = {}
    empty = ()
    for n, nbrs in neighbour_lists.items():
        if len(nbrs) > 1:
            out[n] = itemgetter(*nbrs)
        elif nbrs:
            m = nbrs[0]
            out[n] = lambda held, m=m: (held[m],)
        else:
            out[n] = lambda held: empty
    return out


def _start_mask(placements) -> int:
    """The bitset of the start units of ``placements``."""
    m = 0
    for s, _ in placements:
        m |= 1 << s
    return m


_QUAD_STARTS = int("0001" * 512, 2)       # every fourth unit: the first unit of each pair


def _lowest_free(starts: int, units: int, forbidden: int, keep_pairs_whole: bool) -> int | None:
    """The lowest start in ``starts`` whose ``units`` units are free of ``forbidden``; with
    ``keep_pairs_whole`` the lowest one inside a partly used aligned pair of registers when
    there is one. Bit-parallel: a start is blocked when any of the ``units`` units from it is
    forbidden, i.e. by ``forbidden`` shifted down by 0 .. units-1."""
    free = starts & ~_blocked_starts(forbidden, units)
    if not free:
        return None
    if keep_pairs_whole:
        touched = forbidden | forbidden >> 1 | forbidden >> 2 | forbidden >> 3
        touched &= _QUAD_STARTS                  # pairs (4 units) with a unit in use
        touched |= touched << 1 | touched << 2 | touched << 3
        inside = free & touched
        if inside:
            free = inside
    return (free & -free).bit_length() - 1


class _OutOfSteps(Exception):
    pass


_searched: dict = {}        # answers by their whole input (:func:`_remembered`)
#: Searches and squeaky-wheel runs remembered (one memory, the oldest forgotten first).
SEARCHES_REMEMBERED = 128


def _input_key(p: Problem, order: list[int]) -> tuple:
    """What a coloring of ``p`` in ``order`` reads of it: the register file, the order, each
    node's shape and neighbours, the precolored nodes (in their order) and shapes."""
    shape, adj, regfile = p.shape, p.adj, p.regfile
    return (regfile.k, regfile.pred_regs, regfile.reserved, tuple(order),
            tuple([shape[n] for n in order]), tuple([adj[n] for n in order]),
            tuple([(n, s, shape[n]) for n, s in p.precolored.items()]))


def _remembered(key: tuple, compute):
    """``compute()``, answered from memory when asked before in this process with the same
    ``key`` (the whole input of a pure computation); a coloring is handed out as a copy."""
    got = _searched.get(key, _searched)
    if got is _searched:
        got = compute()
        if len(_searched) >= SEARCHES_REMEMBERED:
            del _searched[next(iter(_searched))]
        _searched[key] = got
    return dict(got) if type(got) is dict else got


def _remembered_search(p: Problem, order: list[int], limit_units: int,
                       steps: int) -> dict[int, int] | None | bool:
    """:func:`_search`, answered from memory when the same search ran before in this process.
    A search is a pure function of what it reads — the order, each node's shape and
    neighbours, the precolored nodes (in their order) and shapes, the register file, the limit
    and the step budget — and that is the key; functions instantiated from one template
    (matrix_free, reduction kernels) ask the same searches again and again, most of them ones
    that give up after their whole budget."""
    return _remembered(("search", limit_units, steps) + _input_key(p, order),
                       lambda: _search(p, order, limit_units, steps))


def _search(p: Problem, order: list[int], limit_units: int,
            steps: int) -> dict[int, int] | None | bool:
    """Backtracking search for a coloring of every node below ``limit_units``. The next node
    is always the most constrained one (DSATUR: the most units its colored neighbours take,
    then the highest degree, then program order), and each of its placements is tried lowest
    first. A placement that leaves an uncolored neighbour no free placement is abandoned at
    once (forward checking: that branch holds no coloring, so the first coloring found is the
    same, in fewer steps). Returns the coloring, False when none exists (the search was
    exhaustive: every placement of every chosen node was tried), or None when it gave up
    after ``steps`` tries. Each uncolored node's free starts and saturation are kept up to
    date as its neighbours are colored and uncolored (one mask per neighbour a placement
    reaches) rather than recomputed from its forbidden units: the same search, 30 % less CPU
    on convolutionTexture's (docs/decisions.md, "convolutionTexture and small files")."""
    start: dict[int, int] = dict(p.precolored)
    shape = p.shape
    adj = p.adj
    n_order = len(order)
    index = {n: i for i, n in enumerate(order)}
    # per node (by its index in ``order``): shape, units, and uncolored neighbours' indices
    shapes = [shape[n] for n in order]
    widths = [sh.units for sh in shapes]
    masks = [(1 << sh.units) - 1 for sh in shapes]
    nbrs_of = [bits(adj[n]) for n in order]
    nbrs = [[index[m] for m in ms if m in index] for ms in nbrs_of]
    below_of: dict = {}                        # per shape: its start units below the limit
    for sh in shapes:
        if sh not in below_of:
            below_of[sh] = _start_mask((s, m) for s, m in p.regfile.placements(sh)
                                       if sh.file != GPR or s + sh.units <= limit_units)
    below = [below_of[sh] for sh in shapes]
    # forbidden units of each uncolored node, from its colored (precolored) neighbours
    forbidden = [0] * n_order
    for i, ms in enumerate(nbrs_of):
        f = 0
        for m in ms:
            sm = start.get(m)
            if sm is not None:
                f |= shape[m].mask(sm)
        forbidden[i] = f
    # the free start units of each uncolored node: its placements below the limit that no
    # colored neighbour's units block (kept as neighbours are colored: a start is blocked by
    # the union of two sets of units exactly when by one of them)
    free_of = [below[i] & ~_blocked_starts(forbidden[i], widths[i]) for i in range(n_order)]
    # per node, per uncolored neighbour: (its index, the starts of the neighbour that the
    # node's placement at 0 blocks, shifted up by the neighbour's units - 1)
    reach = [[(j, (1 << (widths[i] + widths[j] - 1)) - 1, widths[j] - 1) for j in nbrs[i]]
             for i in range(n_order)]
    # selection key: saturation first, then degree, then earlier in program order; unique per
    # node, so ``max`` over the list picks the node and ``index`` finds it. Colored: -1.
    tie = [(len(nbrs_of[i]) << 16) | (n_order - i) for i in range(n_order)]
    key = [(forbidden[i].bit_count() << 32) | tie[i] for i in range(n_order)]
    # the same keys in a numpy array on large graphs, kept in step with ``key``: its argmax
    # is the list's (the keys are unique), 0.6 us against 25 us for 900 nodes (timeit). Only
    # where the run has imported numpy already: a search's step budget says little of the
    # steps it takes, so it is not counted as work worth importing numpy for (80 ms)
    np = numpy_when_worth(0) if n_order >= SEARCH_NUMPY_NODES else None
    keys = np.array(key, np.int64) if np is not None else None
    left = [n_order]
    budget = [steps]

    def place() -> bool:
        if not left[0]:
            return True
        # the most constrained uncolored node
        i = int(keys.argmax()) if keys is not None else key.index(max(key))
        saved_key = key[i]
        key[i] = -1
        if keys is not None:
            keys[i] = -1
        left[0] -= 1
        width = masks[i]
        node = order[i]
        free = free_of[i]
        near = reach[i]
        while free:                            # its free placements, lowest first
            low = free & -free
            free ^= low
            s = low.bit_length() - 1
            units = width << s
            budget[0] -= 1
            if budget[0] < 0:
                raise _OutOfSteps
            start[node] = s
            changed = []
            wiped_out = False
            for j, over, shift in near:
                kj = key[j]
                if kj >= 0:
                    old = forbidden[j]
                    added = units & ~old
                    if added:
                        old_free = free_of[j]
                        changed.append((j, old, old_free, kj))
                        forbidden[j] = old | added
                        key[j] = kj + (added.bit_count() << 32)
                        if keys is not None:
                            keys[j] = key[j]
                        left_free = free_of[j] = old_free & ~(over << s >> shift)
                        if not left_free:
                            wiped_out = True
                            break
            if not wiped_out and place():
                return True
            for j, old, old_free, kj in changed:
                forbidden[j] = old
                free_of[j] = old_free
                key[j] = kj
                if keys is not None:
                    keys[j] = kj
            del start[node]
        key[i] = saved_key
        if keys is not None:
            keys[i] = saved_key
        left[0] += 1
        return False

    try:
        return start if place() else False
    except (_OutOfSteps, RecursionError):
        return None


SEARCH_STEPS = 5000
#: From this many nodes the search finds its next node with numpy (when the run has imported
#: it already: :func:`~ptxalloc.util.numpy_when_worth`); below, a list's max is as fast.
SEARCH_NUMPY_NODES = 64
#: steps x nodes: a step costs time in proportion to the nodes. 600,000 was tried (Triton's
#: vector add in the scheduler's first order needs 3,100 steps on its 129-node graph); at the
#: defaults it changed no allocation of the 60-file sample at any budget, and doubled the work
#: of every search that gives up (docs/decisions.md, "Registers = MaxLive at K = 255, session 7")
SEARCH_WORK = 300_000
SEARCH_MAX_NODES = 400
#: Above SEARCH_MAX_NODES, a graph one register above its bound gets one search at the bound of
#: this many steps a node: a DSATUR descent (a node a step) with room to back out of a few
#: dead ends (docs/decisions.md, "Registers = MaxLive at K = 255, session 7").
LARGE_SEARCH_STEPS_PER_NODE = 2
LARGE_SEARCH_MAX_NODES = 1000


def _deep_search(p: Problem, order: list[int], limit_units: int,
                 steps: int) -> dict[int, int] | None | bool:
    """:func:`_remembered_search` on a graph whose nodes may outnumber Python's recursion
    limit (the search recurses once per node placed): the limit is raised for the call and put
    back. Remembered: renderer.ptx asks 8 of its 26 descents twice."""
    old = sys.getrecursionlimit()
    need = len(order) + RECURSION_MARGIN
    if need > old:
        sys.setrecursionlimit(need)
    try:
        return _remembered_search(p, order, limit_units, steps)
    finally:
        sys.setrecursionlimit(old)


RECURSION_MARGIN = 500      # frames above the search: the allocator's, the CLI's, pytest's


def search_steps(nodes: int) -> int:
    """The step limit of a search over ``nodes`` nodes. A step picks the most constrained of
    the uncolored nodes and updates its neighbours, so its cost grows with the graph; the limit
    is a fixed amount of work, at most SEARCH_STEPS. Measured over the corpus at K = default
    (docs/decisions.md): searches that succeed or prove a count impossible take at most 10
    steps a node on graphs above 100 nodes, while the ones that give up are the large graphs
    (renderer.ptx: 300-400 nodes, 5,000 steps each, proving nothing)."""
    return min(SEARCH_STEPS, SEARCH_WORK // max(nodes, 1))


def clique_registers(p: Problem) -> int:
    """A lower bound on the registers of every coloring of ``p``: a clique of general-register
    nodes, grown greedily (widest, then most neighbours, first) from each of the
    ``CLIQUE_SEEDS`` first nodes in that order; its members need pairwise distinct units, so at
    least half their units in registers. Cheap (a walk over the nodes per seed), never more
    than the chromatic number, usually MaxLive's order on the graphs compaction searches."""
    adj, shape = p.adj, p.shape
    gpr = [n for n in p.members if shape[n].file == GPR]
    gpr_mask = 0
    for n in gpr:
        gpr_mask |= 1 << n
    ranked = sorted(gpr, key=lambda n: (-shape[n].units, -(adj[n] & gpr_mask).bit_count(), n))
    units_of = [(n, shape[n].units) for n in ranked]
    best = 0
    for seed, seed_units in units_of[:CLIQUE_SEEDS]:
        cand = adj[seed] & gpr_mask
        units = seed_units
        for n, u in units_of:
            if cand >> n & 1:
                units += u
                cand &= adj[n]
                if not cand:
                    break
        best = max(best, units)
    return (best + 1) // 2


CLIQUE_SEEDS = 8


def tight_tuples_rule_out(p: Problem, registers: int) -> bool:
    """Whether two *tight* register tuples prove that no coloring of ``p`` fits in
    ``registers`` general registers, where a clique bound does not see it (alignment).

    A tuple ``q`` (a pair or quad: units = alignment, w registers) is tight when its
    neighbours are 32-bit values, none precolored, pairwise interfering, and as many as the
    registers available below the limit (not reserved) minus w: in any coloring ``q`` holds an
    aligned block X of w registers and its neighbours hold every other available register,
    one each. For two tight tuples of one shape, ``q1`` and ``q2``, with common neighbours S:

    - in different blocks, S lies outside both, in ``available - 2w`` registers;
    - in one block, both neighbourhoods fill the same registers, so every register outside
      S's holds one neighbour of ``q1`` only and one of ``q2`` only, which must not interfere.

    When S is larger than ``available - 2w`` and a neighbour of only one of them interferes
    with every neighbour of only the other, neither can happen: no coloring in ``registers``
    (nor in fewer). convolutionTexture's ``convolutionRow<N>`` is that shape — the texture
    fetches' coordinate and result quads among the partial sums, the last fetch's quad beside
    one partial sum more and one coordinate less — where the search gives up at MaxLive
    (docs/decisions.md, "convolutionTexture and small files")."""
    reserved = p.regfile.reserved
    available = sum(1 for r in range(min(registers, p.regfile.k))
                    if not reserved >> (2 * r) & 3)
    adj, shape, precolored = p.adj, p.shape, p.precolored
    scalars = 0
    tuples = []
    for n in p.members:
        sh = shape[n]
        if sh.file != GPR or n in precolored:
            continue
        if sh.units == sh.align == 2:
            scalars |= 1 << n
        elif sh.units == sh.align and sh.units in (4, 8):
            tuples.append(n)
    tight: dict = {}                           # shape -> the neighbours of each tight tuple
    for q in tuples:
        sh = shape[q]
        near = adj[q]
        if near & ~scalars or near.bit_count() != available - sh.units // 2:
            continue
        if all((adj[m] | 1 << m) & near == near for m in bits(near)):
            tight.setdefault(sh, []).append(near)
    for sh, sides in tight.items():
        w = sh.units // 2
        for i, near1 in enumerate(sides):
            for near2 in sides[i + 1:]:
                if (near1 & near2).bit_count() <= available - 2 * w:
                    continue                   # in different blocks they may fit
                only1, only2 = near1 & ~near2, near2 & ~near1
                if only1 and (any(adj[m] & only2 == only2 for m in bits(only1))
                              or any(adj[m] & only1 == only1 for m in bits(only2))):
                    return True
    return False


def greedy_colorings(p: Problem) -> list[dict[int, int] | None]:
    """The three program-order greedy colorings :func:`compact` starts from — lowest fit, best
    fit for narrow values, wide values first — each None when it found no placement for some
    node."""
    order = _graph(p).order
    shape = p.shape
    wide_first = sorted(order, key=lambda n: -shape[n].units)      # stable: keeps order
    lowest = _greedy(p, order, False)
    best_fit = _greedy(p, order, True)
    # with every value of one width the wide-first order is the program order (a stable
    # sort): its coloring is the best-fit one
    if wide_first == order:
        return [lowest, best_fit, best_fit]
    of_width: dict[int, int] = {}   # units -> the nodes of that many units
    for n in order:
        units = shape[n].units
        of_width[units] = of_width.get(units, 0) | 1 << n
    wider = {u: reduce(or_, [m for w, m in of_width.items() if w > u], 0) for u in of_width}
    return [lowest, best_fit, _greedy(p, wide_first, True, ahead={n: wider[shape[n].units]
                                                                 for n in order})]


def fewest_registers(colorings: list[dict[int, int] | None], p: Problem) -> int | None:
    """The fewest registers among ``colorings`` (:func:`greedy_colorings`); None if all failed."""
    return min((high_water(p, s) for s in colorings if s is not None), default=None)


SQUEAKY_TRIES = 30
#: Tries in a row in which no run gets further in the order than an earlier one: then the
#: squeaky wheel gives up (renderer.ptx 10.36 -> 9.55 s CPU, the same registers on renderer,
#: convolutionTexture and thrust histogram; one register more on one Triton kernel).
SQUEAKY_STALL = 10


def squeaky_wheel(p: Problem, registers: int,
                  tries: int = SQUEAKY_TRIES) -> dict[int, int] | None:
    """A coloring of ``p`` in at most ``registers`` general registers, or None when none was
    found (which proves nothing). Squeaky-wheel optimization (Joslin and Clements 1999) over
    the program-order greedy: color in order below the limit; when a node finds no placement,
    move it to the front of the order and color again, at most ``tries`` times (fewer when
    ``SQUEAKY_STALL`` tries in a row fail no further in the order than an earlier one), each
    node taking the lowest free placement (:func:`_greedy`; best fit for narrow values rescued 2 of
    1,079 successes over the corpus at K = 255 and doubled the time of the failures, so it is
    not tried).

    The program order alone is optimal for 32-bit values in SSA form; what makes it miss
    MaxLive on real code is the few nodes it reaches too late — a register defined twice (a
    variable of the source assigned on two paths), a 64-bit pair or a tuple whose aligned
    placement the narrow values around it have already fragmented. Placing those first lets
    the rest fill around them (docs/decisions.md, "Registers = MaxLive at K = 255").

    A pure function of the graph, its copy partners, the register file and the limit:
    answered from memory when asked again (:func:`_remembered`; functions instantiated from
    one template ask the same, thrust's histogram.ptx 21 of its 46 runs)."""
    graph = _graph(p)
    order = graph.order
    if not order:
        return None
    partners = tuple([graph.rows[n][1] for n in order])
    return _remembered(("squeaky", registers, tries, SQUEAKY_STALL, partners)
                       + _input_key(p, order), lambda: _squeaky_wheel(p, order, registers, tries))


def _squeaky_wheel(p: Problem, order: list[int], registers: int,
                   tries: int) -> dict[int, int] | None:
    """:func:`squeaky_wheel`, computed."""
    limit = 2 * registers
    current = list(order)
    moved = 0                           # the nodes moved to the front: the rest keep the order
    furthest, stalled = -1, 0
    for _ in range(tries):
        failed: list[int] = []
        start = _greedy(p, current, False, limit, failed, ahead=moved)
        if start is not None:
            return start
        if not failed or current[0] == failed[0]:
            break                       # the node placed first still finds no room
        at = current.index(failed[0])
        if at > furthest:
            furthest, stalled = at, 0
        else:
            stalled += 1
            if stalled > SQUEAKY_STALL:
                break                   # no run got further for that many tries
        del current[at]
        current.insert(0, failed[0])
        moved |= 1 << failed[0]
    return None


def compact(p: Problem, coloring: Coloring, lower_bound: int = 0, penalty=None,
            to_beat: tuple[int, int | None] | None = None,
            colorings: list[dict[int, int] | None] | None = None,
            rival=None, rival_tried: bool = False) -> bool:
    """Recolor ``coloring`` in place when that lowers the register count; returns whether it
    did. Three program-order greedy colorings are tried (:func:`greedy_colorings`, or the
    ``colorings`` the caller already made of ``p``) and the one using fewest registers wins.
    If that is still above ``lower_bound`` (MaxLive), the squeaky wheel (:func:`squeaky_wheel`,
    cheap) tries the lower bound, then one register fewer, and a bounded backtracking search
    over the same program order tries each register count from the lower bound up.
    ``coloring.optimal`` records whether the final count is proven minimal for this
    interference graph: it equals a clique's registers (:func:`clique_registers`), or the
    search showed every smaller count impossible (alignment can make MaxLive unreachable).
    Reaching MaxLive alone proves nothing for the graph: values a copy joins need not
    interfere, so a coloring can use fewer. ``penalty(start)`` (the number of values a
    coloring must save around calls) may not grow. With ``to_beat`` =
    (registers, penalty) the coloring is built afresh and kept only if it beats those figures.

    ``rival()``, when given, is a register count the caller reaches anyway with another
    coloring that wins unless this one does at least as well: when a clique of ``p`` needs
    more registers than that (and than ``lower_bound``), no coloring of ``p`` can be kept,
    and the search is not run. With ``rival_tried`` the caller also promises to try that
    other coloring whenever this one ends above ``lower_bound``: then, when a clique says so
    before anything is colored, nothing is (``coloring`` is left as it is, not proven)."""
    if coloring.spilled:
        return False
    if to_beat is None:
        best = high_water(p, coloring.start)
        limit = penalty(coloring.start) if penalty is not None else None
    else:
        best, limit = to_beat

    def acceptable(start: dict[int, int]) -> bool:
        return limit is None or penalty is None or penalty(start) <= limit
    clique = clique_registers(p)
    count = None
    if rival is not None and rival_tried and clique > lower_bound:
        count = rival()
        if count is not None and clique > count:
            # every coloring of ``p`` needs ``clique`` registers, above the lower bound (so
            # the caller tries the rival) and above the rival's count (so the rival wins):
            # none is made (renderer.ptx: 62 of its 110 coalesced graphs)
            coloring.optimal = False
            return False
    found = None
    for start in colorings if colorings is not None else greedy_colorings(p):
        if start is not None:
            hw = high_water(p, start)
            if hw < best and acceptable(start):
                best, found = hw, start
    if best > lower_bound:
        # the cheap squeaky wheel first: at the lower bound, else one register fewer; never
        # below a clique's registers (no coloring there: a third of its failures, measured)
        # nor at a count two tight tuples rule out (then ``clique`` is one more: a proven
        # bound all the same)
        floor = max(lower_bound, clique, 1)
        if floor < best and tight_tuples_rule_out(p, floor):
            clique = floor = floor + 1
        for target in dict.fromkeys((floor, best - 1)):
            if floor <= target < best:
                start = squeaky_wheel(p, target)
                if start is not None and acceptable(start) and high_water(p, start) < best:
                    best, found = high_water(p, start), start
                    break
    # MaxLive bounds the registers of the code's live values, not of this graph's colorings: a
    # copy's source and destination live at once hold one value and need not interfere, so a
    # coloring may use fewer (30 against MaxLive 31 on particleSystem's
    # RadixAddOffsetsAndShuffle). Only a clique, or the search, proves a count minimal.
    proven = best <= clique
    nodes = sum(1 for n in p.members if n not in p.precolored)
    if not proven and nodes <= SEARCH_MAX_NODES:
        if rival is not None and count is None:
            count = rival()
        hopeless = count is not None and clique > max(count, lower_bound)
        if not hopeless:
            order = _graph(p).order
            # one register fewer at a time: no coloring below L means none below any L' < L
            while best > max(lower_bound, clique, 1):
                start = _remembered_search(p, order, 2 * (best - 1), search_steps(len(order)))
                if start is None or (start is not False and not acceptable(start)):
                    break                          # gave up: smaller counts not ruled out
                if start is False:
                    proven = True
                    break
                hw = high_water(p, start)
                if hw >= best:
                    break                          # no progress (precolored nodes sit higher)
                best, found = hw, start
            proven = proven or best <= clique
    elif (not proven and penalty is None and not p.merges and nodes <= LARGE_SEARCH_MAX_NODES
          and best == max(lower_bound, clique, 1) + 1):
        # a large graph of a leaf function one register above its bound: one DSATUR descent
        # at the bound, with room for a little backtracking (bisect_large's 918-node graph:
        # 46 -> 45 in ~1,500 steps, where the search's fixed amount of work allows 326, fewer
        # than its nodes). Not under the calling convention, whose fixed and callee-saved
        # registers, not the coloring, hold those functions above MaxLive (renderer.ptx: 50
        # descents, none found a coloring, +1.3 s CPU)
        order = _graph(p).order
        start = _deep_search(p, order, 2 * (best - 1), LARGE_SEARCH_STEPS_PER_NODE * nodes)
        if start is False:
            proven = True               # every placement searched: no coloring at best - 1
        elif type(start) is dict and acceptable(start) and high_water(p, start) < best:
            best, found = high_water(p, start), start
            proven = best <= clique
    coloring.optimal = proven
    if found is None:
        return False
    coloring.start = found
    return True
