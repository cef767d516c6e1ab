"""Occupancy: how many blocks and warps of a kernel one SM holds at a register count, as NVIDIA's
CUDA Occupancy Calculator computes it (``cuda_occupancy.h`` of CUDA 13.0,
``cudaOccMaxBlocksPerSMRegsLimit``), with the per-target figures of :mod:`sm`. Replaces seed
001's "Occupancy Impact" formula, which has no block limit and no allocation granularity
(docs/decisions.md).

    warps per block      = ceil(block / 32)
    registers per warp   = registers x 32 rounded up to 256 (8 per thread)
    warps by registers   = (registers per SM / 4 // registers per warp) x 4   (4 sub-partitions)
    blocks per SM        = min(warps by registers // warps per block,
                               max warps // warps per block, max blocks)
    occupancy            = blocks x warps per block / max warps

More than 255 registers per thread cannot launch at all: no occupancy, the function must spill.
Registers are counted as ptxas reports them ("Used N registers").

Shared memory limits blocks too when a block declares some (``shared`` bytes: ptxalloc knows
only the shared-memory spill area it adds, ``--spill-to shared``), as the calculator's
``cudaOccMaxBlocksPerSMSmemLimit`` counts it at the largest carveout (the profile's shared
memory per SM): each block takes its bytes plus the driver's reservation
(``reservedSharedMemPerBlock``: 1 KB from sm_80, none before) rounded up to the allocation
granularity (``cudaOccSMemAllocationGranularity``: 256 bytes on sm_7x, 128 from sm_80)::

    blocks by shared memory = shared per SM // roundup(shared + reserved, granularity)
"""

from __future__ import annotations

import math

from ..records import record
from .sm import MAX_REGS_PER_THREAD, REG_ALLOC_UNIT, SUB_PARTITIONS, SMProfile

DEFAULT_BLOCK = 256
MUST_SPILL = "exceeds 255: must spill"


@record(frozen=True)
class Occupancy:
    registers: int
    block: int
    blocks_per_sm: int
    warps_per_sm: int
    fraction: float
    limiter: str            # registers / warps / blocks / shared memory

    @property
    def must_spill(self) -> bool:
        return self.registers > MAX_REGS_PER_THREAD

    def as_dict(self) -> dict:
        row = {"registers": self.registers, "block_size": self.block,
               "blocks_per_sm": self.blocks_per_sm, "warps_per_sm": self.warps_per_sm,
               "occupancy": None if self.must_spill else round(self.fraction, 4),
               "limiter": self.limiter}
        if self.must_spill:
            row["note"] = MUST_SPILL
        return row


def warps_by_registers(sm: SMProfile, registers: int) -> int:
    """Warps one SM's register file holds at ``registers`` per thread (0 above 255)."""
    if registers > sm.regs_per_thread:
        return 0
    per_warp = math.ceil(max(registers, 1) * 32 / REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    return (sm.regs_per_sm // SUB_PARTITIONS // per_warp) * SUB_PARTITIONS


def shared_per_block(sm: SMProfile, shared: int) -> int:
    """The shared memory one block takes from the SM for ``shared`` bytes of its own (module
    docstring: the driver's reservation, the allocation granularity)."""
    reserved, granularity = (1024, 128) if sm.sm >= 80 else (0, 256)
    return -(-(shared + reserved) // granularity) * granularity


def occupancy(sm: SMProfile, registers: int, block: int = DEFAULT_BLOCK,
              shared: int = 0) -> Occupancy:
    """The occupancy at ``registers`` per thread, ``block`` threads per block and ``shared``
    bytes of shared memory per block (0: not a limit; module docstring)."""
    warps_per_block = max(1, math.ceil(block / 32))
    if registers > sm.regs_per_thread:
        return Occupancy(registers, block, 0, 0, 0.0, "registers")
    limits = {"warps": sm.max_warps // warps_per_block, "blocks": sm.max_blocks,
              "registers": warps_by_registers(sm, registers) // warps_per_block}
    if shared > 0:
        limits["shared memory"] = sm.shared_kb * 1024 // shared_per_block(sm, shared)
    blocks = min(limits.values())
    limiter = next(k for k, v in limits.items() if v == blocks)    # ties: warps, blocks, regs
    warps = blocks * warps_per_block
    return Occupancy(registers, block, blocks, warps, warps / sm.max_warps, limiter)


def launch_threads(directives: dict) -> tuple[str, int] | None:
    """The launch bound that fixes the threads per block — ``reqntid`` before ``maxntid`` —
    and the product of its dimensions; None when the function declares neither."""
    for key in ("reqntid", "maxntid"):
        val = directives.get(key)
        if val:
            n = 1
            for d in (val if isinstance(val, list) else [val]):
                n *= max(1, int(d))
            return key, n
    return None


def block_size(directives: dict) -> int:
    """Threads per block from ``.reqntid``/``.maxntid`` (their product), else 256."""
    bound = launch_threads(directives)
    return DEFAULT_BLOCK if bound is None else bound[1]
