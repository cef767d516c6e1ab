"""Register allocation: from virtual registers to the GPU's register file under a budget.

This package places every virtual register of a PTX function in a physical register, or
spills it to local memory, so that the function uses at most K registers (SPEC sections 2-8).
It holds the allocators, what they share, and the driver that runs them in rounds.

Concepts
--------

virtual register
    A ``.reg`` of the input PTX (``%r5``, ``%rd2``, ``%p1``). Unlimited in number; each has a
    class (16-, 32-, 64-, 128-bit or predicate) and an id.

register unit
    The general register file is counted in 16-bit units: units 2i and 2i+1 are the halves of
    the 32-bit register Ri, so that 16-bit halves, 32-bit registers, 64-bit pairs and quads
    alias by sharing units (:mod:`ptxalloc.target.units`). Predicates are a file of their own
    (P0-P6). :class:`~ptxalloc.alloc.matrix.UnitMatrix` records which node holds which units
    (LLVM's ``LiveRegMatrix``).

shape
    How many consecutive units a value takes and how its start is aligned: a 64-bit pair takes
    four units starting at a multiple of four. ``Shape.mask(start)`` is the units of one
    *placement*; ``RegFile.placements(shape)`` lists all placements within the budget.

node
    What an allocator places: one virtual register, a register tuple (the members of an
    ``ld.v4`` or an ``mma`` fragment, each at a fixed offset), or registers merged by
    coalescing. :class:`~ptxalloc.alloc.api.Problem` keeps nodes as a union-find over register
    ids.

interference
    Two values interfere when one is live where the other is defined; interfering nodes may
    not share a unit. Degrees are weighted by how many placements a neighbour can block
    (Smith, Ramsey and Holloway, PLDI 2004), so that mixed widths color safely.

coalescing
    Merging the two ends of a copy into one node, so that the copy disappears
    (:mod:`coalesce`: Briggs's and George's conservative tests, seed 002). Each allocator says
    whether it wants it (``Allocator.coalesces``).

simplify / select
    Chaitin-Briggs coloring (:mod:`briggs`): *simplify* removes nodes of low degree onto a
    stack (and, optimistically, spill candidates too); *select* pops them and gives each the
    lowest free placement. A node that finds none is spilled.

spill
    A value kept in local memory: stored after each definition, reloaded before each use
    (:mod:`ptxalloc.spill`), after which the driver analyses the function again and runs another
    round. Spill temporaries, and values the hardware requires in registers, may not be spilled
    (``no_spill``; with the precolored and pinned registers, the driver's ``unspillable``).

precolored
    A node whose placement is fixed before allocation — the calling convention's argument
    and result registers (:mod:`convention`), or a spill temporary the driver fixed to a
    placement after it got stuck (:func:`driver._relieve`). Allocators never move or evict it.
    Not the same as *pinned*: a pinned register (a ``.reg`` parameter) is left out of
    allocation altogether.

The allocators
--------------

``briggs`` (:mod:`briggs`)
    CICC's allocator: conservative coalescing, then simplify/freeze/spill/select with the
    seeds' worklists and priorities (seeds 000-002).
``fatpoint`` (:mod:`fatpoint`, :mod:`fatpoint_order`, :mod:`fatpoint_guidance`)
    ptxas's allocator: a six-list ordering, per-slot interference histograms, a NOSPILL attempt
    then SPILL retries guided by register pressure (seed 004).
``linear`` (:mod:`linear`)
    Linear scan over live intervals (Poletto and Sarkar, TOPLAS 1999), a baseline.

All three implement :class:`~ptxalloc.alloc.api.Allocator` and are listed by the registry of
:mod:`api`; :mod:`driver` runs the rounds (legalize tuples, bind the convention, analyse,
coalesce, color, spill) and :mod:`compact` lowers the register count of the final coloring.
:mod:`output` writes physical-register PTX.

Sources: the seeds in ``/work/shared/seeds/`` (index ``README.md``) read through
``SPEC.md``; G. J. Chaitin, "Register allocation and spilling via graph coloring" (1982);
P. Briggs, K. Cooper and L. Torczon, "Improvements to graph coloring register allocation"
(TOPLAS 1994); L. George and A. Appel, "Iterated register coalescing" (TOPLAS 1996);
M. Smith, N. Ramsey and G. Holloway, "A generalized algorithm for graph-coloring register
allocation" (PLDI 2004); M. Poletto and V. Sarkar, "Linear scan register allocation"
(TOPLAS 1999).
"""
