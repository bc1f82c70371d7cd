"""The KDA backward built by `ptxevo build` beside flash-linear-attention's chunk_kda backward, in one
process, same inputs and timer (issue "KDA backward"):

    python3 bench/kda/bwd_bench.py --backward seed=DIR [--forward chunked=DIR] --out OUTDIR \
        [--also LABEL=DIR ...] [--export-bwd DIR [--export-fwd DIR]] [--shapes 1 4 ...] [--no-fla] \
        [--ref-heads 2] [--samples 15]

DIR is a `ptxevo build` of kernels/kda/kda_bwd.spec (and, with --forward, of a kda_fwd spec with
the same options). For every benchmark shape (the six docs/targets.md scenarios):
- one input set (q, k = F.normalize(randn), v, g, beta randn bf16; A_log, dt_bias U[0, 1); the fp32
  V-first initial state; the output gradient d_out bf16 and the final-state gradient fp32);
- fp64 gradients of the first --ref-heads heads by torch autograd through the token-serial
  recurrence (docs/kda.md 1.3; the op's fused gate, beta sigmoid and L2 norms), against which ours
  and FLA's gradients are both measured (rel_l2 per gradient);
- times, round-robin with CUDA events: our backward (the build's kernels through the driver),
  FLA's backward (torch.autograd.grad over a retained chunk_kda graph), and with --forward the
  training step (forward + backward) of both.
--also adds other builds of the same kda_bwd spec (other knobs, e.g. PREP=1, or the chunked seed:
`ptxevo build kernels/kda/kda_bwd.spec --source kernels/kda/kda_bwd_chunked.cu --knobs ...`), each
checked against fp64 and timed beside the first (ratio first / it: > 1, it is faster); all builds
share one scratch buffer.
With --export-bwd (a `ptxevo export --format torch` of the same kda_bwd spec) its bwd() must give
the build's gradients bit for bit and is timed beside it; with --export-fwd too (an export of the
kda_fwd build), the autograd function of attach_forward() is checked against fp64 like FLA's
autograd and its training step timed.
Results: OUTDIR/results.json, results.md and a short table on stdout; each shape's row is written
as soon as it is measured (rows.jsonl), so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "rmsnorm"))

from bench_stats import paired_ratio, summarize  # noqa: E402
from kda_bench_core import (HEAD_DIM, BenchError, dims_of, fla_kwargs, kda_options, scenario_label,  # noqa: E402
                            scenario_number, select_shapes, sequences, shape_of, tolerance)
from launch_json import BuildDir, load_build_dir, parse_candidate_arg  # noqa: E402
from providers import Provider, time_round_robin  # noqa: E402
from torch_bench import load_exports  # noqa: E402

DEVICE = "cuda"
GRADS = ["dq", "dk", "dv", "dg", "dbeta", "dA_log", "ddt_bias", "d_initial_state"]
LEAVES = ["q", "k", "v", "g", "beta", "A_log", "dt_bias", "initial_state"]  # GRADS[i] is d LEAVES[i]


def make_inputs(shape, opts: Dict[str, Any], seed: int) -> Dict[str, Any]:
    """Forward inputs as fla_bench.py draws them, plus d_out (bf16) and d_final_state (fp32, V-first)."""
    import torch
    import torch.nn.functional as F
    B, T, H, N = dims_of(shape)
    gen = torch.Generator(device=DEVICE)
    gen.manual_seed(seed)

    def randn(*s):
        return torch.randn(*s, generator=gen, device=DEVICE, dtype=torch.float32)

    tok = (B, T, H, HEAD_DIM)
    bf16 = torch.bfloat16
    x = {"q": F.normalize(randn(*tok), dim=-1).to(bf16), "k": F.normalize(randn(*tok), dim=-1).to(bf16),
         "v": randn(*tok).to(bf16), "g": randn(*tok).to(bf16), "beta": randn(B, T, H).to(bf16),
         "A_log": torch.rand(H, generator=gen, device=DEVICE), "dt_bias": torch.rand(H, HEAD_DIM, generator=gen, device=DEVICE),
         "d_out": randn(*tok).to(bf16)}
    if opts["initial_state"]:
        x["initial_state"] = randn(N, H, HEAD_DIM, HEAD_DIM)
    if opts["final_state"]:
        x["d_final_state"] = randn(N, H, HEAD_DIM, HEAD_DIM)
    seqs = sequences(B, T, N)
    if N != B:
        x["cu_seqlens"] = torch.tensor([s for s, _ in seqs] + [T], dtype=torch.int64, device=DEVICE)
    return x


def reference_grads(x: Dict[str, Any], shape, opts: Dict[str, Any], heads: int) -> Dict[str, Any]:
    """fp64 gradients of sum(out * d_out) + sum(final_state * d_final_state) with respect to the
    raw inputs of the first `heads` heads: autograd through the token-serial recurrence, every
    sequence at once (a sequence past its end decays by 1 and writes nothing)."""
    import torch
    import torch.nn.functional as F
    f64, D = torch.float64, HEAD_DIM
    B, T, H, N = dims_of(shape)
    h = min(heads, H)
    seqs = sequences(B, T, N)
    n = len(seqs)
    cut = {"q": lambda t: t[:, :, :h], "k": lambda t: t[:, :, :h], "v": lambda t: t[:, :, :h], "g": lambda t: t[:, :, :h],
           "beta": lambda t: t[:, :, :h], "A_log": lambda t: t[:h], "dt_bias": lambda t: t[:h],
           "initial_state": lambda t: t[:, :h]}
    leaf = {k: cut[k](x[k]).detach().to(f64).requires_grad_() for k in LEAVES if k in x}

    def tok(name):
        return leaf[name].reshape(B * T, h, D)

    def l2n(t):
        return t * torch.rsqrt(t.square().sum(-1, keepdim=True) + 1e-6)

    gx = tok("g") + leaf["dt_bias"]
    A = leaf["A_log"].exp()[:, None]
    a = opts["lower_bound"] * torch.sigmoid(A * gx) if opts["gate"] == "lower_bound" else -A * F.softplus(gx)
    X = torch.stack([l2n(tok("q")), l2n(tok("k")), tok("v"), a.exp()], dim=1)  # [tokens, 4, h, D]
    b = torch.sigmoid(leaf["beta"].reshape(B * T, h))
    if "initial_state" in leaf:
        S = leaf["initial_state"].transpose(-1, -2).reshape(n * h, D, D)  # [n h, i (K), j (V)]
    else:
        S = torch.zeros(n * h, D, D, dtype=f64, device=DEVICE)
    bos = torch.tensor([s for s, _ in seqs], device=DEVICE)
    lens = torch.tensor([m for _, m in seqs], device=DEVICE)
    steps = max(m for _, m in seqs)
    t_all = torch.arange(steps, device=DEVICE)[:, None]
    idx_all = bos[None, :] + torch.minimum(t_all, (lens - 1)[None, :])
    act_all = t_all < lens[None, :]
    one = torch.ones((), dtype=f64, device=DEVICE)
    outs = []
    for t in range(steps):
        idx, act = idx_all[t], act_all[t]
        qt, kt, vt, et = X.index_select(0, idx).unbind(1)
        et = torch.where(act[:, None, None], et, one)
        bt = torch.where(act[:, None], b.index_select(0, idx), 0.0 * one)
        S = S * et.reshape(n * h, D, 1)
        k1 = kt.reshape(n * h, 1, D)
        r = vt.reshape(n * h, 1, D) - torch.bmm(k1, S)
        S = S + torch.bmm((bt.reshape(n * h, 1, 1) * k1).transpose(1, 2), r)
        outs.append(torch.bmm(qt.reshape(n * h, 1, D), S).reshape(n, h, D) * opts["scale"])
    sel = act_all.reshape(-1)
    flat = torch.stack(outs).reshape(steps * n, h, D)[sel]
    out = torch.zeros(B * T, h, D, dtype=f64, device=DEVICE).index_copy(0, idx_all.reshape(-1)[sel], flat)
    loss = (out * x["d_out"][:, :, :h].reshape(B * T, h, D).to(f64)).sum()
    if opts["final_state"]:
        loss = loss + (S.reshape(n, h, D, D).transpose(-1, -2) * x["d_final_state"][:, :h].to(f64)).sum()
    names = [k for k in LEAVES if k in leaf]
    grads = torch.autograd.grad(loss, [leaf[k] for k in names])
    return {GRADS[LEAVES.index(k)]: g for k, g in zip(names, grads)}


def head_cut(name: str, t, h: int):
    if name in ("dA_log", "ddt_bias"):
        return t[:h]
    if name == "d_initial_state":
        return t[:, :h]
    return t[:, :, :h]


def errors(grads: Dict[str, Any], ref: Dict[str, Any], shape=None) -> Dict[str, Dict[str, Any]]:
    """rel_l2 and max-abs / max(1, max |ref|) of each gradient on the reference's heads."""
    import torch
    res = {}
    for name, r in ref.items():
        h = r.shape[0] if name in ("dA_log", "ddt_bias") else (r.shape[1] if name == "d_initial_state" else r.shape[2])
        if grads.get(name) is None:
            res[name] = {"rel_l2": None, "message": "no gradient returned"}
            continue
        o = head_cut(name, grads[name], h).to(torch.float64)
        d = o - r
        rel = float(d.square().sum().sqrt() / r.square().sum().sqrt().clamp_min(1e-300))
        mx = float(d.abs().max() / max(1.0, float(r.abs().max())))
        nonfinite = int((~torch.isfinite(o)).sum())
        row = {"rel_l2": rel, "max_abs": mx, "nonfinite": nonfinite}
        if shape is not None:
            tol_rel, tol_abs = tolerance(shape.tensor(name), None, None)
            row["ok"] = nonfinite == 0 and rel <= tol_rel and mx <= tol_abs
        res[name] = row
    return res


