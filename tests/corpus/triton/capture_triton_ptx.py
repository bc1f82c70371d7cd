#!/usr/bin/env python3
"""Capture PTX emitted by Triton for the ptxevo PTX IR test corpus.

Run on a machine with an NVIDIA GPU (written for an H200 / sm_90a, Triton 3.6,
PyTorch 2.11):

    python3 capture_triton_ptx.py OUT_DIR [--launch] [--only SUBSTR ...]

For every (kernel, configuration) pair it compiles the kernel for the local
GPU with ``JITFunction.warmup`` on small CUDA tensors (the same specialization
a launch would use) and writes ``compiled.asm["ptx"]`` to
``OUT_DIR/<name>_<config>.ptx``.  With ``--launch`` each kernel is also
launched once and synchronized (a sanity check; PTX is the same).  A failing
case is printed and skipped; the script continues with the next one.  At the
end it prints a summary table and writes ``OUT_DIR/manifest.json``.

Exit status: 0 when every case produced PTX, 1 otherwise (2 when Triton,
PyTorch or a GPU is missing).
"""
import argparse
import json
import os
import re
import sys
import time
import traceback

try:
    import torch
    import triton
    import triton.language as tl
except Exception as exc:  # pragma: no cover - depends on the machine
    print("capture_triton_ptx: cannot import torch/triton: %r" % (exc,), file=sys.stderr)
    sys.exit(2)

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except Exception:  # older Triton without host-side tensor descriptors
    TensorDescriptor = None


# ----------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------

@triton.jit
def vector_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def rmsnorm_fwd_kernel(x_ptr, w_ptr, out_ptr, rstd_ptr, stride_row, n_cols, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    ms = tl.sum(x * x, axis=0) / n_cols
    rstd = tl.math.rsqrt(ms + eps)
    tl.store(rstd_ptr + row, rstd)
    y = x * rstd * w
    tl.store(out_ptr + row * stride_row + cols, y.to(tl.bfloat16), mask=mask)


@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_ptr, stride_row, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    dy = tl.load(dy_ptr + row * stride_row + cols, mask=mask, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + row * stride_row + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    rstd = tl.load(rstd_ptr + row)
    xhat = x * rstd
    wdy = w * dy
    c = tl.sum(xhat * wdy, axis=0) / n_cols
    dx = (wdy - xhat * c) * rstd
    tl.store(dx_ptr + row * stride_row + cols, dx.to(tl.bfloat16), mask=mask)
    tl.atomic_add(dw_ptr + cols, dy * xhat, mask=mask)


@triton.jit
def softmax_kernel(x_ptr, out_ptr, stride_row, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride_row + cols, num / den, mask=mask)


@triton.jit
def layernorm_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride_row, n_cols, eps,
                         BLOCK_N: tl.constexpr):
    # Two-pass over column blocks (works for rows longer than BLOCK_N).
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_row
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n_cols
    accv = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        d = tl.where(cols < n_cols, x - mean, 0.0)
        accv += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(accv, axis=0) / n_cols + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for off in range(0, n_cols, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=1.0)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + row * stride_row + cols, y.to(tl.float16), mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_in_group = GROUP_M * num_pid_n
    group_id = pid // num_in_group
    first_m = group_id * GROUP_M
    group_size = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % num_in_group) % group_size)
    pid_n = (pid % num_in_group) // group_size
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(tl.bfloat16)
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(cm[:, None] < M) & (cn[None, :] < N))


@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Host-side tensor descriptors (TMA on Hopper): A is MxK, B is NxK (K-major), C is MxN.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([off_m, k])
        b = b_desc.load([off_n, k])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([off_m, off_n], acc.to(tl.bfloat16))


