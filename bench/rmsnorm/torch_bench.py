#!/usr/bin/env python3
"""RMSNorm forward or backward candidates built by `ptxevo build` against PyTorch, side by side on one GPU.

    python3 bench/rmsnorm/torch_bench.py --candidate seed=DIR1 --candidate best=DIR2 --out OUTDIR \
        [--commit SHA] [--samples 30] [--graph] [--shapes M=32768,N=4096 ...]

The op (rmsnorm_fwd or rmsnorm_bwd) comes from the candidates' launch.json (`--op` to insist on
one). The backward's providers are the candidates (every kernel of the launch plan in order), an
explicit fp32 torch formula (eager), torch.compile of that formula (QuACK's baseline) and, with
--autograd, torch.autograd.grad through F.rms_norm (backward only; the forward is run once, untimed).

In one process, for every benchmark shape of the candidates' launch.json: draw inputs (a pool of
sets larger than 2x the L2), load each cubin through the driver API (ctypes), check each
candidate against an fp64 torch reference (the gate's tolerances from launch.json), then time
every candidate, torch.nn.functional.rms_norm (eager) and torch.compile of it, interleaved
round-robin per sample with CUDA events around batches of launches. Writes results.json and
results.md to --out. README.md beside this says more.

torch is imported inside functions, so the pure parts (statistics, launch.json, the table) can
be imported and tested on a machine without it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import struct
import subprocess
import sys
import traceback
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_report import AUTOGRAD, COMPILE, EAGER, EXPERT, markdown_report  # noqa: E402
from bench_stats import paired_ratio, pool_sets, sets_that_fit, summarize  # noqa: E402
from launch_json import BuildDir, LaunchFormatError, ShapeSpec, load_build_dir, parse_candidate_arg  # noqa: E402
from providers import Provider, calibrate, capture, event_ms, time_round_robin  # noqa: E402
from rmsnorm_checks import compare, compare_bwd, real_rstd, rmsnorm_bwd_torch  # noqa: E402


OPS = ("rmsnorm_fwd", "rmsnorm_bwd")

# Options of the rmsnorm_fwd op (kernels/rmsnorm/README.md) this script's reference implements.
# Any other option must be off ("false", "0", "none", ""): a bias would need more.
KNOWN_OPTIONS = {"x_dtype", "w_dtype", "has_weight", "store_rstd", "eps", "has_residual", "residual_out_dtype"}
OFF_VALUES = {"false", "0", "none", ""}
TENSOR_NAMES = {"x", "w", "out", "rstd", "residual", "residual_out"}
# rmsnorm_bwd (kernels/rmsnorm/rmsnorm_bwd_op.cpp, RmsNormBwdOp::tensors): x, w, dout, rstd in;
# dx, dw out; dw_partial scratch (fp32 partial rows of dw, one per row group).
BWD_KNOWN_OPTIONS = {"x_dtype", "w_dtype", "has_weight"}
BWD_TENSOR_NAMES = {"x", "w", "dout", "rstd", "dx", "dw", "dw_partial"}
# The rstd fed to the backward is the real one of x (QuACK's benchmark passes a random one:
# kernels/rmsnorm/README.md, "Public benchmark timing").
BWD_RSTD_EPS = 1e-6


# Where torch tensors live; the CPU tests set "cpu" to run the backward's code paths with fakes.
DEVICE = "cuda"


class BenchError(RuntimeError):
    """A problem with the inputs or a candidate that the user can act on."""


# ---------------------------------------------------------------- the op, pure Python

def float32(v: float) -> float:
    """v rounded to float32, as the kernel receives eps."""
    return struct.unpack("f", struct.pack("f", v))[0]


def rmsnorm_options(b: BuildDir, op: Optional[str] = None) -> Dict[str, Any]:
    """The op's options from launch.json; `op` (--op), when given, must be the build's op."""
    if op and op != b.op:
        raise BenchError(f"{b.label}: launch.json is for op '{b.op}', but --op {op} was asked for")
    if b.op not in OPS:
        raise BenchError(f"{b.label}: op '{b.op}'; torch_bench.py benchmarks {' and '.join(OPS)} only")
    known = KNOWN_OPTIONS if b.op == "rmsnorm_fwd" else BWD_KNOWN_OPTIONS
    cfg = b.config
    for k, v in cfg.items():
        if k not in known and v.lower() not in OFF_VALUES:
            raise BenchError(f"{b.label}: option {k} = {v} is not implemented by torch_bench.py's reference "
                             "(extend rmsnorm_reference and the torch providers first)")
    if b.op == "rmsnorm_bwd":
        return {"op": b.op, "x_dtype": cfg.get("x_dtype", "bf16"), "w_dtype": cfg.get("w_dtype", "fp32"),
                "has_weight": cfg.get("has_weight", "true") == "true", "eps": float32(BWD_RSTD_EPS)}
    return {"op": b.op, "x_dtype": cfg.get("x_dtype", "bf16"), "w_dtype": cfg.get("w_dtype", "fp32"),
            "has_weight": cfg.get("has_weight", "true") == "true", "store_rstd": cfg.get("store_rstd", "false") == "true",
            "has_residual": cfg.get("has_residual", "false") == "true",
            "residual_out_fp32": cfg.get("residual_out_dtype", "x") == "fp32",
            "eps": float32(float(cfg.get("eps", "1e-6")))}


def bwd_bytes(m: int, n: int, x_bytes: int = 2) -> float:
    """docs/targets.md's backward byte count: x and dout read, dx written (x's dtype), rstd read, dw
    written (fp32): 3*M*N*2 + 4*M + 4*N for bf16."""
    return 3.0 * m * n * x_bytes + 4.0 * m + 4.0 * n


def check_candidates_agree(builds: Sequence[BuildDir]) -> None:
    first = builds[0]
    for b in builds[1:]:
        if b.op != first.op or b.config != first.config:
            raise BenchError(f"{b.label} ({b.op} {b.config}) and {first.label} ({first.op} {first.config}) "
                             "were built for different ops or options; compare candidates of one spec")


def select_shapes(builds: Sequence[BuildDir], wanted: Sequence[str], max_shapes: int) -> List[str]:
    """Benchmark shape keys of the first candidate (filtered by `wanted`); every candidate must
    have each with the same tensors."""
    keys = [s.key() for s in builds[0].shapes if s.cls == "benchmark"]
    if not keys:
        raise BenchError(f"{builds[0].path}/launch.json has no benchmark shapes: build with --shapes benchmark or all")
    if wanted:
        missing = [w for w in wanted if w not in keys]
        if missing:
            raise BenchError(f"shapes {missing} are not benchmark shapes of {builds[0].label} (it has {keys})")
        keys = [k for k in keys if k in wanted]
    if max_shapes > 0:
        keys = keys[:max_shapes]
    for b in builds[1:]:
        theirs = {s.key(): s for s in b.shapes}
        for k in keys:
            if k not in theirs:
                raise BenchError(f"{b.label} has no shape {k}; rebuild it from the same spec")
            mine = [t.signature() for t in shape_of(builds[0], k).tensors]
            if [t.signature() for t in theirs[k].tensors] != mine:
                raise BenchError(f"{b.label} and {builds[0].label} list different tensors for shape {k}")
    return keys


def shape_of(b: BuildDir, key: str) -> ShapeSpec:
    for s in b.shapes:
        if s.key() == key:
            return s
    raise KeyError(key)


def check_tensors(shape: ShapeSpec, op: str = "rmsnorm_fwd") -> None:
    names = BWD_TENSOR_NAMES if op == "rmsnorm_bwd" else TENSOR_NAMES
    unknown = [t.name for t in shape.tensors if t.name not in names]
    if unknown:
        raise BenchError(f"shape {shape.key()}: tensors {unknown} are unknown to torch_bench.py "
                         f"(it knows {sorted(names)})")
    if op == "rmsnorm_bwd":
        missing = [n for n in ("x", "dout", "rstd", "dx") if shape.tensor(n) is None]
        if missing:
            raise BenchError(f"shape {shape.key()}: the backward needs tensors {missing}")


def output_names(shape: ShapeSpec) -> List[str]:
    return [t.name for t in shape.tensors if t.role in ("out", "inout", "scratch")]


# ---------------------------------------------------------------- torch: inputs, reference, checks

def torch_dtype(name: str):
    import torch
    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "f64": torch.float64,
            "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8}[name]


def make_inputs(shape: ShapeSpec, seed: int) -> Dict[str, Any]:
    """Inputs of one set: x ~ N(0, 1); w ~ 1 + 0.5 N(0, 1), as the op draws it (never zeros)."""
    import torch
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    out = {}
    for t in shape.tensors:
        if t.role != "in":
            continue
        v = torch.randn(t.shape, generator=g, device="cuda", dtype=torch.float32)
        if t.name == "w":
            v = 1.0 + 0.5 * v
        out[t.name] = v.to(torch_dtype(t.dtype))
    return out


def poisoned_outputs(shape: ShapeSpec, roles: Sequence[str] = ("out", "inout", "scratch")) -> Dict[str, Any]:
    import torch
    outs = {}
    for t in shape.tensors:
        if t.role in roles:
            v = torch.empty(t.shape, device=DEVICE, dtype=torch_dtype(t.dtype))
            v.fill_(float("nan") if v.is_floating_point() else -1)
            outs[t.name] = v
    return outs


# ---------------------------------------------------------------- torch: the backward

def make_bwd_inputs(shape: ShapeSpec, seed: int, eps: float, device: Optional[str] = None) -> Dict[str, Any]:
    """Inputs of one backward set: x, dout ~ N(0, 1); w ~ 1 + 0.5 N(0, 1) (as the op draws it);
    rstd the real rstd of x (fp32, eps), not a random one."""
    import torch
    device = device or DEVICE
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    out = {}
    for name in ("x", "w", "dout"):
        t = shape.tensor(name)
        if t is None:
            continue
        v = torch.randn(t.shape, generator=g, device=device, dtype=torch.float32)
        if name == "w":
            v = 1.0 + 0.5 * v
        out[name] = v.to(torch_dtype(t.dtype))
        del v
    out["rstd"] = real_rstd(out["x"], eps).to(torch_dtype(shape.tensor("rstd").dtype))
    return out


# ---------------------------------------------------------------- providers and timing

def held_references(args: argparse.Namespace) -> int:
    """Torch providers whose outputs stay alive per input set (--reference-outputs per-set)."""
    if getattr(args, "reference_outputs", "per-set") != "per-set":
        return 0
    return (1 + len(getattr(args, "export_modules", {}) or {}) + (getattr(args, "expert_module", None) is not None)
            + (not args.skip_compile) + bool(getattr(args, "autograd", False)))


def time_providers(row: Dict[str, Any], cand_steps: Dict[str, Callable[[int, int], Any]],
                   torch_steps: Dict[str, Callable[[int], Any]], nsets: int, args: argparse.Namespace,
                   capture_streams: Optional[Dict[str, Any]] = None,
                   optional: Sequence[str] = (), hold_outputs: bool = False) -> Dict[str, List[float]]:
    """Calibrates (and with --graph captures) every provider, times them round-robin and records
    their statistics in row["providers"]. A provider named in `optional` that fails to calibrate
    or capture is left out with a note in row["errors"] instead of failing the shape."""
    import torch
    providers = [Provider(label, step, nsets) for label, step in cand_steps.items()]
    providers += [Provider(name, (lambda f: lambda i, s: f(i))(f), nsets) for name, f in torch_steps.items()]
    for p in providers[len(cand_steps):]:
        p.hold = hold_outputs
    kept = []
    for p in providers:
        p.capture_stream = (capture_streams or {}).get(p.name)
        try:
            calibrate(p, args.target_batch_ms)
            if args.graph:
                capture(p)
        except Exception as e:  # noqa: BLE001 -- only for optional providers
            if p.name not in optional:
                raise
            torch.cuda.synchronize()
            row["errors"].append(f"{p.name} left out: {'capture' if args.graph else 'calibration'} failed: "
                                 f"{type(e).__name__}: {str(e)[:300]}")
            continue
        kept.append(p)
    times = time_round_robin(kept, args.samples, args.warmup)
    torch.cuda.synchronize()
    for p in kept:
        row["providers"][p.name] = {**summarize(times[p.name]), "per_batch": p.per_batch, "samples": times[p.name]}
    return times


def add_speedups(row: Dict[str, Any], labels: Sequence[str], others: Sequence[str],
                 times: Dict[str, List[float]]) -> None:
    """row["speedups"][candidate][other] = other's ms / candidate's ms over same-round pairs."""
    for label in labels:
        if label not in row["providers"]:
            continue
        mine = times[label]
        sp = {o: paired_ratio(times[o], mine) for o in others if o in times and o in row["providers"]}
        row["speedups"][label] = sp


def copy_bandwidth(l2_bytes: int) -> Dict[str, float]:
    """Device-to-device copy of max(1 GiB, 8 x L2): bytes read + written over the median time."""
    import torch
    nbytes = max(1 << 30, 8 * l2_bytes)
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(7)
    b = torch.empty_like(a)
    rates = []
    for i in range(12):
        ms = event_ms(lambda: b.copy_(a))
        if i >= 2:
            rates.append(2.0 * nbytes / (ms * 1e-3))
    a = b = None  # free both before empty_cache
    torch.cuda.empty_cache()
    s = summarize(rates)
    return {"bytes": nbytes, "Bps": s["median"], "ci_low": s["ci_low"], "ci_high": s["ci_high"]}


# ---------------------------------------------------------------- one shape

def passing_builds(builds, checks, row, key):
    """The candidates whose every output passed its check; the others go to row["failed"], untimed."""
    alive = []
    for b in builds:
        bad = [f"{name}: {r['message']}" for name, r in checks[b.label].items() if not r["ok"]]
        if bad:
            row["failed"][b.label] = "; ".join(bad)
            print(f"  {key}: {b.label} FAILED the correctness check, not timed: {'; '.join(bad)}", flush=True)
        else:
            alive.append(b)
    return alive


def run_shape(key: str, builds: Sequence[BuildDir], modules: Dict[str, Any], opts: Dict[str, Any],
              env: Dict[str, Any], args: argparse.Namespace) -> Dict[str, Any]:
    if opts.get("op") == "rmsnorm_bwd":
        return run_shape_bwd(key, builds, modules, opts, env, args)
    import torch
    import torch._dynamo
    import torch.nn.functional as F
    from cuda_ctypes import prepare_plan, run_plan

    shape = shape_of(builds[0], key)
    check_tensors(shape)
    n = shape.dims.get("N", shape.tensors[0].shape[-1])
    row: Dict[str, Any] = {"shape": key, "dims": shape.dims, "bytes": shape.bytes, "flops": shape.flops,
                           "providers": {}, "speedups": {}, "checks": {}, "failed": {}, "errors": []}
    bw = env["copy_bandwidth_Bps"]
    row["floor_ms"] = shape.bytes / bw * 1e3

    in_bytes = sum(t.nbytes for t in shape.tensors if t.role == "in")
    out_bytes = sum(t.nbytes for t in shape.tensors if t.role != "in")
    free, _ = torch.cuda.mem_get_info()
    x_numel = shape.tensor("x").numel
    # Eager's composite path keeps a few fp32 copies of x alive; torch.compile's output another.
    reserve = 6 * 4 * x_numel
    want = pool_sets(in_bytes + out_bytes, env["l2_bytes"], args.pool_l2_multiple)
    fit = sets_that_fit(in_bytes + (len(builds) + held_references(args)) * out_bytes, free, reserve)
    nsets = min(want, fit)
    if nsets < want:
        row["errors"].append(f"pool limited by memory to {nsets} sets (wanted {want})")
    row["pool_sets"], row["set_bytes"] = nsets, in_bytes + out_bytes

    sets = [make_inputs(shape, args.seed * 1000003 + i) for i in range(nsets)]
    outs = {b.label: [poisoned_outputs(shape) for _ in range(nsets)] for b in builds}
    plans = {b.label: [prepare_plan(modules[b.label], shape_of(b, key).kernels,
                                    {**{k: v.data_ptr() for k, v in sets[i].items()},
                                     **{k: v.data_ptr() for k, v in outs[b.label][i].items()}})
                       for i in range(nsets)] for b in builds}

    # ---- correctness: every candidate on the first and the last set, before any timing
    stream = torch.cuda.current_stream().cuda_stream
    for b in builds:
        run_plan(plans[b.label][0], stream)
        run_plan(plans[b.label][nsets - 1], stream)
    torch.cuda.synchronize()

    eps = opts["eps"]
    if opts.get("has_residual"):
        if getattr(args, "export_modules", {}):
            raise BenchError("--export times exported modules without a residual only")
        res_dtype = torch.float32 if opts.get("residual_out_fp32") else None
        fn = lambda x, w, r: fused_add_rms_norm_torch(x, w, r, n, eps, res_dtype)  # noqa: E731
    else:
        fn = lambda x, w, r: F.rms_norm(x, (n,), w, eps)  # noqa: E731
    providers_torch: Dict[str, Callable[[int], Any]] = {
        EAGER: lambda i: fn(sets[i]["x"], sets[i].get("w"), sets[i].get("residual"))}
    for label, mod in getattr(args, "export_modules", {}).items():  # exported torch extensions
        providers_torch[label] = (lambda m: lambda i: m.rmsnorm_fwd(sets[i]["x"], sets[i].get("w"), eps=eps)[0])(mod)
    expert = getattr(args, "expert_module", None)
    if expert is not None:
        providers_torch[EXPERT] = expert_forward(expert, sets, eps, opts)
    if not args.skip_compile:
        torch._dynamo.reset()  # a static compile per shape; the recompile limit would stop at 8
        compiled = torch.compile(fn, dynamic=False)
        providers_torch[COMPILE] = lambda i: compiled(sets[i]["x"], sets[i].get("w"), sets[i].get("residual"))
    torch_out = {}
    for name, f in providers_torch.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch_out[name] = torch_outputs(f(0))
        row.setdefault("torch_warnings", {})[name] = sorted({str(c.message)[:200] for c in caught})
        row.setdefault("torch_out_dtype", {})[name] = str(torch_out[name]["out"].dtype).replace("torch.", "")
    torch.cuda.synchronize()
    checks = compare(shape, opts, sets[0], {**{b.label: outs[b.label][0] for b in builds}, **torch_out}, args)
    if nsets > 1:
        last = compare(shape, opts, sets[-1], {b.label: outs[b.label][-1] for b in builds}, args)
        for label, per in last.items():
            for name, r in per.items():
                if not r["ok"] and checks[label][name]["ok"]:
                    checks[label][name] = {**r, "message": r["message"] + " (on the last input set)"}
    row["checks"] = checks
    del torch_out
    alive = passing_builds(builds, checks, row, key)

    # ---- timing
    cand_steps = {b.label: (lambda plans_b: lambda i, s: run_plan(plans_b[i], s))(plans[b.label]) for b in alive}
    times = time_providers(row, cand_steps, providers_torch, nsets, args,
                           hold_outputs=args.reference_outputs == "per-set")

    # ---- the timed runs' outputs must still be right (a kernel may not tell checks from timing)
    if alive:
        after = compare(shape, opts, sets[0], {b.label: outs[b.label][0] for b in alive}, args)
        for b in alive:
            bad = [f"{name}: {r['message']}" for name, r in after[b.label].items() if not r["ok"]]
            if bad:
                row["failed"][b.label] = "timed outputs wrong: " + "; ".join(bad)
                del row["providers"][b.label]

    add_speedups(row, [b.label for b in alive], list(providers_torch), times)
    return row


# ---------------------------------------------------------------- one backward shape

def autograd_forward_bytes(st: Dict[str, Any], n: int, eps: float) -> int:
    """Device memory one retained F.rms_norm forward holds (with dout in its output's dtype)."""
    import torch
    import torch.nn.functional as F
    if not hasattr(F, "rms_norm"):
        raise BenchError(f"torch {torch.__version__} has no F.rms_norm")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.mem_get_info()[0]
    xr = st["x"].detach().requires_grad_(True)
    wr = st["w"].detach().requires_grad_(True) if "w" in st else None
    y = F.rms_norm(xr, (n,), wr, eps)
    dy = st["dout"] if y.dtype == st["dout"].dtype else st["dout"].to(y.dtype)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # what the forward freed again is not held
    used = before - torch.cuda.mem_get_info()[0]
    del y, dy, xr, wr
    torch.cuda.empty_cache()
    return max(0, used)


def autograd_setup(sets: Sequence[Dict[str, Any]], n: int, eps: float, stream) -> Tuple[Callable[[int], Any], str]:
    """torch.autograd.grad through F.rms_norm, backward only: the forward runs once per input set
    here (on `stream`, untimed), its graph retained; the step is one autograd.grad(retain_graph)
    with dout (cast to the output's dtype here, so no cast is timed). Returns the step and a note."""
    import torch
    import torch.nn.functional as F
    if not hasattr(F, "rms_norm"):
        raise BenchError(f"torch {torch.__version__} has no F.rms_norm")
    graphs = []
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for st in sets:
            xr = st["x"].detach().requires_grad_(True)
            wr = st["w"].detach().requires_grad_(True) if "w" in st else None
            y = F.rms_norm(xr, (n,), wr, eps)
            dy = st["dout"] if y.dtype == st["dout"].dtype else st["dout"].to(y.dtype)
            graphs.append((y, (xr, wr) if wr is not None else (xr,), dy))
    torch.cuda.current_stream().wait_stream(stream)
    y = graphs[0][0]
    note = (f"{AUTOGRAD}: torch.autograd.grad(F.rms_norm(x, (N,), w, eps), (x, w), dout, retain_graph=True), "
            f"forward run once untimed; output {str(y.dtype).replace('torch.', '')}, grad_fn {type(y.grad_fn).__name__}; "
            "its rstd is its forward's own")

    def step(i: int):
        yy, inputs, dy = graphs[i]
        return torch.autograd.grad(yy, inputs, dy, retain_graph=True)
    return step, note


def run_shape_bwd(key: str, builds: Sequence[BuildDir], modules: Dict[str, Any], opts: Dict[str, Any],
                  env: Dict[str, Any], args: argparse.Namespace) -> Dict[str, Any]:
    import torch
    from cuda_ctypes import prepare_plan, run_plan
    from launch_json import DTYPE_BYTES

    shape = shape_of(builds[0], key)
    check_tensors(shape, "rmsnorm_bwd")
    xt = shape.tensor("x")
    m, n = shape.dims.get("M", xt.shape[0]), shape.dims.get("N", xt.shape[-1])
    row: Dict[str, Any] = {"shape": key, "dims": shape.dims, "bytes": shape.bytes, "flops": shape.flops,
                           "providers": {}, "speedups": {}, "checks": {}, "failed": {}, "errors": []}
    expected = bwd_bytes(m, n, DTYPE_BYTES[xt.dtype])
    if abs(expected - shape.bytes) > 0.5:
        row["errors"].append(f"launch.json counts {shape.bytes:.0f} bytes, docs/targets.md's formula {expected:.0f}; "
                             "the floor uses launch.json's")
    bw = env["copy_bandwidth_Bps"]
    row["floor_ms"] = shape.bytes / bw * 1e3

    in_bytes = sum(t.nbytes for t in shape.tensors if t.role == "in")
    out_bytes = sum(t.nbytes for t in shape.tensors if t.role in ("out", "inout"))
    scratch_bytes = sum(t.nbytes for t in shape.tensors if t.role == "scratch")
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info()
    numel = xt.numel
    # Eager's formula keeps about four fp32 copies of x alive (a CUDA graph keeps that pool), the
    # compiled one its outputs; every candidate one scratch tensor for the whole shape.
    reserve = 24 * numel + len(builds) * scratch_bytes
    want = pool_sets(in_bytes + out_bytes, env["l2_bytes"], args.pool_l2_multiple)
    fit = sets_that_fit(in_bytes + (len(builds) + held_references(args)) * out_bytes, free, reserve)
    nsets = min(want, fit)
    if nsets < want:
        row["errors"].append(f"pool limited by memory to {nsets} sets (wanted {want})")
    row["pool_sets"], row["set_bytes"] = nsets, in_bytes + out_bytes

    sets = [make_bwd_inputs(shape, args.seed * 1000003 + i, opts["eps"]) for i in range(nsets)]
    outs = {b.label: [poisoned_outputs(shape, ("out", "inout")) for _ in range(nsets)] for b in builds}
    scratch = {b.label: poisoned_outputs(shape, ("scratch",)) for b in builds}  # once per shape
    plans = {b.label: [prepare_plan(modules[b.label], shape_of(b, key).kernels,
                                    {**{k: v.data_ptr() for k, v in sets[i].items()},
                                     **{k: v.data_ptr() for k, v in outs[b.label][i].items()},
                                     **{k: v.data_ptr() for k, v in scratch[b.label].items()}})
                       for i in range(nsets)] for b in builds}
    row["plan"] = {b.label: [{"entry": k.entry, "grid": list(k.grid), "block": list(k.block),
                              "cluster": list(k.cluster), "shared_bytes": k.shared_bytes}
                             for k in shape_of(b, key).kernels] for b in builds}

    # ---- correctness: every candidate on the first and the last set, before any timing
    stream = torch.cuda.current_stream().cuda_stream
    for b in builds:
        run_plan(plans[b.label][0], stream)
        run_plan(plans[b.label][nsets - 1], stream)
    torch.cuda.synchronize()

    def args_of(i: int):
        st = sets[i]
        return st["x"], st.get("w"), st["dout"], st["rstd"]

    providers_torch: Dict[str, Callable[[int], Any]] = {EAGER: lambda i: rmsnorm_bwd_torch(*args_of(i))}
    if not args.skip_compile:
        import torch._dynamo
        torch._dynamo.reset()  # a static compile per shape; the recompile limit would stop at 8
        compiled = torch.compile(rmsnorm_bwd_torch, dynamic=False)
        providers_torch[COMPILE] = lambda i: compiled(*args_of(i))
    expert = getattr(args, "expert_module", None)
    if expert is not None:
        if args.graph:
            # Its backward keeps a TMA descriptor for the last pointer pair it saw: replays of a
            # graph captured over rotating inputs would not run its real path.
            row["errors"].append(f"{EXPERT} left out: its backward is timed in stream mode only (it caches a TMA "
                                 "descriptor for one pointer pair, which graph replays over rotating inputs skip)")
        else:
            providers_torch[EXPERT] = lambda i: tuple(expert.rmsnorm_bwd(*args_of(i)))[:2]
    capture_streams: Dict[str, Any] = {}
    if args.autograd:
        # What one set's retained forward takes (its saved tensors, the output, dout in the
        # output's dtype), measured on set 0; the backward's temporaries are guessed at four fp32
        # copies of x, eager's and compile's graph pools (timed later) at 24 bytes an element.
        try:
            per_set = autograd_forward_bytes(sets[0], n, opts["eps"])
        except (BenchError, RuntimeError) as e:
            per_set = None
            row["errors"].append(f"{AUTOGRAD} left out: {type(e).__name__}: {str(e)[:300]}")
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info()
        need = nsets * (per_set or 0) + 16 * numel + 24 * numel
        if per_set is None:
            pass
        elif need > 0.9 * free:
            row["errors"].append(f"{AUTOGRAD} left out: needs about {need / 1e9:.0f} GB ({nsets} retained forwards "
                                 f"of {per_set / 1e9:.1f} GB, backward and the other providers' pools), "
                                 f"{free / 1e9:.0f} GB free")
        else:
            ag_stream = torch.cuda.Stream() if args.graph else torch.cuda.current_stream()
            try:
                step, note = autograd_setup(sets, n, opts["eps"], ag_stream)
                providers_torch[AUTOGRAD] = step
                capture_streams[AUTOGRAD] = ag_stream if args.graph else None
                row["autograd_note"] = note
            except (BenchError, RuntimeError) as e:  # torch's OutOfMemoryError is a RuntimeError
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
                row["errors"].append(f"{AUTOGRAD} left out: {type(e).__name__}: {str(e)[:300]}")

    torch_out: Dict[str, Dict[str, Any]] = {}
    for name, f in list(providers_torch.items()):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                dx, dw = (tuple(f(0)) + (None,))[:2]
            except Exception as e:  # noqa: BLE001 -- an optional torch provider
                if name != AUTOGRAD:
                    raise
                del providers_torch[name]
                row["errors"].append(f"{AUTOGRAD} left out: {type(e).__name__}: {str(e)[:300]}")
                continue
        torch_out[name] = {"dx": dx, **({"dw": dw} if dw is not None else {})}
        row.setdefault("torch_warnings", {})[name] = sorted({str(c.message)[:200] for c in caught})
        row.setdefault("torch_out_dtype", {})[name] = str(dx.dtype).replace("torch.", "")
    torch.cuda.synchronize()
    cand_out = {b.label: {k: v for k, v in outs[b.label][0].items()} for b in builds}
    checks = compare_bwd(shape, sets[0], {**cand_out, **torch_out}, args)
    if nsets > 1:
        last = compare_bwd(shape, sets[-1], {b.label: outs[b.label][-1] for b in builds}, args)
        for label, per in last.items():
            for name, r in per.items():
                if not r["ok"] and checks[label][name]["ok"]:
                    checks[label][name] = {**r, "message": r["message"] + " (on the last input set)"}
    row["checks"] = checks
    del torch_out
    torch.cuda.empty_cache()
    for name in providers_torch:
        bad = [f"{t}: {r['message']}" for t, r in checks.get(name, {}).items() if not r["ok"]]
        if bad:  # reported, not enforced, as for the forward
            row["errors"].append(f"{name} differs from the fp64 reference: {'; '.join(bad)}")
    alive = passing_builds(builds, checks, row, key)
    for name, per in checks.items():
        print("  check " + f"{name:>14}: " + ", ".join(
            f"{t} rel_l2 {r['rel_l2']:.2e} max_abs {r['max_abs']:.2e} {'ok' if r['ok'] else 'FAIL'}"
            for t, r in per.items()), flush=True)

    # ---- timing (both kernels of a candidate's plan per step; --graph captures both launches)
    cand_steps = {b.label: (lambda plans_b: lambda i, s: run_plan(plans_b[i], s))(plans[b.label]) for b in alive}
    times = time_providers(row, cand_steps, providers_torch, nsets, args, capture_streams, optional=(AUTOGRAD,),
                           hold_outputs=args.reference_outputs == "per-set")

    # ---- the timed runs' outputs must still be right
    if alive:
        after = compare_bwd(shape, sets[0], {b.label: outs[b.label][0] for b in alive}, args)
        for b in alive:
            bad = [f"{name}: {r['message']}" for name, r in after[b.label].items() if not r["ok"]]
            if bad:
                row["failed"][b.label] = "timed outputs wrong: " + "; ".join(bad)
                row["providers"].pop(b.label, None)
    add_speedups(row, [b.label for b in alive], list(providers_torch), times)
    return row


# ---------------------------------------------------------------- environment and main

def nvidia_driver() -> Optional[str]:
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def environment(drv, args: argparse.Namespace) -> Dict[str, Any]:
    import torch
    from cuda_ctypes import version_string
    props = torch.cuda.get_device_properties(0)
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": args.commit, "gpu": props.name, "sm_count": props.multi_processor_count,
        "l2_bytes": props.L2_cache_size, "memory_bytes": props.total_memory,
        "cuda_driver_api": version_string(drv.version()), "nvidia_driver": nvidia_driver(),
        "torch": torch.__version__, "torch_cuda": torch.version.cuda, "triton": triton_version,
        "python": platform.python_version(), "mode": "graph" if args.graph else "stream",
        "samples": args.samples, "warmup_batches": args.warmup, "target_batch_ms": args.target_batch_ms,
        "pool_l2_multiple": args.pool_l2_multiple, "seed": args.seed,
        "expert": os.path.abspath(args.expert) if getattr(args, "expert", None) else None,
    }