def progress(key: str, what: str, t0: float) -> None:
    """One line per stage on stderr: a shape that runs into the caller's time limit says where."""
    print(f"[{time.monotonic() - t0:7.1f} s] {key}: {what}", file=sys.stderr, flush=True)


def fla_leaves(x: Dict[str, Any]) -> Dict[str, Any]:
    """FLA's leaf tensors: copies of the inputs needing gradients, dt_bias flat ([H * 128]: FLA's
    gradient comes back in that shape)."""
    return {k: (x[k].reshape(-1) if k == "dt_bias" else x[k]).detach().clone().requires_grad_() for k in LEAVES if k in x}


def fla_forward(fla_fn, fla_kw: Dict[str, Any], leaves: Dict[str, Any], x: Dict[str, Any]):
    """FLA's chunk_kda output and final state."""
    return fla_fn(leaves["q"], leaves["k"], leaves["v"], leaves["g"], leaves["beta"], initial_state=leaves.get("initial_state"),
                  A_log=leaves["A_log"], dt_bias=leaves["dt_bias"], cu_seqlens=x.get("cu_seqlens"), **fla_kw)[:2]


def fla_first_call(x: Dict[str, Any], opts: Dict[str, Any], fla_fn, fla_kw: Dict[str, Any]) -> float:
    """Seconds of one FLA forward + backward on these inputs (the first at a shape autotunes)."""
    import torch
    t0 = time.monotonic()
    warm = fla_leaves(x)
    o, fs = fla_forward(fla_fn, fla_kw, warm, x)
    torch.autograd.grad([o, fs] if opts["final_state"] else [o], list(warm.values()),
                        [x["d_out"], x["d_final_state"]] if opts["final_state"] else [x["d_out"]], allow_unused=True)
    torch.cuda.synchronize()
    return round(time.monotonic() - t0, 1)