@triton.jit
def block_ptr_copy_scale_kernel(x_ptr, y_ptr, M, N, stride_m, stride_n, scale,
                                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    x_bp = tl.make_block_ptr(base=x_ptr, shape=(M, N), strides=(stride_m, stride_n),
                             offsets=(pid_m * BLOCK_M, pid_n * BLOCK_N), block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
    y_bp = tl.make_block_ptr(base=y_ptr, shape=(M, N), strides=(stride_m, stride_n),
                             offsets=(pid_m * BLOCK_M, pid_n * BLOCK_N), block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
    x = tl.load(x_bp, boundary_check=(0, 1), padding_option="zero")
    tl.store(y_bp, (x.to(tl.float32) * scale).to(tl.float16), boundary_check=(0, 1))


@triton.jit
def sumsq_atomic_kernel(x_ptr, sum_ptr, max_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.atomic_add(sum_ptr, tl.sum(x * x, axis=0))
    tl.atomic_max(max_ptr, tl.max(tl.abs(x), axis=0))


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols, mask=mask, other=0)
    tl.store(out_ptr + row * stride_row + cols, tl.cumsum(x, axis=0), mask=mask)


@triton.jit
def where_exp_log_kernel(x_ptr, out_ptr, n, threshold, BLOCK: tl.constexpr):
    # softplus with a linear region, plus a log-sigmoid term: exercises where/exp/log/abs.
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    sp = tl.where(x > threshold, x, tl.log(1.0 + tl.exp(x)))
    ls = -tl.log(1.0 + tl.exp(-tl.abs(x))) + tl.minimum(x, 0.0)
    y = tl.where(x != x, 0.0, sp + 0.5 * ls)
    tl.store(out_ptr + offs, y, mask=mask)


@triton.jit
def cast_fp8_bf16_kernel(x_ptr, q_ptr, bf_ptr, scale_ptr, n, BLOCK: tl.constexpr, FP8: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    scale = tl.load(scale_ptr)
    if FP8:
        q = tl.clamp(x * scale, -448.0, 448.0).to(tl.float8e4nv)
        tl.store(q_ptr + offs, q, mask=mask)
        back = q.to(tl.float32) / scale
    else:
        q = (x * scale).to(tl.bfloat16)
        tl.store(q_ptr + offs, q, mask=mask)
        back = q.to(tl.float32) / scale
    tl.store(bf_ptr + offs, back.to(tl.bfloat16), mask=mask)


@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_ym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :], mask=mask, other=0.0)
    tl.store(y_ptr + rn[:, None] * stride_ym + rm[None, :], tl.trans(tile),
             mask=(rn[:, None] < N) & (rm[None, :] < M))


# ----------------------------------------------------------------------------
# Cases: each returns (jit_fn, args tuple, grid, kwargs incl. constexprs/num_warps/num_stages)
# ----------------------------------------------------------------------------

DEV = "cuda"


def _t(*shape, dtype=torch.float32):
    if dtype in (torch.int32, torch.int64):
        return torch.randint(-8, 8, shape, device=DEV, dtype=dtype)
    return torch.randn(*shape, device=DEV, dtype=torch.float32).to(dtype)


def case_vector_add(block, nw):
    n = 10007
    x, y, o = _t(n), _t(n), _t(n)
    return vector_add_kernel, (x, y, o, n), (triton.cdiv(n, block),), dict(BLOCK=block, num_warps=nw)


def case_rmsnorm_fwd(ncols, nw):
    rows = 8
    x = _t(rows, ncols, dtype=torch.bfloat16)
    w = _t(ncols)
    o = torch.empty_like(x)
    rstd = torch.empty(rows, device=DEV, dtype=torch.float32)
    return (rmsnorm_fwd_kernel, (x, w, o, rstd, x.stride(0), ncols, 1e-6), (rows,),
            dict(BLOCK_N=triton.next_power_of_2(ncols), num_warps=nw))


def case_rmsnorm_bwd(ncols, nw):
    rows = 8
    dy = _t(rows, ncols, dtype=torch.bfloat16)
    x = _t(rows, ncols, dtype=torch.bfloat16)
    w = _t(ncols)
    rstd = torch.rand(rows, device=DEV, dtype=torch.float32) + 0.5
    dx = torch.empty_like(x)
    dw = torch.zeros(ncols, device=DEV, dtype=torch.float32)
    return (rmsnorm_bwd_kernel, (dy, x, w, rstd, dx, dw, x.stride(0), ncols), (rows,),
            dict(BLOCK_N=triton.next_power_of_2(ncols), num_warps=nw))


def case_softmax(ncols, nw, ns):
    rows = 16
    x = _t(rows, ncols)
    o = torch.empty_like(x)
    return (softmax_kernel, (x, o, x.stride(0), ncols), (rows,),
            dict(BLOCK_N=triton.next_power_of_2(ncols), num_warps=nw, num_stages=ns))


def case_layernorm(ncols, block, nw):
    rows = 8
    x = _t(rows, ncols, dtype=torch.float16)
    w, b = _t(ncols), _t(ncols)
    y = torch.empty_like(x)
    mean = torch.empty(rows, device=DEV, dtype=torch.float32)
    rstd = torch.empty(rows, device=DEV, dtype=torch.float32)
    return (layernorm_fwd_kernel, (x, w, b, y, mean, rstd, x.stride(0), ncols, 1e-5), (rows,),
            dict(BLOCK_N=block, num_warps=nw))


def case_matmul(bm, bn, bk, nw, ns):
    M, N, K = 256, 256, 256
    a = _t(M, K, dtype=torch.bfloat16)
    b = _t(K, N, dtype=torch.bfloat16)
    c = torch.empty(M, N, device=DEV, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    return (matmul_kernel, (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1)), grid,
            dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=nw, num_stages=ns))


def case_matmul_tma(bm, bn, bk, nw, ns):
    if TensorDescriptor is None:
        raise RuntimeError("triton.tools.tensor_descriptor.TensorDescriptor is not available")
    M, N, K = 256, 256, 256
    a = _t(M, K, dtype=torch.bfloat16)
    b = _t(N, K, dtype=torch.bfloat16)
    c = torch.empty(M, N, device=DEV, dtype=torch.bfloat16)
    a_d = TensorDescriptor.from_tensor(a, [bm, bk])
    b_d = TensorDescriptor.from_tensor(b, [bn, bk])
    c_d = TensorDescriptor.from_tensor(c, [bm, bn])
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    return (matmul_tma_kernel, (a_d, b_d, c_d, M, N, K), grid,
            dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=nw, num_stages=ns))


