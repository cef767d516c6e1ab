"""Occupancy: what a register count costs in threads per SM (seed 001 "Occupancy Impact").

    blocks per SM = floor(register file / (registers per thread x threads per block))
    threads per SM = min(max threads per SM, blocks x threads per block)
    occupancy = threads per SM / max threads per SM

(Seed 001 labels the first quotient "max_threads_per_sm", but its worked example uses it as a
block count: 65536 / (32 x 256) = 8 blocks, 8 x 256 / 2048 = 100 %. The project follows the
example.) Registers are counted as ptxas reports them ("Used N registers").
"""

from __future__ import annotations

from dataclasses import dataclass

from .sm import SMProfile

DEFAULT_BLOCK = 256


@dataclass(frozen=True)
class Occupancy:
    registers: int
    block: int
    blocks_per_sm: int
    threads_per_sm: int
    fraction: float


def occupancy(sm: SMProfile, registers: int, block: int = DEFAULT_BLOCK) -> Occupancy:
    regs = max(1, registers)
    blocks = sm.regfile // (regs * block)
    threads = min(sm.max_threads, blocks * block)
    return Occupancy(registers, block, blocks, threads, threads / sm.max_threads)


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
