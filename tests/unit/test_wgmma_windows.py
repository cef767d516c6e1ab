"""Property tests of the in-flight windows (spill/windows.py) and of the whole chain on
generated sm_90a kernels: wgmma groups on two 16-register accumulators, committed, waited for
at once or later, with scalar code reading the accumulators in between, allocated under
budgets where they must be serialized and spilled around their windows."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from ptxalloc.analysis.in_flight import WGMMA_WAIT, in_flight, retires
from ptxalloc.errors import AllocationError
from ptxalloc.ir.cfg import CFG
from ptxalloc.pipeline import allocate_module
from ptxalloc.ptx import parse
from ptxalloc.spill.windows import find_windows
from ptxalloc.util import bits
from conftest import assert_verified

ACC = ["{" + ",".join(f"%f{16 * a + i}" for i in range(16)) + "}" for a in (0, 1)]

# one group: (whether it has its own fence, the accumulators of its wgmma, wait right after)
GROUP = st.tuples(st.booleans(), st.lists(st.sampled_from([0, 1]), min_size=1, max_size=3),
                  st.booleans())
PROGRAM = st.lists(st.tuples(GROUP, st.integers(0, 3)), min_size=1, max_size=4)


def kernel(program) -> str:
    """PTX for ``program``: per group a fence (or none), its wgmma, a commit, a wait 0 when
    asked; then ``n`` adds that read the accumulators (after a wait 0 of their own)."""
    body = ["\tld.param.u64 \t%rd1, [k_param_0];", "\tcvta.to.global.u64 \t%rd1, %rd1;",
            "\tsetp.ne.u64 \t%p1, %rd1, 0;"]
    body += [f"\tld.global.f32 \t%f{i}, [%rd1+{4 * i}];" for i in range(32)]
    body += [f"\tld.global.b32 \t%r{i}, [%rd1+{128 + 4 * i}];" for i in range(4)]
    for (fenced, accs, wait), reads in program:
        body.append("\tadd.s64 \t%rd2, %rd1, 256;")
        if fenced:
            body.append("\twgmma.fence.sync.aligned;")
        for a in accs:
            body.append(f"\twgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {ACC[a]}, "
                        "{%r0,%r1,%r2,%r3}, %rd2, %p1, 1, 1, 0;")
        body.append("\twgmma.commit_group.sync.aligned;")
        if wait:
            body.append("\twgmma.wait_group.sync.aligned 0;")
        if reads:
            body.append("\twgmma.wait_group.sync.aligned 0;")
            for i in range(reads):
                body.append(f"\tadd.f32 \t%f{32 + i}, %f{i}, %f{16 + i};")
                body.append(f"\tst.global.f32 \t[%rd1+{4 * i}], %f{32 + i};")
    body.append("\twgmma.wait_group.sync.aligned 0;")
    body += [f"\tst.global.f32 \t[%rd1+{4 * i}], %f{i};" for i in range(32)]
    return "\n".join([
        ".version 8.0", ".target sm_90a", ".address_size 64", "",
        ".visible .entry k(.param .u64 k_param_0)", "{",
        "\t.reg .pred \t%p<2>;", "\t.reg .b32 \t%r<4>;", "\t.reg .f32 \t%f<36>;",
        "\t.reg .b64 \t%rd<3>;", *body, "\tret;", "}", ""])


@settings(max_examples=60, deadline=None)
@given(PROGRAM)
def test_every_register_in_flight_is_in_a_window_or_unspillable(program):
    fn = parse(kernel(program), "k.ptx").functions[0]
    cfg = CFG(fn)
    windows, unclean = find_windows(fn, cfg)
    _, before = in_flight(fn, cfg)
    instrs = cfg.instrs
    for v, ws in windows.items():
        assert v not in unclean
        spans = sorted((w.fence, w.wait) for w in ws)
        for (lo, hi), (lo2, _) in zip(spans, spans[1:]):
            assert hi < lo2                                     # windows do not overlap
        for w in ws:
            assert instrs[w.fence].opcode.startswith("wgmma.fence")
            assert retires(instrs[w.wait]) == WGMMA_WAIT
            assert not before[w.fence] >> v & 1                 # not in flight at its fence
    for i, mask in enumerate(before):
        for v in bits(mask):
            assert v in unclean or any(w.fence < i <= w.wait for w in windows[v])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PROGRAM, st.sampled_from([32, 36, 40, 48]))
def test_generated_kernels_are_proven_or_refused(program, k):
    """Whatever the groups, waits and budget: the allocation is proven through the whole
    chain (serialization, spilling around windows, the fence rule), or refused with an
    AllocationError — never a failed proof."""
    module = parse(kernel(program), "k.ptx")
    try:
        res = allocate_module(module, k, verify=True)
    except AllocationError:
        return
    assert_verified(res)
    assert all(f.registers <= k for f in res.functions)