def case_block_ptr(bm, bn, nw):
    M, N = 300, 520
    x = _t(M, N, dtype=torch.float16)
    y = torch.empty_like(x)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    return (block_ptr_copy_scale_kernel, (x, y, M, N, x.stride(0), x.stride(1), 0.5), grid,
            dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=nw))


def case_sumsq_atomic(block, nw):
    n = 50000
    x = _t(n)
    s = torch.zeros(1, device=DEV, dtype=torch.float32)
    m = torch.zeros(1, device=DEV, dtype=torch.float32)
    return sumsq_atomic_kernel, (x, s, m, n), (triton.cdiv(n, block),), dict(BLOCK=block, num_warps=nw)


def case_cumsum(ncols, dtype, nw):
    rows = 4
    x = _t(rows, ncols, dtype=dtype)
    o = torch.empty_like(x)
    return (cumsum_kernel, (x, o, ncols, x.stride(0)), (rows,),
            dict(BLOCK_N=triton.next_power_of_2(ncols), num_warps=nw))


def case_where_exp_log(block, nw):
    n = 12345
    x = _t(n) * 10.0
    o = torch.empty_like(x)
    return where_exp_log_kernel, (x, o, n, 20.0), (triton.cdiv(n, block),), dict(BLOCK=block, num_warps=nw)


def case_cast(block, fp8, nw):
    n = 8192 + 17
    x = _t(n)
    q = torch.empty(n, device=DEV, dtype=torch.float8_e4m3fn if fp8 else torch.bfloat16)
    bf = torch.empty(n, device=DEV, dtype=torch.bfloat16)
    scale = torch.full((1,), 4.0, device=DEV, dtype=torch.float32)
    return (cast_fp8_bf16_kernel, (x, q, bf, scale, n), (triton.cdiv(n, block),),
            dict(BLOCK=block, FP8=fp8, num_warps=nw))


