"""Regenerate the sm_80 Triton tutorial kernels of this folder (no GPU needed), for the quality
bench (bench/quality.py, issue 13).

    pip install triton==3.9.0
    python3 tests/data/triton/generate_sm80.py [OUTDIR]

Kernels, after Triton's tutorials: 01 vector add, 02 fused softmax, 03 matrix multiplication
(fp16 in, fp32 accumulate), 05 layer-norm forward, 06 fused attention forward (plain pointers,
Flash Attention v2). Compiled for ``GPUTarget("cuda", 80, 32)`` with 4 warps, small tiles so each
file stays small.
"""

import os
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step):
        row_ptr = in_ptr + row_idx * in_stride
        offs = tl.arange(0, BLOCK_SIZE)
        mask = offs < n_cols
        row = tl.load(row_ptr + offs, mask=mask, other=-float("inf"))
        row = row - tl.max(row, axis=0)
        num = tl.exp(row)
        out = num / tl.sum(num, axis=0)
        tl.store(out_ptr + row_idx * out_stride + offs, out, mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(tl.float16)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


@triton.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    mean = 0
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


@triton.jit
def attn_fwd(Q, K, V, Out, sm_scale, stride_qm, stride_kn, stride_vn, stride_om, N_CTX,
             HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_b = tl.program_id(1)
    base = off_b * N_CTX
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + (base + offs_m[:, None]) * stride_qm + offs_d[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    for start_n in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + (base + start_n + offs_n[None, :]) * stride_kn + offs_d[:, None])
        qk = tl.dot(q, k)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + (base + start_n + offs_n[:, None]) * stride_vn + offs_d[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + (base + offs_m[:, None]) * stride_om + offs_d[None, :], acc.to(tl.float16))


TARGET = GPUTarget("cuda", 80, 32)
P16, P32 = "*fp16", "*fp32"

JOBS = {
    "sm80_vector_add.ptx": (add_kernel, {"x_ptr": P32, "y_ptr": P32, "out_ptr": P32,
                                         "n_elements": "i32", "BLOCK_SIZE": "constexpr"},
                            {"BLOCK_SIZE": 1024}),
    "sm80_softmax.ptx": (softmax_kernel, {"out_ptr": P32, "in_ptr": P32, "in_stride": "i32",
                                          "out_stride": "i32", "n_rows": "i32",
                                          "n_cols": "i32", "BLOCK_SIZE": "constexpr"},
                         {"BLOCK_SIZE": 1024}),
    "sm80_matmul.ptx": (matmul_kernel, {"a_ptr": P16, "b_ptr": P16, "c_ptr": P16, "M": "i32",
                                        "N": "i32", "K": "i32", "stride_am": "i32",
                                        "stride_ak": "i32", "stride_bk": "i32",
                                        "stride_bn": "i32", "stride_cm": "i32",
                                        "stride_cn": "i32", "BLOCK_M": "constexpr",
                                        "BLOCK_N": "constexpr", "BLOCK_K": "constexpr",
                                        "GROUP_M": "constexpr"},
                        {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}),
    "sm80_layer_norm.ptx": (layer_norm_fwd, {"X": P32, "Y": P32, "W": P32, "B": P32,
                                             "Mean": P32, "Rstd": P32, "stride": "i32",
                                             "N": "i32", "eps": "fp32",
                                             "BLOCK_SIZE": "constexpr"},
                            {"BLOCK_SIZE": 1024}),
    "sm80_attn_fwd.ptx": (attn_fwd, {"Q": P16, "K": P16, "V": P16, "Out": P16,
                                     "sm_scale": "fp32", "stride_qm": "i32",
                                     "stride_kn": "i32", "stride_vn": "i32",
                                     "stride_om": "i32", "N_CTX": "i32",
                                     "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr",
                                     "BLOCK_N": "constexpr"},
                          {"HEAD_DIM": 64, "BLOCK_M": 64, "BLOCK_N": 32}),
}


def main(outdir: str) -> None:
    os.makedirs(outdir, exist_ok=True)
    for name, (fn, sig, consts) in JOBS.items():
        src = triton.compiler.ASTSource(fn, sig, consts)
        ptx = triton.compile(src, target=TARGET,
                             options={"num_warps": 4, "num_stages": 2}).asm["ptx"]
        # Triton 3.9 writes PTX ISA 9.4; CUDA 13.0's ptxas reads up to 9.0
        ptx = ptx.replace(".version 9.4\n", ".version 8.7\n")
        with open(os.path.join(outdir, name), "w") as f:
            f.write(ptx)
        print(name, len(ptx))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