def kernel_times(plan, stream: int, samples: int) -> List[Dict[str, Any]]:
    """Each kernel of a plan alone, in plan order, after the whole plan has run (its inputs, the
    workspace the kernels before it wrote, are in place): where a multi-kernel backward's time goes."""
    from providers import event_ms
    out = []
    for launch in plan:
        launch(stream)  # one untimed launch: the module's first-launch costs
        times = [event_ms((lambda q: lambda: q(stream))(launch)) for _ in range(samples)]
        out.append({"entry": launch.k.entry, "grid": list(launch.k.grid), **summarize(times)})
    return out


def timed(name: str, step) -> Provider:
    """A provider of one call per timed sample: every call moves gigabytes, far over the L2, and
    runs for milliseconds, so one input set and no batching."""
    return Provider(name, lambda i, stream: step(), 1)


def export_bwd_call(mod, x: Dict[str, Any], opts: Dict[str, Any]):
    return mod.bwd(x["q"], x["k"], x["v"], x["g"], x["beta"], opts["scale"], x["A_log"], x["dt_bias"],
                   opts["lower_bound"], x["d_out"], x.get("initial_state"), x.get("d_final_state"), x.get("cu_seqlens"))


def run_shape(key: str, bwd: BuildDir, fwd: Optional[BuildDir], modules: Dict[str, Any], opts: Dict[str, Any],
              fla_fn, fla_kw: Dict[str, Any], args: argparse.Namespace) -> Dict[str, Any]:
    import torch
    from cuda_ctypes import prepare_plan, run_plan
    shape = shape_of(bwd, key)
    B, T, H, N = dims_of(shape)
    row: Dict[str, Any] = {"shape": key, "scenario": scenario_number(shape, opts), "label": scenario_label(shape),
                           "errors": {}, "providers": {}, "ratios": {}, "notes": []}
    t_shape = time.monotonic()
    x = make_inputs(shape, opts, args.seed)
    progress(key, "inputs drawn", t_shape)
    if fla_fn is not None:
        # FLA's first backward at a shape autotunes its Triton kernels: done here, before any of our
        # buffers exist, and timed on its own (twice on an 80 GB H100 it did not finish in 200 s
        # when it came after six builds' buffers).
        try:
            row["fla_warmup_s"] = fla_first_call(x, opts, fla_fn, fla_kw)
            progress(key, f"FLA warmed up (first forward + backward) in {row['fla_warmup_s']} s", t_shape)
        except Exception as e:  # noqa: BLE001 -- the FLA block below reports it again
            row["notes"].append(f"FLA warm-up failed: {type(e).__name__}: {str(e)[:300]}")

    # Scratch (the kda_bwd workspace: 10-17 GB at scenario 1 by the build's knobs) is one buffer
    # per (name, dtype), as large as the largest build's, for every build: the providers run one at
    # a time and each writes its scratch before reading it (the gate's poisoned runs check that),
    # so six builds fit an 80 GB H100.
    dtypes = {"f64": torch.float64, "f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
              "i64": torch.int64, "i32": torch.int32, "u8": torch.uint8}
    scratch_numel: Dict[Any, int] = {}
    for b in [bwd] + list(modules.get("also", [])) + ([fwd] if fwd is not None else []):
        for t in shape_of(b, key).tensors:
            if t.role == "scratch":
                scratch_numel[(t.name, t.dtype)] = max(scratch_numel.get((t.name, t.dtype), 0), math.prod(t.shape))
    scratch: Dict[Any, Any] = {}

    def poisoned(v):  # NaN, or all bits set
        return v.fill_(float("nan") if v.is_floating_point() else (255 if v.dtype == torch.uint8 else -1))

    def alloc(s, skip):  # outputs and scratch, poisoned
        out = {}
        for t in s.tensors:
            if t.role == "in" or t.name in skip:
                continue
            if t.role == "scratch":
                k = (t.name, t.dtype)
                if k not in scratch:
                    scratch[k] = poisoned(torch.empty(scratch_numel[k], device=DEVICE, dtype=dtypes[t.dtype]))
                out[t.name] = scratch[k][:math.prod(t.shape)].view(t.shape)
                continue
            out[t.name] = poisoned(torch.empty(t.shape, device=DEVICE, dtype=dtypes[t.dtype]))
        return out

    bo = alloc(shape, ())
    plan = prepare_plan(modules["bwd"], shape.kernels, {**{k: v.data_ptr() for k, v in x.items()},
                                                         **{k: v.data_ptr() for k, v in bo.items()}})
    stream = torch.cuda.current_stream().cuda_stream
    ours = lambda: run_plan(plan, stream)  # noqa: E731
    ours()
    torch.cuda.synchronize()
    progress(key, f"{bwd.label} ran", t_shape)
    t0 = time.monotonic()
    ref = reference_grads(x, shape, opts, args.ref_heads)
    torch.cuda.synchronize()
    progress(key, "fp64 reference done", t_shape)
    row["reference"] = {"heads": min(args.ref_heads, H), "seconds": round(time.monotonic() - t0, 1)}
    row["errors"][bwd.label] = errors(bo, ref, shape)
    bad = [n for n, e in row["errors"][bwd.label].items() if not e.get("ok")]
    providers = [] if bad else [timed(bwd.label, ours)]
    if bad:
        row["notes"].append(f"{bwd.label} outside the gate's tolerance on {bad}: not timed")
    elif args.per_kernel:
        row["kernels"] = {bwd.label: kernel_times(plan, stream, args.per_kernel)}

    fwd_step = None
    if fwd is not None:
        fs = shape_of(fwd, key)
        fo = alloc(fs, ())
        fplan = prepare_plan(modules["fwd"], fs.kernels, {**{k: v.data_ptr() for k, v in x.items()},
                                                           **{k: v.data_ptr() for k, v in fo.items()}})
        fwd_step = lambda: run_plan(fplan, stream)  # noqa: E731
        if not bad:
            providers.append(timed(f"{fwd.label}+{bwd.label}", lambda: (fwd_step(), ours())))

    also_outs = {}
    for b in modules.get("also", []):
        so = alloc(shape_of(b, key), ())
        pl = prepare_plan(modules[f"also:{b.label}"], shape_of(b, key).kernels,
                          {**{k: v.data_ptr() for k, v in x.items()}, **{k: v.data_ptr() for k, v in so.items()}})
        run_plan(pl, stream)
        torch.cuda.synchronize()
        row["errors"][b.label] = errors(so, ref, shape)
        progress(key, f"{b.label} ran and was checked", t_shape)
        if all(e.get("ok") for e in row["errors"][b.label].values()):
            providers.append(timed(b.label, (lambda q: lambda: run_plan(q, stream))(pl)))
            also_outs[b.label] = so
            if args.per_kernel:
                row.setdefault("kernels", {})[b.label] = kernel_times(pl, stream, args.per_kernel)
        else:
            row["notes"].append(f"{b.label} outside the gate's tolerance: not timed")

    ex_bwd, ex_fwd = modules.get("export_bwd"), modules.get("export_fwd")
    if ex_bwd is not None and not bad:
        got = dict(zip(GRADS, export_bwd_call(ex_bwd, x, opts)))
        torch.cuda.synchronize()
        row["export_bit_equal"] = {n: bool(torch.equal(got[n], bo[n])) for n in GRADS if got.get(n) is not None and n in bo}
        del got
        progress(key, "export_bwd ran and was compared", t_shape)
        providers.append(timed("export_bwd", lambda: export_bwd_call(ex_bwd, x, opts)))
        if ex_fwd is not None:
            kda = ex_bwd.attach_forward(ex_fwd)
            mine = {k: x[k].detach().clone().requires_grad_() for k in LEAVES if k in x}
            _, _, _, N = dims_of(shape)
            longest = max(m for _, m in sequences(B, T, N))

            def autograd_step(retain=False):
                o, s = kda(mine["q"], mine["k"], mine["v"], mine["g"], mine["beta"], mine["A_log"], mine["dt_bias"],
                           opts["scale"], opts["lower_bound"], mine.get("initial_state"), opts["final_state"],
                           x.get("cu_seqlens"), longest)
                outs, gouts = [o], [x["d_out"]]
                if opts["final_state"]:
                    outs.append(s)
                    gouts.append(x["d_final_state"])
                return torch.autograd.grad(outs, list(mine.values()), gouts, allow_unused=True)
            ag = dict(zip([GRADS[LEAVES.index(k)] for k in mine], autograd_step()))
            row["errors"]["autograd"] = errors(ag, ref)
            progress(key, "autograd step ran and was checked", t_shape)
            del ag
            providers.append(timed("autograd_step", autograd_step))

    if fla_fn is not None:
        leaves = fla_leaves(x)
        names = list(leaves)
        try:
            t0 = time.monotonic()
            o, s = fla_forward(fla_fn, fla_kw, leaves, x)
            outs_, gouts = [o], [x["d_out"]]
            if opts["final_state"]:
                outs_.append(s)
                gouts.append(x["d_final_state"])
            g = torch.autograd.grad(outs_, [leaves[k] for k in names], gouts, retain_graph=True, allow_unused=True)
            torch.cuda.synchronize()
            row["fla_first_call_s"] = round(time.monotonic() - t0, 1)
            fg = {GRADS[LEAVES.index(k)]: (v.reshape(H, HEAD_DIM) if k == "dt_bias" and v is not None else v)
                  for k, v in zip(names, g)}
            row["errors"]["fla"] = errors(fg, ref)
            progress(key, "FLA ran and was checked", t_shape)
            del fg, g
            providers.append(timed("fla", lambda: torch.autograd.grad(outs_, [leaves[k] for k in names], gouts, retain_graph=True,
                                                                  allow_unused=True)))
            if fwd is not None:
                def fla_step():
                    o2, s2 = fla_forward(fla_fn, fla_kw, leaves, x)
                    torch.autograd.grad([o2, s2] if opts["final_state"] else [o2], [leaves[k] for k in names], gouts,
                                        allow_unused=True)
                providers.append(timed("fla_fwd+fla", fla_step))
        except Exception as e:  # noqa: BLE001 -- FLA's failure is reported; ours is still timed
            row["notes"].append(f"FLA failed: {type(e).__name__}: {str(e)[:300]}")
    if providers:
        progress(key, f"timing {len(providers)} providers, {args.samples} samples", t_shape)
        times = time_round_robin(providers, args.samples, args.warmup)
        progress(key, "timed", t_shape)
        for p in providers:
            row["providers"][p.name] = summarize(times[p.name])
        if bwd.label in times and "fla" in times:
            row["ratios"]["fla_bwd_over_ours"] = paired_ratio(times["fla"], times[bwd.label])
        step = f"{fwd.label}+{bwd.label}" if fwd is not None else None
        if step in times and "fla_fwd+fla" in times:
            row["ratios"]["fla_step_over_ours"] = paired_ratio(times["fla_fwd+fla"], times[step])
        if "autograd_step" in times and "fla_fwd+fla" in times:
            row["ratios"]["fla_step_over_autograd"] = paired_ratio(times["fla_fwd+fla"], times["autograd_step"])
        for label in also_outs:
            if label in times and bwd.label in times:
                row["ratios"][f"first_over_{label}"] = paired_ratio(times[bwd.label], times[label])
            if label in times and "fla" in times:
                row["ratios"][f"fla_bwd_over_{label}"] = paired_ratio(times["fla"], times[label])
        if "export_bwd" in times and bwd.label in times:
            row["ratios"]["build_over_export"] = paired_ratio(times[bwd.label], times["export_bwd"])
        if bwd.label in times:  # the timed outputs must still be right
            again = errors(bo, ref, shape)
            if any(not e.get("ok") for e in again.values()):
                row["notes"].append(f"{bwd.label}'s timed outputs were wrong: {again}")
    return row