def case_transpose(bm, bn, nw):
    M, N = 333, 200
    x = _t(M, N)
    y = torch.empty(N, M, device=DEV, dtype=torch.float32)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    return transpose_kernel, (x, y, M, N, x.stride(0), y.stride(0)), grid, dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=nw)


# name, config tag, builder, builder args
CASES = [
    ("vector_add", "b256_w2", case_vector_add, (256, 2)),
    ("vector_add", "b1024_w4", case_vector_add, (1024, 4)),
    ("vector_add", "b4096_w8", case_vector_add, (4096, 8)),
    ("rmsnorm_fwd", "n768_w2", case_rmsnorm_fwd, (768, 2)),
    ("rmsnorm_fwd", "n4096_w8", case_rmsnorm_fwd, (4096, 8)),
    ("rmsnorm_fwd", "n8192_w16", case_rmsnorm_fwd, (8192, 16)),
    ("rmsnorm_bwd", "n1024_w4", case_rmsnorm_bwd, (1024, 4)),
    ("rmsnorm_bwd", "n4096_w8", case_rmsnorm_bwd, (4096, 8)),
    ("softmax", "n128_w1_s1", case_softmax, (128, 1, 1)),
    ("softmax", "n1000_w4_s2", case_softmax, (1000, 4, 2)),
    ("softmax", "n8192_w16_s3", case_softmax, (8192, 16, 3)),
    ("layernorm_fwd", "n1024_b1024_w4", case_layernorm, (1024, 1024, 4)),
    ("layernorm_fwd", "n5000_b1024_w8", case_layernorm, (5000, 1024, 8)),
    ("layernorm_fwd", "n768_b256_w2", case_layernorm, (768, 256, 2)),
    ("matmul", "m64_n64_k32_w4_s3", case_matmul, (64, 64, 32, 4, 3)),
    ("matmul", "m128_n128_k64_w8_s3", case_matmul, (128, 128, 64, 8, 3)),
    ("matmul", "m64_n128_k32_w4_s4", case_matmul, (64, 128, 32, 4, 4)),
    ("matmul_tma", "m128_n128_k64_w4_s3", case_matmul_tma, (128, 128, 64, 4, 3)),
    ("matmul_tma", "m128_n256_k64_w8_s3", case_matmul_tma, (128, 256, 64, 8, 3)),
    ("matmul_tma", "m64_n64_k64_w4_s2", case_matmul_tma, (64, 64, 64, 4, 2)),
    ("block_ptr_scale", "m32_n64_w2", case_block_ptr, (32, 64, 2)),
    ("block_ptr_scale", "m64_n128_w4", case_block_ptr, (64, 128, 4)),
    ("block_ptr_scale", "m128_n128_w8", case_block_ptr, (128, 128, 8)),
    ("sumsq_atomic", "b512_w4", case_sumsq_atomic, (512, 4)),
    ("sumsq_atomic", "b2048_w8", case_sumsq_atomic, (2048, 8)),
    ("sumsq_atomic", "b128_w1", case_sumsq_atomic, (128, 1)),
    ("cumsum", "n256_f32_w1", case_cumsum, (256, torch.float32, 1)),
    ("cumsum", "n1024_i32_w4", case_cumsum, (1024, torch.int32, 4)),
    ("cumsum", "n4096_f32_w8", case_cumsum, (4096, torch.float32, 8)),
    ("where_exp_log", "b256_w2", case_where_exp_log, (256, 2)),
    ("where_exp_log", "b1024_w4", case_where_exp_log, (1024, 4)),
    ("where_exp_log", "b2048_w8", case_where_exp_log, (2048, 8)),
    ("cast", "fp8_b1024_w4", case_cast, (1024, True, 4)),
    ("cast", "fp8_b4096_w8", case_cast, (4096, True, 8)),
    ("cast", "bf16_b1024_w4", case_cast, (1024, False, 4)),
    ("transpose", "m32_n32_w4", case_transpose, (32, 32, 4)),
    ("transpose", "m64_n64_w4", case_transpose, (64, 64, 4)),
    ("transpose", "m128_n32_w8", case_transpose, (128, 32, 8)),
]

