"""Spilling to shared memory against local memory (issue 17), and against ptxas's own
``.pragma "enable_smem_spilling"`` (PTX ISA 9.0, CUDA 13).

For every kernel of the sampled corpus files that the calling convention leaves alone (no
``.func``, no call) and that spills at budget K, ptxalloc allocates it twice — ``--spill-to
local`` and ``--spill-to shared`` — both proven by the checker, at the launch bound's block size
or ``--block-size`` (default 256) for a kernel without one. Per kernel: the local frame, the
shared area (frame x threads), registers, and the occupancy of each (the shared one counting the
area: ``target/occupancy.py``). ptxas gets the original kernel with ``.maxnreg K`` (and
``.maxntid B`` where it has no launch bound), once as is and once with the pragma (the file's
``.version`` raised to 9.0 where lower); its smem growth is the shared memory it spills to, and
its stack frame what it still spills locally.

    PYTHONPATH=src python3 bench/shared_spill.py [--files N] [--budgets 32] [--block-size 256]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys

from common import corpus_root, manifest


def sample(files: list[dict], n: int) -> list[dict]:
    """N files evenly spread over the MANIFEST order (all when n is 0)."""
    if not n or n >= len(files):
        return files
    step = len(files) / n
    return [files[int(i * step)] for i in range(n)]


def with_directives(text: str, names: dict[str, list[str]], pragma: bool, arch: str) -> str:
    """``text`` with each named kernel given its directives (before its body's ``{``) and,
    with ``pragma``, ``.pragma "enable_smem_spilling";`` first in its body; the ``.target``
    made ``arch`` and ``.version`` raised to 9.0 (the pragma needs both; both variants
    alike)."""
    text = re.sub(r"\.target\s+sm_\d+[af]?", f".target {arch}", text, count=1)
    for name, directives in names.items():
        m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\(", text)
        if m is None:
            continue
        close = text.index(")", m.end())
        brace = text.index("{", close)
        body = '\n.pragma "enable_smem_spilling";\n' if pragma else "\n"
        text = text[:brace] + "\n".join(directives) + "\n{" + body + text[brace + 1:]
    text = re.sub(r"\.version\s+(\d+)\.(\d+)",
                  lambda v: v.group(0) if (int(v.group(1)), int(v.group(2))) >= (9, 0)
                  else ".version 9.0", text, count=1)
    return text


def measure_file(path: str, budgets: list[int], block_default: int) -> list[dict]:
    from ptxalloc import ptxas
    from ptxalloc.alloc.convention import applies
    from ptxalloc.alloc.driver import Options
    from ptxalloc.errors import PtxallocError
    from ptxalloc.pipeline import allocate_module
    from ptxalloc.ptx import parse_file
    from ptxalloc.target.occupancy import launch_threads, occupancy
    from ptxalloc.target.sm import profile_for_module

    module = parse_file(path)
    text = open(path).read()
    arch = ptxas.arch_for(module.target[0] if module.target else None)
    rows = []
    for k in budgets:
        kernels: dict[str, list[str]] = {}
        for fn in module.functions:
            if fn.kind != "entry" or applies(fn) or "maxnreg" in fn.directives:
                continue
            bound = launch_threads(fn.directives)
            block = bound[1] if bound else block_default
            try:
                local = allocate_module(module, k, function=fn.name).functions[0]
            except PtxallocError:
                continue
            if not local.stack_frame_bytes:
                continue
            row = {"file": path, "function": fn.name, "k": k, "block": block,
                   "local_frame": local.stack_frame_bytes, "local_registers": local.registers,
                   "local_occupancy": local.extra["occupancy"]["occupancy"]}
            try:
                shared = allocate_module(module, k, function=fn.name, options=Options(
                    spill_to="shared", block_size=None if bound else block)).functions[0]
                area = shared.extra["shared_spill"]
                # the local allocation's occupancy with the kernel's own static .shared, as the
                # shared one counts it (the pipeline's figure for a local allocation has none)
                row["local_occupancy"] = occupancy(profile_for_module(None, module),
                                                   local.registers, block,
                                                   area.get("own_bytes", 0)).fraction
                row.update(shared_bytes=area["bytes"], shared_registers=shared.registers,
                           shared_occupancy=shared.extra["occupancy"]["occupancy"],
                           verified=shared.verified and local.verified)
            except PtxallocError as e:
                row["refused"] = str(e)
            kernels[fn.name] = [f".maxnreg {k}"] + ([] if bound else [f".maxntid {block}"])
            rows.append(row)
        if not kernels:
            continue
        plain = ptxas.assemble(with_directives(text, kernels, False, arch), arch)
        prag = ptxas.assemble(with_directives(text, kernels, True, arch), arch)
        for row in rows:
            if row["k"] != k:
                continue
            a = plain.functions.get(row["function"]) if plain.ok else None
            b = prag.functions.get(row["function"]) if prag.ok else None
            if a and b:
                row.update(ptxas_stack=a.stack, ptxas_pragma_stack=b.stack,
                           ptxas_pragma_smem=b.smem - a.smem,
                           ptxas_registers=a.registers, ptxas_pragma_registers=b.registers)
            else:
                row["ptxas_failed"] = (plain.output if not plain.ok else prag.output)[-300:]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=40, help="sample N corpus files (0: all)")
    ap.add_argument("--budgets", default="32", help="comma-separated K (default 32)")
    ap.add_argument("--block-size", type=int, default=256,
                    help="threads per block of a kernel without launch bounds (default 256)")
    a = ap.parse_args()
    root = corpus_root()
    files = sample([f for f in manifest() if f["ptxas"]["ok"]], a.files)
    budgets = [int(b) for b in a.budgets.split(",")]
    rows = []
    for f in files:
        try:
            rows += measure_file(str(root / f["path"]), budgets, a.block_size)
        except Exception as e:          # a file the front end refuses: counted, not fatal
            print(f"  {f['path']}: {type(e).__name__}: {e}", file=sys.stderr)
    for k in budgets:
        rs = [r for r in rows if r["k"] == k]
        ok = [r for r in rs if "shared_bytes" in r]
        refused = [r for r in rs if "refused" in r]
        print(f"K={k}: {len(files)} files, {len(rs)} kernels spilling to local memory; "
              f"{len(ok)} spilled to shared (all proven: {all(r['verified'] for r in ok)}), "
              f"{len(refused)} refused (area over 48 KB)")
        if not ok:
            continue
        mean = statistics.mean
        print(f"  ptxalloc local:  frame {sum(r['local_frame'] for r in ok)} bytes per thread "
              f"in all, registers mean {mean(r['local_registers'] for r in ok):.1f}, occupancy "
              f"mean {100 * mean(r['local_occupancy'] for r in ok):.1f} %")
        print(f"  ptxalloc shared: {sum(r['shared_bytes'] for r in ok)} bytes of shared memory "
              f"in all (median {statistics.median(r['shared_bytes'] for r in ok):.0f} per "
              f"kernel), registers mean {mean(r['shared_registers'] for r in ok):.1f}, "
              f"occupancy mean {100 * mean(r['shared_occupancy'] for r in ok):.1f} %; "
              f"occupancy lower on {sum(r['shared_occupancy'] < r['local_occupancy'] for r in ok)}"
              f" kernels")
        px = [r for r in ok if "ptxas_pragma_smem" in r]
        honoured = [r for r in px if r["ptxas_pragma_smem"] > 0]
        print(f"  ptxas (-maxnreg {k}): {len(px)} kernels compiled both ways; the pragma moved "
              f"spills to shared memory on {len(honoured)}: smem "
              f"{sum(r['ptxas_pragma_smem'] for r in px)} bytes in all, stack "
              f"{sum(r['ptxas_stack'] for r in px)} -> {sum(r['ptxas_pragma_stack'] for r in px)}"
              f" bytes per thread; ptxas failed on {sum('ptxas_failed' in r for r in ok)}")
        for r in ok:
            print(f"    {r['file'].split('corpus/')[-1]} {r['function'][:40]}: block {r['block']}, "
                  f"local {r['local_frame']} B/thread {r['local_registers']} regs "
                  f"{100 * r['local_occupancy']:.1f} %; shared {r['shared_bytes']} B "
                  f"{r['shared_registers']} regs {100 * r['shared_occupancy']:.1f} %; ptxas "
                  f"pragma smem {r.get('ptxas_pragma_smem', '?')} B, stack "
                  f"{r.get('ptxas_stack', '?')} -> {r.get('ptxas_pragma_stack', '?')}")


if __name__ == "__main__":
    main()