def expert_forward(expert: Any, sets: Sequence[Dict[str, Any]], eps: float,
                   opts: Optional[Dict[str, Any]] = None) -> Callable[[int], Any]:
    """The expert's forward on input set i (its own entry, as its users call it): out, or
    (out, residual_out) with a residual."""
    if opts and opts.get("has_residual"):
        import torch
        rdt = torch.float32 if opts.get("residual_out_fp32") else None
        return lambda i: tuple(expert.rmsnorm_fwd(sets[i]["x"], sets[i].get("w"), residual=sets[i]["residual"],
                                                  residual_dtype=rdt, eps=eps)[:2])
    return lambda i: expert.rmsnorm_fwd(sets[i]["x"], sets[i].get("w"), eps=eps)[0]


def fused_add_rms_norm_torch(x, w, r, n: int, eps: float, residual_dtype=None):
    """The fused residual add as torch writes it: h = x + residual in fp32, residual_out = h in
    x's dtype (or residual_dtype), out = rms_norm(h) * w in x's dtype."""
    import torch.nn.functional as F
    h = x.float() + r.float()
    return F.rms_norm(h, (n,), w, eps).to(x.dtype), h.to(residual_dtype or x.dtype)


def torch_outputs(v: Any) -> Dict[str, Any]:
    """A torch provider's result as named outputs: out, or (out, residual_out)."""
    if isinstance(v, tuple):
        return {"out": v[0], "residual_out": v[1]}
    return {"out": v}


