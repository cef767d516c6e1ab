"""SM profiles (seed 000 "SM-Specific Register Constraints", seed 002 "SM-Specific Latencies";
the occupancy figures are the hardware's, not seed 001's).

Each profile gives the registers one thread may use (255), the occupancy figures of the real
hardware, the memory latencies the spill cost uses (the seeds'), and the tensor-core alignment
rules (in 32-bit registers).

The occupancy figures are those of NVIDIA's CUDA C++ Programming Guide, table "Technical
Specifications per Compute Capability", and of the CUDA Occupancy Calculator
(``cuda_occupancy.h`` of CUDA 13.0: ``cudaOccRegAllocationGranularity`` = 256 registers per
warp, ``cudaOccSubPartitionsPerMultiprocessor`` = 4 warp-allocation sub-partitions):

======  ============  =========  ==========  ==================
target  regs per SM   max warps  max blocks  shared memory / SM
======  ============  =========  ==========  ==================
sm_70   65536         64         32          96 KB
sm_75   65536         32         16          64 KB
sm_80   65536         64         32          164 KB
sm_86   65536         48         16          100 KB
sm_89   65536         48         24          100 KB
sm_90   65536         64         32          228 KB
sm_100  65536         64         32          228 KB
sm_120  65536         48         32          128 KB
======  ============  =========  ==========  ==================

The seeds' register-file sizes (131072 from sm_90) are not used: docs/decisions.md.
A ``.target`` this model does not know is a named warning on stderr, never a silent fallback.
"""

from __future__ import annotations

import sys

from ..errors import UsageError
from ..records import record

REG_ALLOC_UNIT = 256        # registers per warp in one allocation (8 per thread)
SUB_PARTITIONS = 4          # warps are given registers per sub-partition (warp granularity 4)
MAX_REGS_PER_THREAD = 255


@record(frozen=True)
class SMProfile:
    name: str
    regs_per_sm: int             # 32-bit registers per SM (65536 on every target here)
    max_warps: int               # resident warps per SM
    max_blocks: int              # resident blocks per SM
    shared_kb: int               # shared memory per SM, KB
    latency_l1: float
    latency_l2: float
    latency_l3: float            # "L3/main" column of seed 002's latency table
    l1_bytes: int = 64 * 1024
    l2_bytes: int = 256 * 1024
    wgmma: bool = False          # warpgroup.mma (8-register fragments)
    tcgen05: bool = False

    regs_per_thread: int = MAX_REGS_PER_THREAD       # R0..R254

    @property
    def max_threads(self) -> int:
        """Resident threads per SM."""
        return 32 * self.max_warps

    @property
    def sm(self) -> int:
        return int(self.name[3:].rstrip("a").rstrip("f"))


PROFILES: dict[str, SMProfile] = {
    "sm_70": SMProfile("sm_70", 65536, 64, 32, 96, 4.0, 10.0, 100.0),
    "sm_75": SMProfile("sm_75", 65536, 32, 16, 64, 4.0, 10.0, 100.0),
    "sm_80": SMProfile("sm_80", 65536, 64, 32, 164, 4.0, 10.0, 100.0),
    "sm_86": SMProfile("sm_86", 65536, 48, 16, 100, 4.0, 10.0, 100.0),
    "sm_89": SMProfile("sm_89", 65536, 48, 24, 100, 4.0, 10.0, 100.0),
    "sm_90": SMProfile("sm_90", 65536, 64, 32, 228, 4.0, 10.0, 40.0, wgmma=True),
    "sm_100": SMProfile("sm_100", 65536, 64, 32, 228, 4.0, 10.0, 40.0, wgmma=True,
                        tcgen05=True),
    "sm_120": SMProfile("sm_120", 65536, 48, 32, 128, 4.0, 10.0, 40.0, wgmma=True,
                        tcgen05=True),
}

# every real ``sm_XX`` PTX target (PTX ISA "Target ISA notes"), mapped to the nearest profile at
# or below it; ``a``/``f`` suffixes are accepted
KNOWN_SM = (10, 11, 12, 13, 20, 21, 30, 32, 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90,
            100, 101, 103, 110, 120, 121)
TARGET_OPTIONS = ("texmode_unified", "texmode_independent", "debug", "map_f64_to_f32")

DEFAULT = "sm_90"


def profile_for(arch: str | None, module_target: str | None = None,
                filename: str | None = None) -> SMProfile:
    """The profile for ``--arch`` (one of the eight above, or any real ``sm_XX[a|f]``: sm_90a
    is sm_90), else for the module's ``.target``, mapped to the nearest profile at or below it (sm_10 ... sm_61 to sm_70, sm_90a to sm_90,
    sm_101 to sm_100). A target that is no real ``sm_XX`` (``sm_1000``, ``compute_90``, garbage)
    gets sm_90 and a warning on stderr naming the file."""
    if arch is not None:
        if arch in PROFILES:
            return PROFILES[arch]
        num = _sm_number(arch)
        if num is None:
            raise UsageError(f"unknown architecture '{arch}' (known: {', '.join(PROFILES)}, "
                             f"with an 'a' or 'f' suffix or any real sm_XX)")
        return _nearest(num)
    if not module_target:
        return PROFILES[DEFAULT]
    num = _sm_number(module_target)
    if num is None:
        print(f"{filename or '<input>'}: warning: unknown .target '{module_target}'; using "
              f"{DEFAULT}", file=sys.stderr)
        return PROFILES[DEFAULT]
    return _nearest(num)


def _nearest(num: int) -> SMProfile:
    """The profile at or below the real target ``sm_<num>`` (sm_70 below sm_70)."""
    best = "sm_70"
    for key, prof in PROFILES.items():
        if prof.sm <= num:
            best = key
    return PROFILES[best]


def arch_of_target(targets: list[str]) -> str | None:
    """The architecture of a ``.target`` list: its first entry that is not a target option."""
    for t in targets:
        if t not in TARGET_OPTIONS:
            return t
    return None


def profile_for_module(arch: str | None, module) -> SMProfile:
    """:func:`profile_for` for a parsed module (its ``.target`` and file name)."""
    return profile_for(arch, arch_of_target(module.target), module.filename)


def _sm_number(target: str) -> int | None:
    """The number of a real ``sm_XX[a|f]`` target, None for anything else."""
    if not target.startswith("sm_"):
        return None
    digits = target[3:]
    if digits[-1:] in ("a", "f"):
        digits = digits[:-1]
    if not digits.isdigit() or int(digits) not in KNOWN_SM:
        return None
    return int(digits)
