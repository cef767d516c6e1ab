"""SM profiles (seed 000 "SM-Specific Register Constraints", seed 001 "Occupancy Impact",
seed 002 "SM-Specific Latencies").

Each profile gives the register file size (in 32-bit registers per SM, as seed 001's occupancy
formula counts it: "64 KB" is 65536 registers for SM 70-89, and the seeds double it for SM 90+),
the registers one thread may use (255), the maximum threads per SM of seed 000's table, the
memory latencies the spill cost uses, and the tensor-core alignment rules (in 32-bit registers).

The seeds' figures are followed even where real hardware differs (an H100 has 65536 registers per
SM, not 131072; sm_75 allows 1024 threads per SM): the project models the seeds' allocators.
docs/decisions.md records this.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError


@dataclass(frozen=True)
class SMProfile:
    name: str
    regfile: int                 # 32-bit registers per SM
    regs_per_thread: int         # R0..R254
    max_threads: int             # per SM
    latency_l1: float
    latency_l2: float
    latency_l3: float            # "L3/main" column of seed 002's latency table
    l1_bytes: int = 64 * 1024
    l2_bytes: int = 256 * 1024
    wgmma: bool = False          # warpgroup.mma (8-register fragments)
    tcgen05: bool = False

    @property
    def sm(self) -> int:
        return int(self.name[3:].rstrip("a").rstrip("f"))


PROFILES: dict[str, SMProfile] = {
    "sm_70": SMProfile("sm_70", 65536, 255, 2048, 4.0, 10.0, 100.0),
    "sm_75": SMProfile("sm_75", 65536, 255, 1024, 4.0, 10.0, 100.0),
    "sm_80": SMProfile("sm_80", 65536, 255, 2048, 4.0, 10.0, 100.0),
    "sm_86": SMProfile("sm_86", 65536, 255, 1536, 4.0, 10.0, 100.0),
    "sm_89": SMProfile("sm_89", 65536, 255, 1536, 4.0, 10.0, 100.0),
    "sm_90": SMProfile("sm_90", 131072, 255, 2048, 4.0, 10.0, 40.0, wgmma=True),
    "sm_100": SMProfile("sm_100", 131072, 255, 2048, 4.0, 10.0, 40.0, wgmma=True,
                        tcgen05=True),
    "sm_120": SMProfile("sm_120", 131072, 255, 2048, 4.0, 10.0, 40.0, wgmma=True,
                        tcgen05=True),
}

DEFAULT = "sm_90"


def profile_for(arch: str | None, module_target: str | None = None) -> SMProfile:
    """The profile for ``--arch`` (one of the eight the seeds describe), else for the module's
    ``.target``, mapped to the nearest described architecture at or below it (sm_20 ... sm_61
    to sm_70, sm_90a to sm_90, sm_101 to sm_100)."""
    if arch is not None:
        if arch not in PROFILES:
            raise UsageError(f"unknown architecture '{arch}' (known: {', '.join(PROFILES)})")
        return PROFILES[arch]
    digits = "".join(ch for ch in (module_target or "")[3:] if ch.isdigit())
    if not (module_target or "").startswith("sm_") or not digits:
        return PROFILES[DEFAULT]
    num = int(digits)
    best = "sm_70"
    for key, prof in PROFILES.items():
        if prof.sm <= num:
            best = key
    return PROFILES[best]