def load_expert(path: str) -> Any:
    """The expert RMSNorm's Python package from a checkout of its repository (docs/targets.md:
    Int21-AI/RMSNorm-H100, a package `rmsnorm` at the checkout's top that builds its CUDA
    extension with torch's loader on first use, about a minute on 16 cores). Its code is only
    measured against: it stays in that git-ignored checkout."""
    import importlib.util
    init = os.path.join(path, "rmsnorm", "__init__.py")
    if not os.path.isfile(init):
        raise BenchError(f"--expert {path}: no rmsnorm/__init__.py there (a checkout of Int21-AI/RMSNorm-H100)")
    loader = importlib.util.spec_from_file_location("rmsnorm", init,
                                                    submodule_search_locations=[os.path.dirname(init)])
    mod = importlib.util.module_from_spec(loader)
    sys.modules["rmsnorm"] = mod  # its modules import each other as rmsnorm.*
    loader.loader.exec_module(mod)
    for name in ("rmsnorm_fwd", "rmsnorm_bwd"):
        if not callable(getattr(mod, name, None)):
            raise BenchError(f"--expert {path}: its rmsnorm package has no {name}()")
    return mod


def load_exports(specs: Sequence[str], taken: set) -> Dict[str, Any]:
    """LABEL=DIR of `ptxevo export --format torch` -> its Python module, extension built (torch caches it)."""
    import importlib.util
    mods: Dict[str, Any] = {}
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or label in taken or label in mods or label in (EAGER, COMPILE, AUTOGRAD, EXPERT):
            raise BenchError(f"--export wants a new LABEL=DIR, got '{spec}'")
        files = [f for f in os.listdir(path) if f.startswith("ptxevo_") and f.endswith(".py")] if os.path.isdir(path) else []
        if len(files) != 1:
            raise BenchError(f"--export {spec}: {path} holds no single ptxevo_*.py module (ptxevo export --format torch)")
        loader = importlib.util.spec_from_file_location(f"ptxevo_export_{label}", os.path.join(path, files[0]))
        mod = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(mod)
        mod.load()
        mods[label] = mod
    return mods


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidate", action="append", required=True, metavar="LABEL=DIR",
                    help="a build dir of `ptxevo build` (repeatable)")
    ap.add_argument("--out", required=True, help="directory for results.json and results.md")
    ap.add_argument("--commit", default="unknown", help="the commit the candidates were built from")
    ap.add_argument("--samples", type=int, default=30, help="timed batches per provider (>= 30)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed batches per provider first")
    ap.add_argument("--target-batch-ms", type=float, default=1.0, help="launches per batch to last about this long")
    ap.add_argument("--pool-l2-multiple", type=float, default=2.0, help="input pool at least this many L2 sizes")
    ap.add_argument("--shapes", nargs="*", default=[], metavar="M=..,N=..", help="only these benchmark shapes")
    ap.add_argument("--max-shapes", type=int, default=0, help="only the first N benchmark shapes")
    ap.add_argument("--graph", action="store_true", help="time CUDA graph replays of each batch (no host gaps)")
    ap.add_argument("--skip-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--reference-outputs", choices=("per-set", "reused"), default="per-set",
                    help="per-set: a torch provider's result on input set i lives until its next call on set i, "
                         "so each set has its own output buffers, as the candidates' preallocated ones; reused: "
                         "dropped at once, so every call (in a graph, every replay) writes the same freed block")
    ap.add_argument("--expert", metavar="DIR",
                    help="time the expert kernel too, from a checkout of Int21-AI/RMSNorm-H100 at DIR (git-ignored; "
                         "its extension builds on first use)")
    ap.add_argument("--export", action="append", default=[], metavar="LABEL=DIR",
                    help="also time a `ptxevo export --format torch` module (its rmsnorm_fwd) in this process")
    ap.add_argument("--op", choices=OPS, help="insist on this op (default: the candidates' launch.json says)")
    ap.add_argument("--autograd", action="store_true",
                    help="backward: also time torch.autograd.grad through F.rms_norm (forward untimed)")
    ap.add_argument("--check-rows", type=int, default=8192,
                    help="backward: check dx on about this many rows in blocks spread over M (0: all); "
                         "dw is always checked over every row")
    ap.add_argument("--rel-l2", type=float, help="override the relative L2 tolerance of launch.json")
    ap.add_argument("--max-abs", type=float, help="override the normalized max-abs tolerance of launch.json")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if args.samples < 30:
        ap.error("--samples must be at least 30")
    return args


