"""A Triton matmul compiled for sm_80 without a GPU; writes triton_matmul_sm80.ptx beside it.

Generated with Triton 3.9.0: TRITON_DEFAULT_FP_FUSION=1 python3 tests/data/explain/triton_matmul.py
"""
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc += tl.dot(tl.load(a), tl.load(b))
        a += BLOCK_K
        b += BLOCK_K * stride_bk
    c = c_ptr + rm[:, None] * stride_cm + rn[None, :]
    tl.store(c, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


if __name__ == "__main__":
    src = ASTSource(fn=matmul_kernel,
                    signature={"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32",
                               "N": "i32", "K": "i32", "stride_am": "i32", "stride_bk": "i32",
                               "stride_cm": "i32"},
                    constexprs={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32})
    kernel = triton.compile(src, target=GPUTarget("cuda", 80, 32), options={"num_warps": 4})
    Path(__file__).with_name("triton_matmul_sm80.ptx").write_text(kernel.asm["ptx"])