# Substrings reported per PTX file in the summary (informational only).
FEATURES = ["wgmma.mma_async", "mma.sync", "cp.async.bulk.tensor", "cp.async.bulk.", "cp.async.ca", "cp.async.cg",
            "mbarrier", "ldmatrix", "stmatrix", "shfl.sync", "atom.global", "atom.shared", "red.global", "red.shared",
            "cvt.rn.satfinite.e4m3x2", "ex2.approx", "bar.sync", "setmaxnreg", "fence.proxy"]


def compile_case(fn, args, grid, kwargs, launch):
    """Compile (and optionally launch) one kernel; return the CompiledKernel."""
    compiled = fn.warmup(*args, grid=grid, **kwargs)
    if launch:
        k2 = fn[grid](*args, **kwargs)
        torch.cuda.synchronize()
        if k2 is not None:
            compiled = k2
    return compiled


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--launch", action="store_true", help="also launch each kernel once and synchronize")
    ap.add_argument("--only", nargs="*", default=None, help="run only cases whose '<name>_<config>' contains one of these")
    args = ap.parse_args()

    if not torch.cuda.is_available():
        print("capture_triton_ptx: no CUDA device visible", file=sys.stderr)
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    cap = torch.cuda.get_device_capability()
    print("triton %s, torch %s, device %s (sm_%d%d)" % (triton.__version__, torch.__version__,
                                                        torch.cuda.get_device_name(), cap[0], cap[1]))
    # Host-side TMA descriptors need no allocator, but device-side ones do; harmless to set.
    if hasattr(triton, "set_allocator"):
        try:
            triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device=DEV, dtype=torch.int8))
        except Exception:
            pass

    torch.manual_seed(0)
    results = []
    for name, cfg, builder, bargs in CASES:
        full = "%s_%s" % (name, cfg)
        if args.only and not any(s in full for s in args.only):
            continue
        t0 = time.time()
        entry = {"name": name, "config": cfg, "file": full + ".ptx"}
        try:
            fn, kargs, grid, kwargs = builder(*bargs)
            compiled = compile_case(fn, kargs, grid, kwargs, args.launch)
            ptx = compiled.asm["ptx"]
            if isinstance(ptx, bytes):
                ptx = ptx.decode()
            with open(os.path.join(args.out_dir, full + ".ptx"), "w") as f:
                f.write(ptx)
            target = re.search(r"^\.target\s+(\S+)", ptx, re.M)
            entry.update(ok=True, lines=ptx.count("\n"), target=target.group(1) if target else "?",
                         num_warps=kwargs.get("num_warps"), num_stages=kwargs.get("num_stages"),
                         constexprs={k: (v if isinstance(v, (int, float, bool)) else str(v))
                                     for k, v in kwargs.items() if k not in ("num_warps", "num_stages")},
                         features=[ft for ft in FEATURES if ft in ptx], seconds=round(time.time() - t0, 2))
            print("ok    %-40s %6d lines  %s" % (full, entry["lines"], " ".join(entry["features"])))
        except Exception as exc:
            entry.update(ok=False, error="%s: %s" % (type(exc).__name__, exc))
            print("FAIL  %-40s %s" % (full, entry["error"]))
            traceback.print_exc(limit=3)
        results.append(entry)
        sys.stdout.flush()

    ok = [r for r in results if r["ok"]]
    bad = [r for r in results if not r["ok"]]
    meta = {"triton": triton.__version__, "torch": torch.__version__, "capability": list(cap),
            "launched": bool(args.launch), "cases": results}
    with open(os.path.join(args.out_dir, "manifest.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("\nsummary: %d kernels/configs, %d PTX files written to %s, %d failed" % (len(results), len(ok),
                                                                                  args.out_dir, len(bad)))
    for r in bad:
        print("  failed: %s_%s: %s" % (r["name"], r["config"], r["error"]))
    print("%d passed, %d failed" % (len(ok), len(bad)))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