def closing_notes(opts: Dict[str, Any], args: argparse.Namespace, rows: Sequence[Dict[str, Any]]) -> List[str]:
    """The notes under the table that describe the run rather than one shape."""
    notes: List[str] = []
    notes.append("speedup = other provider's ms / candidate's ms over pairs timed in the same round "
                 "(> 1: the candidate is faster); of floor = (bytes / copy bandwidth) / median")
    if getattr(args, "reference_outputs", "per-set") == "per-set":
        notes.append("outputs: each input set has its own output buffers for every provider (candidates: "
                     "preallocated; torch providers: their result on a set lives until their next call on it)")
    else:
        notes.append("outputs: candidates write one preallocated buffer per input set; the torch providers' "
                     "results are dropped at once, so their calls (in a graph, replays) reuse one freed block")
    if opts["op"] == "rmsnorm_bwd":
        notes.append("backward: bytes = 3*M*N*2 + 4*M + 4*N (x, dout read, dx written, rstd read, dw written); "
                     "inputs x, dout ~ N(0, 1) bf16, w ~ 1 + 0.5 N(0, 1) fp32, rstd = the real fp32 rstd of x "
                     f"(eps {BWD_RSTD_EPS:g}); a candidate's step is every kernel of its launch plan, with one "
                     "dw_partial scratch per shape")
        notes.append(f"{EAGER} / {COMPILE}: the fp32 formula xhat = x*rstd, g = dout*w, c1 = mean(xhat*g), "
                     "dx = ((g - xhat*c1)*rstd).to(bf16), dw = (dout*xhat).sum(0) (QuACK's rmsnorm_bwd_ref), "
                     "eager and torch.compile(dynamic=False)")
        notes.append(f"checks: dx on about {args.check_rows or 'all'} rows per set (blocks spread over M), dw over "
                     "every row, against fp64 from the same rstd; eager/compile/autograd reported, not enforced")
        ag = sorted({r["autograd_note"] for r in rows if r.get("autograd_note")})
        if ag:
            notes += ag
        elif args.autograd:
            notes.append(f"{AUTOGRAD}: asked for but not timed on any shape (see the notes above)")
        else:
            notes.append(f"{AUTOGRAD}: not timed (--autograd): F.rms_norm's backward reads its own saved tensors "
                         "and runs as several kernels; the explicit formula is the like-for-like baseline")
    for name in (EAGER, COMPILE, AUTOGRAD, EXPERT):
        dtypes = {r.get("torch_out_dtype", {}).get(name) for r in rows} - {None}
        if dtypes:
            notes.append(f"{name} output dtype: {', '.join(sorted(dtypes))}")
    return notes


