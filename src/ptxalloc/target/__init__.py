"""The target model: what the allocators know of the GPU.

* :mod:`.units` — the register-unit model of the register file (SPEC section 2);
* :mod:`.sm` — SM profiles;
* :mod:`.abi` — the calling convention (seed 003; SPEC section 7);
* :mod:`.register_limit` — ptxas's default register limit (the CLI's default budget);
* :mod:`.budget` — the occupancy-aware budget, ``--registers auto`` (seed 004; SPEC section 6);
* :mod:`.occupancy` — blocks and warps per SM at a register count.
"""
