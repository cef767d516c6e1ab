"""Regenerate the Triton fused-attention PTX of this folder (no GPU needed).

    pip install triton==3.9.0        # or: pip install --target DIR triton; PYTHONPATH=DIR
    python3 tests/data/triton/generate.py [OUTDIR]

The kernels follow Triton's tutorial 06 (fused attention, Flash Attention v2): the forward pass
with tensor descriptors (``_attn_fwd_tma``, TMA loads, sm_90a ``wgmma``), the forward pass with
plain pointers (``_attn_fwd``) and the backward pass (``_attn_bwd``, dK/dV and dQ in one
program). Compiled for ``GPUTarget("cuda", 90, 128)`` (sm_90a), 8 warps for the forward, 4 for
the backward, as the tutorial's Hopper configurations.
"""

import os
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget


@triton.jit
def _attn_fwd_tma(sm_scale, M, Z, H, desc_q, desc_k, desc_v, desc_o, N_CTX,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    dtype = tl.float16
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    y_dim = Z * H * N_CTX
    desc_q = tl.make_tensor_descriptor(desc_q, shape=[y_dim, HEAD_DIM], strides=[HEAD_DIM, 1],
                                       block_shape=[BLOCK_M, HEAD_DIM])
    desc_k = tl.make_tensor_descriptor(desc_k, shape=[y_dim, HEAD_DIM], strides=[HEAD_DIM, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
    desc_v = tl.make_tensor_descriptor(desc_v, shape=[y_dim, HEAD_DIM], strides=[HEAD_DIM, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
    desc_o = tl.make_tensor_descriptor(desc_o, shape=[y_dim, HEAD_DIM], strides=[HEAD_DIM, 1],
                                       block_shape=[BLOCK_M, HEAD_DIM])
    offset_y = off_z * (N_CTX * H) + off_h * N_CTX
    qo_offset_y = offset_y + start_m * BLOCK_M
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = desc_q.load([qo_offset_y, 0])
    offsetk_y = offset_y
    offsetv_y = offset_y
    for start_n in tl.range(0, N_CTX, BLOCK_N):
        k = desc_k.load([offsetk_y, 0]).T
        qk = tl.dot(q, k)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = desc_v.load([offsetv_y, 0])
        acc = tl.dot(p.to(dtype), v, acc)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
        offsetk_y += BLOCK_N
        offsetv_y += BLOCK_N
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + off_hz * N_CTX + offs_m, m_i)
    desc_o.store([qo_offset_y, 0], acc.to(dtype))


@triton.jit
def _attn_bwd(Q, K, V, sm_scale, DO, DQ, DK, DV, M, D, stride_z, stride_h, stride_tok,
              stride_d, H, N_CTX, BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr,
              BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr, HEAD_DIM: tl.constexpr):
    LN2: tl.constexpr = 0.6931471824645996
    bhid = tl.program_id(2)
    off_chz = (bhid * N_CTX).to(tl.int64)
    adj = (stride_h * (bhid % H) + stride_z * (bhid // H)).to(tl.int64)
    pid = tl.program_id(0)
    Q += adj
    K += adj
    V += adj
    DO += adj
    DQ += adj
    DK += adj
    DV += adj
    M += off_chz
    D += off_chz
    offs_k = tl.arange(0, HEAD_DIM)
    # dK and dV for one block of keys
    start_n = pid * BLOCK_N1
    offs_n = start_n + tl.arange(0, BLOCK_N1)
    dv = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    dk = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    k = tl.load(K + offs_n[:, None] * stride_tok + offs_k[None, :] * stride_d)
    v = tl.load(V + offs_n[:, None] * stride_tok + offs_k[None, :] * stride_d)
    offs_m = tl.arange(0, BLOCK_M1)
    qT_ptrs = Q + offs_m[None, :] * stride_tok + offs_k[:, None] * stride_d
    do_ptrs = DO + offs_m[:, None] * stride_tok + offs_k[None, :] * stride_d
    curr_m = 0
    for blk_idx in range(N_CTX // BLOCK_M1):
        qT = tl.load(qT_ptrs)
        offs_m = curr_m + tl.arange(0, BLOCK_M1)
        m = tl.load(M + offs_m)
        qkT = tl.dot(k, qT)
        pT = tl.math.exp2(qkT - m[None, :])
        do = tl.load(do_ptrs)
        ppT = pT.to(tl.float16)
        dv += tl.dot(ppT, do)
        Di = tl.load(D + offs_m)
        dpT = tl.dot(v, tl.trans(do)).to(tl.float32)
        dsT = pT * (dpT - Di[None, :])
        dsT = dsT.to(tl.float16)
        dk += tl.dot(dsT, tl.trans(qT))
        curr_m += BLOCK_M1
        qT_ptrs += BLOCK_M1 * stride_tok
        do_ptrs += BLOCK_M1 * stride_tok
    dv_ptrs = DV + offs_n[:, None] * stride_tok + offs_k[None, :] * stride_d
    tl.store(dv_ptrs, dv)
    dk *= sm_scale
    dk_ptrs = DK + offs_n[:, None] * stride_tok + offs_k[None, :] * stride_d
    tl.store(dk_ptrs, dk)
    # dQ for one block of queries
    start_m = pid * BLOCK_M2
    offs_m = start_m + tl.arange(0, BLOCK_M2)
    q = tl.load(Q + offs_m[:, None] * stride_tok + offs_k[None, :] * stride_d)
    dq = tl.zeros([BLOCK_M2, HEAD_DIM], dtype=tl.float32)
    do = tl.load(DO + offs_m[:, None] * stride_tok + offs_k[None, :] * stride_d)
    m = tl.load(M + offs_m)[:, None]
    Di = tl.load(D + offs_m)
    offs_n = tl.arange(0, BLOCK_N2)
    kT_ptrs = K + offs_n[None, :] * stride_tok + offs_k[:, None] * stride_d
    vT_ptrs = V + offs_n[None, :] * stride_tok + offs_k[:, None] * stride_d
    for blk_idx in range(N_CTX // BLOCK_N2):
        kT = tl.load(kT_ptrs)
        vT = tl.load(vT_ptrs)
        qk = tl.dot(q, kT)
        p = tl.math.exp2(qk - m)
        dp = tl.dot(do, vT).to(tl.float32)
        ds = p * (dp - Di[:, None])
        ds = ds.to(tl.float16)
        dq += tl.dot(ds, tl.trans(kT))
        kT_ptrs += BLOCK_N2 * stride_tok
        vT_ptrs += BLOCK_N2 * stride_tok
    dq *= LN2
    tl.store(DQ + offs_m[:, None] * stride_tok + offs_k[None, :] * stride_d, dq)


TARGET = GPUTarget("cuda", 90, 128)


def _compile(fn, signature, constexprs, num_warps, num_stages):
    src = triton.compiler.ASTSource(fn, signature, constexprs)
    return triton.compile(src, target=TARGET,
                          options={"num_warps": num_warps, "num_stages": num_stages}).asm["ptx"]


def main(outdir: str) -> None:
    fwd_sig = {"sm_scale": "fp32", "M": "*fp32", "Z": "i32", "H": "i32", "desc_q": "*fp16",
               "desc_k": "*fp16", "desc_v": "*fp16", "desc_o": "*fp16", "N_CTX": "i32",
               "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
    bwd_sig = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "sm_scale": "fp32", "DO": "*fp16",
               "DQ": "*fp16", "DK": "*fp16", "DV": "*fp16", "M": "*fp32", "D": "*fp32",
               "stride_z": "i32", "stride_h": "i32", "stride_tok": "i32", "stride_d": "i32",
               "H": "i32", "N_CTX": "i32", "BLOCK_M1": "constexpr", "BLOCK_N1": "constexpr",
               "BLOCK_M2": "constexpr", "BLOCK_N2": "constexpr", "HEAD_DIM": "constexpr"}
    jobs = {
        "attn_fwd_tma_64x64_d64.ptx": (_attn_fwd_tma, fwd_sig,
                                       {"HEAD_DIM": 64, "BLOCK_M": 64, "BLOCK_N": 64}, 4, 3),
        "attn_fwd_tma_128x128_d128.ptx": (_attn_fwd_tma, fwd_sig,
                                          {"HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": 128},
                                          8, 3),
        "attn_bwd_d64.ptx": (_attn_bwd, bwd_sig,
                             {"BLOCK_M1": 32, "BLOCK_N1": 128, "BLOCK_M2": 128, "BLOCK_N2": 32,
                              "HEAD_DIM": 64}, 4, 3),
    }
    os.makedirs(outdir, exist_ok=True)
    only = set(sys.argv[2:])
    for name, (fn, sig, consts, warps, stages) in jobs.items():
        if only and name not in only:
            continue
        # Triton 3.9 writes PTX ISA 9.4; the machine's ptxas (CUDA 13.0) reads up to 9.0 and
        # nothing in these kernels needs more than 8.0 (sm_90a wgmma, TMA)
        ptx = _compile(fn, sig, consts, warps, stages).replace(".version 9.4\n",
                                                                ".version 8.7\n")
        with open(os.path.join(outdir, name), "w") as f:
            f.write(ptx)
        print(name, len(ptx))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