def write_results(args: argparse.Namespace, env: Dict[str, Any], builds: Sequence[BuildDir], rows: List[Dict[str, Any]],
                  notes: List[str], labels: Sequence[str], opts: Dict[str, Any]) -> str:
    """results.json and results.md in --out (after every shape, so a run cut short keeps its rows)."""
    notes = list(notes) + closing_notes(opts, args, rows)
    os.makedirs(args.out, exist_ok=True)
    result = {"environment": env, "candidates": [b.summary() for b in builds], "shapes": rows, "notes": notes}
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    md = markdown_report(env, rows, labels, notes)
    with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as f:
        f.write(md)
    return md


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        cands = [parse_candidate_arg(c) for c in args.candidate]
        labels = [l for l, _ in cands]
        if len(set(labels)) != len(labels) or set(labels) & {EAGER, COMPILE, AUTOGRAD, EXPERT}:
            raise BenchError(f"candidate labels must be distinct and not {EAGER}/{COMPILE}: {labels}")
        builds = [load_build_dir(l, p) for l, p in cands]
        check_candidates_agree(builds)
        opts = rmsnorm_options(builds[0], args.op)
        if args.export and opts["op"] != "rmsnorm_fwd":
            raise BenchError("--export times an exported rmsnorm_fwd module; it does not apply to " + opts["op"])
        keys = select_shapes(builds, args.shapes, args.max_shapes)
    except (BenchError, LaunchFormatError, ValueError) as e:
        print(f"torch_bench.py: error: {e}", file=sys.stderr)
        return 2

    try:
        import torch
    except ImportError as e:
        print(f"torch_bench.py: error: PyTorch is needed to run the benchmark ({e})", file=sys.stderr)
        return 2
    from cuda_ctypes import CudaError, Driver, Module
    if not torch.cuda.is_available():
        print("torch_bench.py: error: torch sees no CUDA GPU", file=sys.stderr)
        return 2
    torch.empty(1, device=DEVICE)  # makes torch's primary context current for the driver calls
    try:
        args.export_modules = load_exports(args.export, set(labels))
        args.expert_module = load_expert(args.expert) if args.expert else None
    except BenchError as e:
        print(f"torch_bench.py: error: {e}", file=sys.stderr)
        return 2
    drv = Driver()
    env = environment(drv, args)
    env["op"] = opts["op"]
    bw = copy_bandwidth(env["l2_bytes"])
    env["copy_bandwidth_Bps"], env["copy_bytes"] = bw["Bps"], bw["bytes"]
    print(f"{env['gpu']}, driver {env['nvidia_driver']} (CUDA {env['cuda_driver_api']}), torch {env['torch']}, "
          f"triton {env['triton']}; copy {bw['Bps'] / 1e12:.3f} TB/s; {len(keys)} shapes", flush=True)
    modules = {}
    for b in builds:
        with open(b.cubin_path, "rb") as f:
            modules[b.label] = Module(drv, f.read(), b.cubin_path)

    rows: List[Dict[str, Any]] = []
    notes: List[str] = []
    status = 0
    for key in keys:
        print(f"== {key}", flush=True)
        try:
            row = run_shape(key, builds, modules, opts, env, args)
        except CudaError as e:
            # A fault leaves the context unusable: keep what was measured and stop.
            notes.append(f"{key}: CUDA error, run stopped: {e}")
            print(f"  {key}: CUDA error, stopping: {e}", file=sys.stderr, flush=True)
            status = 1
            break
        except BenchError as e:
            notes.append(f"{key}: {e}")
            print(f"  {key}: error: {e}", file=sys.stderr, flush=True)
            status = 1
            continue
        except Exception as e:  # noqa: BLE001 -- torch errors: record the row, and stop if CUDA is broken
            traceback.print_exc()
            notes.append(f"{key}: {type(e).__name__}: {str(e)[:500]}")
            status = 1
            if "CUDA" in str(e):
                break
            continue
        finally:
            torch.cuda.empty_cache()
        for label, why in row["failed"].items():
            notes.append(f"{key}: {label} failed: {why}")
            status = 1
        for err in row["errors"]:
            notes.append(f"{key}: {err}")
            print(f"  {key}: note: {err}", flush=True)
        rows.append(row)
        for name, p in row["providers"].items():
            print(f"  {name:>14}: {p['median']:.4f} ms [{p['ci_low']:.4f}, {p['ci_high']:.4f}] "
                  f"({p['per_batch']} per batch)", flush=True)
        write_results(args, env, builds, rows, notes, labels, opts)

    md = write_results(args, env, builds, rows, notes, labels, opts)
    print(md)
    return status


if __name__ == "__main__":
    sys.exit(main())
