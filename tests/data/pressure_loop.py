#!/usr/bin/env python3
"""Hand-written PTX for the register-limit tests (tests/unit/test_budget_rule.py): N float
values loaded, then updated from their neighbours in a loop (every value live at every point of
the loop body), then stored. With N = 240 ptxas (CUDA 13.0) needs 246 registers for it
unconstrained on sm_80 and sm_90 — more than every limit a directive or -maxrregcount imposes in
the tests, so ptxas's "Used N registers" shows its limit. Kept as a generator, not a .ptx file,
so the tests that allocate every tests/data PTX at tiny budgets do not take it up.
Usage: python3 tests/data/pressure_loop.py [N] [TARGET] [DIRECTIVES] > kernel.ptx"""

import sys


def pressure_kernel(n: int = 240, target: str = "sm_80", directives: str = "") -> str:
    lines = [".version 8.0", f".target {target}", ".address_size 64", "",
             f"// {n} float values live across a loop that updates each from its neighbours",
             ".visible .entry pressure(.param .u64 pressure_in, .param .u64 pressure_out, "
             ".param .u32 pressure_n)" + (f" {directives}" if directives else ""), "{",
             f"\t.reg .f32 %f<{n}>;", "\t.reg .b64 %rd<3>;", "\t.reg .b32 %r<3>;",
             "\t.reg .pred %p<2>;",
             "\tld.param.u64 %rd0, [pressure_in];", "\tld.param.u64 %rd1, [pressure_out];",
             "\tld.param.u32 %r0, [pressure_n];", "\tmov.u32 %r1, 0;"]
    lines += [f"\tld.global.f32 %f{i}, [%rd0+{4 * i}];" for i in range(n)]
    lines.append("$L_loop:")
    lines += [f"\tfma.rn.f32 %f{i}, %f{i}, %f{(i + 1) % n}, %f{(i + 7) % n};" for i in range(n)]
    lines += ["\tadd.u32 %r1, %r1, 1;", "\tsetp.lt.u32 %p0, %r1, %r0;", "\t@%p0 bra $L_loop;"]
    lines += [f"\tst.global.f32 [%rd1+{4 * i}], %f{i};" for i in range(n)]
    lines += ["\tret;", "}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    a = sys.argv[1:]
    sys.stdout.write(pressure_kernel(int(a[0]) if a else 240, a[1] if len(a) > 1 else "sm_80",
                                     " ".join(a[2:])))
