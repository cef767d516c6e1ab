"""IR pre-passes: PTX-to-PTX transformations of a function's IR run before allocation, in
pipeline order (:func:`ptxalloc.alloc.driver.allocate_function` calls them).

1. :mod:`legalize` — tuple legalization: fresh registers and copies for vector operands that
   cannot join a consistent tuple group (SPEC section 2).
2. :mod:`convention` — the calling convention's binding: arguments and results moved through
   precolored registers (seed 003; SPEC section 7).
3. :mod:`serialize_wgmma` — a ``wgmma.wait_group 0`` after each ``wgmma.commit_group`` when
   the ``wgmma`` registers in flight exceed the budget, and each ``wgmma.mma_async`` made a
   group of its own when one group alone does (PTX ISA 9.7.15.7.3; knob ``SerializeWgmma``);
   proven by the checker's ``//@serialize`` rules (docs/checker.md).
4. :mod:`asynchrony` — every instruction made to read the registers of asynchronous tensor
   instructions in flight before it (PTX ISA 9.7.15.7.3, 9.7.16.8).
5. :mod:`schedule` — register-pressure-aware list scheduling within blocks, on by default
   (seed 002 "Instruction Scheduling Interaction"; ``--knob schedule=0`` switches it off), run
   by :func:`ptxalloc.pipeline.pre_passes` last, after the recomputation, and validated by
   :mod:`ptxalloc.verify.schedule` (a dependence-respecting permutation).
6. :mod:`hoist` and :mod:`promote` — seed 004's HoistInvariants (loop invariants to the loop's
   preheader) and ConvertMemoryToRegisterOrUniform (``.local`` arrays accessed at constant
   offsets to registers), off by default (``--knob hoist=1``, ``--knob promote=1``), run by
   :func:`ptxalloc.pipeline.pre_passes` before the schedule, in that order, and validated by
   :mod:`ptxalloc.verify.hoist` and :mod:`ptxalloc.verify.promote`.
7. :mod:`induction` — loop-carried families of 64-bit pointers advanced by one stride rewritten
   as one counter plus each pointer's offset (issue 13; off by default, ``--knob induction=1``),
   run by :func:`ptxalloc.pipeline.pre_passes` after hoist and promote, right before
   recompute, kept when MaxLive after recompute falls, and validated by
   :mod:`ptxalloc.verify.induction`.
8. :mod:`recompute` — cheap values, addresses and predicates recomputed right before their uses
   (seed 002 "Rematerialization"; on by default, ``--knob recompute=0``), run by
   :func:`ptxalloc.pipeline.pre_passes` after them and before the schedule and proven by
   :mod:`ptxalloc.verify.recompute` (available expressions).
"""