def table(rows: Sequence[Dict[str, Any]], bwd_label: str) -> str:
    def f(v, d=3):
        return "-" if v is None else f"{v:.{d}f}"

    def e(v):
        return "-" if v is None else f"{v:.2e}"
    lines = ["| # | shape | ours bwd ms | FLA bwd ms | FLA/ours bwd | step ours ms | step FLA ms | FLA/ours step "
             "| worst rel_l2 ours | worst rel_l2 FLA |", "|" + "---|" * 10]
    for r in rows:
        p = r["providers"]
        step = next((k for k in p if k.endswith("+" + bwd_label)), None)
        worst = {who: max((e["rel_l2"] for e in r["errors"].get(who, {}).values() if e.get("rel_l2") is not None),
                          default=None) for who in (bwd_label, "fla")}
        lines.append(f"| {r['scenario'] or ''} | {r['label']} | {f(p.get(bwd_label, {}).get('median'))} | "
                     f"{f(p.get('fla', {}).get('median'))} | {f(r['ratios'].get('fla_bwd_over_ours', {}).get('ratio'), 2)} | "
                     f"{f(p.get(step, {}).get('median') if step else None)} | {f(p.get('fla_fwd+fla', {}).get('median'))} | "
                     f"{f(r['ratios'].get('fla_step_over_ours', {}).get('ratio'), 2)} | "
                     f"{e(worst[bwd_label])} | {e(worst['fla'])} |")
    for r in rows:
        for k, v in r["ratios"].items():
            if k.startswith("first_over_"):
                label = k[len("first_over_"):]
                worst = max((x["rel_l2"] for x in r["errors"].get(label, {}).values() if x.get("rel_l2") is not None),
                            default=None)
                lines.append(f"\n{r['label']}: {label} {f(r['providers'].get(label, {}).get('median'))} ms, "
                             f"{bwd_label} / {label} {f(v.get('ratio'), 3)}, worst rel_l2 {e(worst)}")
        if "export_bit_equal" in r:
            eq = r["export_bit_equal"]
            ratio = r["ratios"].get("build_over_export", {}).get("ratio")
            lines.append(f"\n{r['label']}: export bwd() bit-equal to the build on {sum(eq.values())}/{len(eq)} gradients; "
                         f"build/export time {f(ratio, 3)}")
        if "autograd" in r["errors"]:
            worst = max((e["rel_l2"] for e in r["errors"]["autograd"].values() if e.get("rel_l2") is not None), default=None)
            lines.append(f"{r['label']}: autograd (exported fwd + bwd) worst rel_l2 {e(worst)}; FLA step / autograd step "
                         f"{f(r['ratios'].get('fla_step_over_autograd', {}).get('ratio'), 2)}")
    for r in rows:
        for label, ks in r.get("kernels", {}).items():
            total = sum(k["median"] for k in ks) or 1.0
            lines.append(f"\n{r['label']}: {label} kernel by kernel (median ms, share of their sum): " +
                         ", ".join(f"{k['entry']} {k['median']:.3f} ({100 * k['median'] / total:.0f}%)" for k in ks))
    ratios = [r["ratios"]["fla_bwd_over_ours"]["ratio"] for r in rows if "fla_bwd_over_ours" in r["ratios"]]
    steps = [r["ratios"]["fla_step_over_ours"]["ratio"] for r in rows if "fla_step_over_ours" in r["ratios"]]
    gm = lambda v: math.exp(sum(math.log(a) for a in v) / len(v))  # noqa: E731
    if ratios:
        lines.append(f"\nGeomean FLA/ours, backward: {gm(ratios):.3f} over {len(ratios)} shapes")
    if steps:
        lines.append(f"Geomean FLA/ours, forward + backward step: {gm(steps):.3f} over {len(steps)} shapes")
    return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backward", required=True, metavar="LABEL=DIR", help="a `ptxevo build` of a kda_bwd spec")
    ap.add_argument("--forward", metavar="LABEL=DIR", help="a `ptxevo build` of kda_fwd with the same options (step timing)")
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=DIR",
                    help="another build of the same kda_bwd spec, timed beside the first (repeatable)")
    ap.add_argument("--export-bwd", metavar="DIR", help="`ptxevo export --format torch` of the same kda_bwd spec")
    ap.add_argument("--export-fwd", metavar="DIR", help="`ptxevo export --format torch` of kda_fwd (needs --export-bwd)")
    ap.add_argument("--out", required=True, help="results folder")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--shapes", nargs="*", default=[], help="scenario numbers 1-6 or shape keys (default: all)")
    ap.add_argument("--no-fla", action="store_true")
    ap.add_argument("--ref-heads", type=int, default=2, help="heads the fp64 reference covers")
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fla-warmup-only", action="store_true",
                    help="only FLA's first forward + backward per shape (its autotuning, cached on disk with "
                         "FLA_CACHE_RESULTS=1), in a process holding nothing else; prints the seconds")
    ap.add_argument("--per-kernel", type=int, default=0, metavar="SAMPLES",
                    help="also time each kernel of every build's plan alone, SAMPLES times (0: no)")
    return ap.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    import torch
    from cuda_ctypes import Driver, Module, version_string
    os.makedirs(args.out, exist_ok=True)
    torch.zeros(1, device=DEVICE)  # torch's primary context, current before the driver API loads modules
    bwd = load_build_dir(*parse_candidate_arg(args.backward))
    opts = kda_options(bwd, "kda_bwd")
    fwd = load_build_dir(*parse_candidate_arg(args.forward)) if args.forward else None
    if fwd is not None and (kda_options(fwd) != opts):
        raise BenchError(f"{fwd.label} was built with options {fwd.config}, {bwd.label} with {bwd.config}")
    keys = select_shapes([bwd], args.shapes, 0)
    drv = Driver()
    modules = {"bwd": Module(drv, open(bwd.cubin_path, "rb").read(), bwd.cubin_path)}
    if fwd is not None:
        modules["fwd"] = Module(drv, open(fwd.cubin_path, "rb").read(), fwd.cubin_path)
    also = [load_build_dir(*parse_candidate_arg(a)) for a in args.also]
    for b in also:
        if kda_options(b, "kda_bwd") != opts:
            raise BenchError(f"{b.label} was built with options {b.config}, {bwd.label} with {bwd.config}")
        if b.label in (bwd.label, "fla", "export_bwd", "autograd_step"):
            raise BenchError(f"--also label '{b.label}' is taken")
        modules[f"also:{b.label}"] = Module(drv, open(b.cubin_path, "rb").read(), b.cubin_path)
    modules["also"] = also
    if args.export_fwd and not args.export_bwd:
        raise BenchError("--export-fwd pairs with --export-bwd")
    exports = load_exports([f"export_bwd={args.export_bwd}"] + ([f"export_fwd={args.export_fwd}"] if args.export_fwd else []),
                           set()) if args.export_bwd else {}
    modules.update(exports)
    fla_fn, fla_kw, fla_note = None, {}, None
    if not args.no_fla:
        os.environ.setdefault("FLA_FLASH_KDA", "0")
        try:
            import inspect
            import fla
            from fla.ops.kda import chunk_kda
            fla_fn, fla_kw = chunk_kda, fla_kwargs(opts, inspect.signature(chunk_kda).parameters)
            fla_note = f"flash-linear-attention {getattr(fla, '__version__', '?')}"
        except Exception as e:  # noqa: BLE001
            fla_note = f"FLA not loaded: {type(e).__name__}: {str(e)[:300]}"
    props = torch.cuda.get_device_properties(0)
    env = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "commit": args.commit,
           "gpu": props.name, "driver_api": version_string(drv.version()), "torch": torch.__version__,
           "torch_cuda": torch.version.cuda, "fla": fla_note, "backward": bwd.summary(),
           "forward": fwd.summary() if fwd else None, "ref_heads": args.ref_heads, "samples": args.samples}
    print(json.dumps({k: env[k] for k in ("date", "commit", "gpu", "driver_api", "torch", "fla")}), flush=True)
    if args.fla_warmup_only:
        if fla_fn is None:
            raise BenchError(f"--fla-warmup-only: {fla_note or 'FLA is off (--no-fla)'}")
        for key in keys:
            x = make_inputs(shape_of(bwd, key), opts, args.seed)
            print(f"{key}: FLA first forward + backward {fla_first_call(x, opts, fla_fn, fla_kw)} s", flush=True)
            del x
            torch.cuda.empty_cache()
        return 0
    rows = []
    with open(os.path.join(args.out, "rows.jsonl"), "w") as jl:
        for key in keys:
            t0 = time.monotonic()
            try:
                row = run_shape(key, bwd, fwd, modules, opts, fla_fn, fla_kw, args)
            except torch.cuda.OutOfMemoryError as e:
                row = {"shape": key, "scenario": None, "label": key, "errors": {}, "providers": {}, "ratios": {},
                       "notes": [f"out of memory: {str(e)[:200]}"]}
                torch.cuda.empty_cache()
            row["seconds"] = round(time.monotonic() - t0, 1)
            rows.append(row)
            jl.write(json.dumps(row) + "\n")
            jl.flush()
            print(f"{key}: {json.dumps({k: row[k] for k in ('providers', 'ratios', 'notes', 'seconds')})[:600]}", flush=True)
            torch.cuda.empty_cache()
    text = table(rows, bwd.label)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"environment": env, "rows": rows}, f, indent=1)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(f"# KDA backward: {bwd.label} beside FLA's chunk_kda backward\n\n{json.dumps(env)}\n\n{text}\n")
    print(text)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"bwd_bench: {e}", file=sys.stderr)
        sys.exit(2)
