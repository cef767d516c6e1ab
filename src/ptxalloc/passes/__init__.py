"""Transformations of a function before (and around) allocation, each switchable and each
proven by a validator of its own:

* :mod:`.schedule` — register-pressure-aware list scheduling within blocks (seed 002
  "Instruction Scheduling Interaction"; Options ``schedule`` / ``--knob schedule=1``), validated
  by :mod:`ptxalloc.verify.schedule`.
"""
