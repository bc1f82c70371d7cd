#!/usr/bin/env python3
"""KDA forward candidates built by `ptxevo build` against flash-linear-attention's chunk_kda,
side by side on one GPU.

    python3 bench/kda/fla_bench.py --candidate chunked=DIR1 --candidate recurrent=DIR2 --out OUTDIR \
        [--export exported=DIR3] [--commit SHA] [--samples 30] [--budget-s 225] [--shapes 1 4 ...] [--no-fla]
        [--fla-safe-gate]

For every benchmark shape of the candidates' launch.json (kernels/kda/kda_fwd.spec: the six
docs/targets.md scenarios), on the same inputs (docs/kda.md 3.5: q, k normalised randn, v, g, beta randn,
bf16; A_log, dt_bias U[0, 1); fp32 V-first initial state; cu_seqlens for packed shapes): run each
candidate (cubin through the driver API) and FLA's chunk_kda with the op's flags, check all of
them against an fp64 recurrent reference computed on the GPU and the candidates against FLA, then
time them interleaved round-robin with CUDA events. An --export (the module of `ptxevo export --format
torch`, called through its FlashKDA-style fwd) is checked and timed beside them. Writes results.json and results.md to --out
after every shape. README.md beside this says more.

A preflight process first runs each candidate once per shape (a kernel that faults or hangs is
caught there) and calls FLA once per shape (Triton autotunes and compiles into its disk cache,
which the main process then reuses), within the time budget.

torch is imported inside functions, so the pure parts can be imported and tested without it.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import json
import os
import platform
import queue
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "rmsnorm"))

from bench_stats import paired_ratio, pool_sets, sets_that_fit, summarize  # noqa: E402
from kda_bench_core import (HEAD_DIM, BenchError, Preflight,  # noqa: E402
                            check_candidates_agree, check_shape, child_deadline, cu_seqlens, dims_of,
                            enough_time, fla_kwargs, format_event, kda_options, scenario_label,
                            scenario_number, select_shapes, sequences, shape_of, tolerance)
from kda_report import FLA, FLA_SAFE, markdown_report, short_table  # noqa: E402
from launch_json import BuildDir, LaunchFormatError, ShapeSpec, load_build_dir, parse_candidate_arg  # noqa: E402
from providers import Provider, calibrate, time_round_robin  # noqa: E402
from rmsnorm_checks import ErrorAcc  # noqa: E402
from torch_bench import load_exports, nvidia_driver  # noqa: E402

DEVICE = "cuda"  # the tests run the torch parts on "cpu"


class Terminated(BaseException):
    """SIGTERM (the outer `timeout`): write what was measured and stop."""


# ---------------------------------------------------------------- inputs, reference, checks

def torch_dtype(name: str):
    import torch
    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "f64": torch.float64,
            "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8}[name]


def cu_tensor(shape: ShapeSpec):
    """cu_seqlens of a packed shape as an int64 tensor (one per shape, shared by all input sets,
    as a model shares it across layers: FLA caches its chunk indices by tensor identity)."""
    import torch
    B, T, H, N = dims_of(shape)
    cu = cu_seqlens(B, T, N)
    return None if cu is None else torch.tensor(cu, dtype=torch.int64, device=DEVICE)


def make_inputs(shape: ShapeSpec, opts: Dict[str, Any], seed: int, cu) -> Dict[str, Any]:
    """One input set (docs/kda.md 3.5, FlashKDA's benchmark): q, k = F.normalize(randn) and v, g,
    beta = randn, bf16; A_log ~ U[0, 1) [H]; dt_bias ~ U[0, 1) [H, 128]; initial state randn fp32,
    V-first [N, H, 128, 128] (FlashKDA's arange values would be meaningless for the checks)."""
    import torch
    import torch.nn.functional as F
    B, T, H, N = dims_of(shape)
    g = torch.Generator(device=DEVICE)
    g.manual_seed(seed)
    bf16 = torch.bfloat16

    def randn(*s):
        return torch.randn(*s, generator=g, device=DEVICE, dtype=torch.float32)

    def rand(*s):
        return torch.rand(*s, generator=g, device=DEVICE, dtype=torch.float32)

    tok = (B, T, H, HEAD_DIM)
    out = {"q": F.normalize(randn(*tok), dim=-1).to(bf16), "k": F.normalize(randn(*tok), dim=-1).to(bf16),
           "v": randn(*tok).to(bf16), "g": randn(*tok).to(bf16), "beta": randn(B, T, H).to(bf16),
           "A_log": rand(H), "dt_bias": rand(H, HEAD_DIM)}
    if cu is not None:
        out["cu_seqlens"] = cu
    if opts["initial_state"]:
        out["initial_state"] = randn(N, H, HEAD_DIM, HEAD_DIM)
    return out


def poisoned_outputs(shape: ShapeSpec) -> Dict[str, Any]:
    import torch
    outs = {}
    for t in shape.tensors:
        if t.role in ("out", "inout", "scratch"):
            v = torch.empty(t.shape, device=DEVICE, dtype=torch_dtype(t.dtype))
            v.fill_(float("nan") if v.is_floating_point() else -1)
            outs[t.name] = v
    return outs


def kda_reference(inp: Dict[str, Any], shape: ShapeSpec, opts: Dict[str, Any], heads: int = 0,
                  seqs: Optional[List[Tuple[int, int]]] = None) -> Dict[str, Any]:
    """fp64 `out` [B, T, h, 128] and V-first `final_state` [N, h, 128, 128] of the first h heads
    (h = heads, all when 0): the token-serial recurrence of docs/kda.md 1.3 (kernels/kda/kda_reference.cpp)
    with the gate, sigmoid and L2 norms in fp64, every sequence and head at once, one step per
    token position (a sequence past its end decays by 1 and writes nothing, so its state stays).
    `seqs` ((first token, length) per sequence) replaces the shape's own sequences (its length set)."""
    import torch
    import torch.nn.functional as F
    f64 = torch.float64
    B, T, H, N = dims_of(shape)
    h = H if heads <= 0 else min(heads, H)
    D = HEAD_DIM
    seqs = seqs if seqs is not None else sequences(B, T, N)
    n = len(seqs)

    def tok(name):
        return inp[name][:, :, :h].reshape(B * T, h, D).to(f64)

    def l2n(x):
        return x * torch.rsqrt(x.square().sum(-1, keepdim=True) + 1e-6)

    x = tok("g") + inp["dt_bias"][:h].to(f64)
    A = inp["A_log"][:h].to(f64).exp()[:, None]
    if opts["gate"] == "lower_bound":
        a = opts["lower_bound"] * torch.sigmoid(A * x)
    else:
        a = -A * F.softplus(x, beta=1.0, threshold=20.0)
    # [tokens, 4, h, D]: q, k (normalised), v and the decay factors e^a, gathered once a step
    X = torch.stack([l2n(tok("q")), l2n(tok("k")), tok("v"), a.exp()], dim=1)
    del x, a
    b = torch.sigmoid(inp["beta"][:, :, :h].reshape(B * T, h).to(f64))
    if opts["initial_state"]:
        S = inp["initial_state"][:, :h].to(f64).transpose(-1, -2).contiguous()  # [n, h, i (K), j (V)]
    else:
        S = torch.zeros(n, h, D, D, dtype=f64, device=DEVICE)
    S = S.reshape(n * h, D, D)
    out = torch.zeros(B * T, h, D, dtype=f64, device=DEVICE)
    bos = torch.tensor([s for s, _ in seqs], dtype=torch.int64, device=DEVICE)
    lens = torch.tensor([m for _, m in seqs], dtype=torch.int64, device=DEVICE)
    steps = max(m for _, m in seqs)
    t_all = torch.arange(steps, dtype=torch.int64, device=DEVICE)[:, None]
    idx_all = bos[None, :] + torch.minimum(t_all, (lens - 1)[None, :])  # [steps, n]
    act_all = t_all < lens[None, :]
    one = torch.ones((), dtype=f64, device=DEVICE)
    scale = float(opts["scale"])
    for t in range(steps):
        idx, act = idx_all[t], act_all[t]
        qt, kt, vt, et = X.index_select(0, idx).unbind(1)  # each [n, h, D]
        et = torch.where(act[:, None, None], et, one)
        bt = torch.where(act[:, None], b.index_select(0, idx), 0.0 * one)
        S.mul_(et.reshape(n * h, D, 1))  # decay the key rows
        k1 = kt.reshape(n * h, 1, D)
        r = vt.reshape(n * h, 1, D) - torch.bmm(k1, S)  # residual against the decayed state
        S.baddbmm_((bt.reshape(n * h, 1, 1) * k1).transpose(1, 2), r)  # rank-1 write
        o = torch.bmm(qt.reshape(n * h, 1, D), S) * scale  # read after the update
        out.index_copy_(0, idx, o.reshape(n, h, D))
    ref = {"out": out.reshape(B, T, h, D)}
    if opts["final_state"]:
        ref["final_state"] = S.reshape(n, h, D, D).transpose(-1, -2)
    return ref


def head_slice(name: str, t, h: int):
    """The first h heads of an output (out [B, T, H, D], final_state [N, H, D, D])."""
    return t[:, :, :h] if name == "out" else t[:, :h]


def check_against(shape: ShapeSpec, outs: Dict[str, Any], ref: Dict[str, Any],
                  args: argparse.Namespace) -> Dict[str, Dict[str, Any]]:
    """One provider's outputs against the fp64 reference (which may cover the first heads only),
    with the gate's tolerances from launch.json."""
    res = {}
    for name, r in ref.items():
        h = r.shape[2] if name == "out" else r.shape[1]
        acc = ErrorAcc()
        if name not in outs or outs[name] is None:
            res[name] = {"rel_l2": float("nan"), "max_abs": float("nan"), "nonfinite": 0, "ok": False,
                         "message": f"no {name} returned"}
            continue
        acc.add(head_slice(name, outs[name], h), r)
        res[name] = acc.result(*tolerance(shape.tensor(name), args.rel_l2, args.max_abs))
    return res


def rel_l2(x, ref) -> float:
    """RMSE(x - ref) / RMS(ref) over all elements (non-finite elements of x make it inf)."""
    acc = ErrorAcc()
    acc.add(x, ref.double())
    return float("inf") if acc.nonfinite else acc.result(float("inf"), float("inf"))["rel_l2"]


def nonfinite(outs: Dict[str, Any]) -> int:
    import torch
    return sum(int((~torch.isfinite(v)).sum()) for v in outs.values() if v.is_floating_point())


# ---------------------------------------------------------------- flash-linear-attention

class Fla:
    """flash-linear-attention's chunk_kda, imported once; `error` says why it is not there."""

    def __init__(self) -> None:
        self.fn: Optional[Callable[..., Any]] = None
        self.version: Optional[str] = None
        self.error: Optional[str] = None
        self.params: List[str] = []

    def load(self) -> bool:
        if self.fn is not None or self.error is not None:
            return self.fn is not None
        # The FlashKDA backend (FLA's dispatch, docs/kda.md 4.2) would replace the Triton path if the
        # flash_kda package were importable; this benchmark times the Triton path.
        os.environ.setdefault("FLA_FLASH_KDA", "0")
        try:
            import fla
            from fla.ops.kda import chunk_kda
            self.fn, self.version = chunk_kda, getattr(fla, "__version__", "unknown")
            self.params = list(inspect.signature(chunk_kda).parameters)
        except Exception as e:  # noqa: BLE001 -- any failure to import is reported, ours still run
            self.error = f"{type(e).__name__}: {str(e)[:400]}"
        return self.fn is not None

    def call(self, inp: Dict[str, Any], kw: Dict[str, Any]) -> Tuple[Any, Any]:
        import torch
        with torch.inference_mode():
            o, s = self.fn(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"],
                           initial_state=inp.get("initial_state"), A_log=inp["A_log"], dt_bias=inp["dt_bias"],
                           cu_seqlens=inp.get("cu_seqlens"), **kw)[:2]
        return o, s


def fla_names(args: argparse.Namespace) -> List[str]:
    if args.no_fla:
        return []
    return [FLA, FLA_SAFE] if args.fla_safe_gate else [FLA]


def fla_kw_for(name: str, opts: Dict[str, Any], fla: Fla) -> Dict[str, Any]:
    return fla_kwargs(opts, fla.params, safe_gate=(name == FLA_SAFE))


def context_alive() -> bool:
    import torch
    try:
        torch.cuda.synchronize()
        torch.ones(1, device=DEVICE).add_(1).item()
        return True
    except Exception:  # noqa: BLE001
        return False


# ---------------------------------------------------------------- the preflight process

def emit(kind: str, *fields: Any) -> None:
    print(format_event(kind, *fields), flush=True)


def child_main(args: argparse.Namespace, plan: Dict[str, Any]) -> int:
    """Runs each planned candidate once on every shape, then FLA once per planned shape
    (autotuning and compiling into Triton's disk cache); one event per step on stdout."""
    emit("start")
    import torch
    from cuda_ctypes import Driver, Module, prepare_plan, run_plan
    builds = [load_build_dir(l, p) for l, p in (parse_candidate_arg(c) for c in args.candidate)]
    opts = kda_options(builds[0])
    by_label = {b.label: b for b in builds}
    torch.empty(1, device=DEVICE)
    alive = [l for l in plan["candidates"] if l in by_label]
    modules: Dict[str, Any] = {}
    if alive:
        drv = Driver()
        for l in list(alive):
            try:
                with open(by_label[l].cubin_path, "rb") as f:
                    modules[l] = Module(drv, f.read(), by_label[l].cubin_path)
            except Exception as e:  # noqa: BLE001
                emit("cand_fail", l, "-", f"cannot load the cubin: {e}")
                alive.remove(l)
    stream = torch.cuda.current_stream().cuda_stream
    # every candidate on every shape first (a few seconds), then FLA's warm-up (minutes)
    for key in plan["keys"] if alive else []:
        shape = shape_of(builds[0], key)
        inp = make_inputs(shape, opts, args.seed * 1000003, cu_tensor(shape))
        for l in list(alive):
            outs = poisoned_outputs(shape)
            ptrs = {**{k: v.data_ptr() for k, v in inp.items()}, **{k: v.data_ptr() for k, v in outs.items()}}
            emit("cand_start", l, key)
            try:
                run_plan(prepare_plan(modules[l], shape_of(by_label[l], key).kernels, ptrs), stream)
                torch.cuda.synchronize()
                emit("cand_ok", l, key)
            except Exception as e:  # noqa: BLE001
                emit("cand_fail", l, key, f"{type(e).__name__}: {str(e)[:300]}")
                alive.remove(l)
                if not context_alive():
                    return 3
            del outs
        del inp
        torch.cuda.empty_cache()
    fla = Fla()
    for key in plan["keys"]:
        want_fla = [f for f in plan["fla"] if f.endswith("@" + key)]
        if not want_fla:
            continue
        if fla.fn is None:
            emit("fla_import_start")
            if not fla.load():
                emit("fla_import_fail", fla.error)
                break
            emit("fla_import_ok", fla.version)
        shape = shape_of(builds[0], key)
        inp = make_inputs(shape, opts, args.seed * 1000003, cu_tensor(shape))
        for f in want_fla:
            name = f.split("@", 1)[0]
            emit("fla_start", f)
            t0 = time.monotonic()
            try:
                fla.call(inp, fla_kw_for(name, opts, fla))
                torch.cuda.synchronize()
                emit("fla_ok", f, f"{time.monotonic() - t0:.1f}")
            except Exception as e:  # noqa: BLE001
                emit("fla_fail", f, f"{type(e).__name__}: {str(e)[:300]}")
                if not context_alive():
                    return 3
        del inp
        torch.cuda.empty_cache()
    emit("done")
    return 0


def child_command(argv: Sequence[str], plan: Dict[str, Any]) -> List[str]:
    """The preflight process: this script with the same arguments and the plan."""
    return [sys.executable, os.path.abspath(__file__)] + list(argv) + ["--preflight-child", json.dumps(plan)]


def run_preflight(argv: Sequence[str], labels: Sequence[str], keys: Sequence[str], fla_keys: Sequence[str],
                  deadline: float, args: argparse.Namespace) -> Preflight:
    """Preflight processes until everything is known, the deadline passes or they keep failing."""
    pf = Preflight(labels, keys, fla_keys)
    attempts = stuck = 0
    while not pf.done():
        if attempts >= len(labels) + 2 or stuck >= 2:
            pf.give_up("the preflight process failed repeatedly (see the log)")
            break
        if time.monotonic() > deadline - 5:
            pf.give_up("no time was left for the preflight")
            break
        plan = {**pf.plan(), "keys": list(keys)}
        cmd = child_command(argv, plan)
        print(f"preflight: candidates {plan['candidates']}, FLA warm-up {len(plan['fla'])} shapes "
              f"({max(0.0, deadline - time.monotonic()):.0f} s left)", flush=True)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        lines: "queue.Queue[Optional[str]]" = queue.Queue()

        def reader(p=proc, q=lines):
            for line in p.stdout:
                q.put(line)
            q.put(None)

        th = threading.Thread(target=reader, daemon=True)
        th.start()
        last = time.monotonic()
        killed, waited = None, 0.0
        events_before = pf.events
        while True:
            phase = pf.phase()
            limit = deadline
            if phase == "cand":
                limit = min(deadline, last + args.kernel_timeout_s)
            elif phase == "other":
                limit = min(deadline, last + args.idle_timeout_s)
            try:
                line = lines.get(timeout=max(0.05, limit - time.monotonic()))
            except queue.Empty:
                now = time.monotonic()
                if now < limit:
                    continue
                killed = "deadline" if now >= deadline else "inactivity"
                waited = now - last
                proc.kill()
                break
            if line is None:
                break
            last = time.monotonic()
            pf.feed(line)
            print("  [preflight] " + line.rstrip(), flush=True)
        rc = proc.wait()
        th.join(timeout=5)
        proc.stdout.close()
        while not lines.empty():  # what the child printed before it was killed
            line = lines.get_nowait()
            if line is not None:
                print("  [preflight] " + line.rstrip(), flush=True)
        pf.child_ended(None if killed else rc, killed, waited)
        attempts += 1
        stuck = stuck + 1 if pf.events == events_before else 0
    return pf


# ---------------------------------------------------------------- one shape

FLASHKDA = "flashkda"  # MoonshotAI/FlashKDA's flash_kda.fwd, built from a checkout (--flashkda)


def export_call(mod: Any, inp: Dict[str, Any], outs: Dict[str, Any], opts: Dict[str, Any], longest: int) -> None:
    """A flash_kda.fwd-style call on one input set, writing into `outs`: an export of ptxevo (which
    also takes max_seqlen, sparing a device-to-host copy) or FlashKDA itself."""
    args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], opts["scale"], outs["out"], inp["A_log"],
            inp["dt_bias"], opts["lower_bound"] if opts["gate"] == "lower_bound" else None, inp.get("initial_state"),
            outs.get("final_state"), inp.get("cu_seqlens"))
    if getattr(mod, "CONFIG", None) is not None:
        mod.fwd(*args, longest)
    else:
        mod.fwd(*args)


def load_flashkda(path: str, arch: str = "90a") -> Any:
    """MoonshotAI/FlashKDA from a checkout whose cutlass/ holds CUTLASS's include, tools/util/include
    and examples/common (the submodule's commit): its extension built the way its setup.py builds it
    (same sources, includes and nvcc flags, for `arch` only) with torch.utils.cpp_extension.load,
    then its flash_kda package, whose fwd allocates the workspace and calls the extension."""
    import importlib.util
    from torch.utils.cpp_extension import load
    need = [os.path.join(path, "csrc", "flash_kda.cpp"), os.path.join(path, "csrc", "smxx", "fwd_launch.cu"),
            os.path.join(path, "flash_kda", "__init__.py"), os.path.join(path, "cutlass", "include", "cute")]
    missing = [n for n in need if not os.path.exists(n)]
    if missing:
        raise BenchError(f"--flashkda {path}: not a FlashKDA checkout with CUTLASS in cutlass/ (missing {missing})")
    saved = os.environ.get("TORCH_CUDA_ARCH_LIST")
    os.environ["TORCH_CUDA_ARCH_LIST"] = f"{arch[0]}.{arch[1:]}"
    try:
        ext = load(name="flash_kda_C", sources=need[:2],
                   extra_include_paths=[os.path.join(path, "cutlass", "include"),
                                        os.path.join(path, "cutlass", "examples", "common"),
                                        os.path.join(path, "cutlass", "tools", "util", "include"),
                                        os.path.join(path, "csrc")],
                   extra_cflags=["-O3", "-Wno-psabi"],
                   extra_cuda_cflags=["-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                                      "-U__CUDA_NO_HALF2_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
                                      "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math",
                                      "--ptxas-options=-v,--register-usage-level=10,--warn-on-spills", "-lineinfo",
                                      "--threads", os.environ.get("NVCC_THREADS", "16"),
                                      "-gencode", f"arch=compute_{arch},code=sm_{arch}"])
    finally:
        if saved is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = saved
    sys.modules["flash_kda_C"] = ext
    spec = importlib.util.spec_from_file_location("flash_kda", need[2])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_shape(key: str, builds: Sequence[BuildDir], modules: Dict[str, Any], opts: Dict[str, Any],
              fla: Fla, fla_state: Dict[str, Dict[str, Any]], env: Dict[str, Any],
              args: argparse.Namespace, exports: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    import torch
    from cuda_ctypes import prepare_plan, run_plan

    shape = shape_of(builds[0], key)
    n = scenario_number(shape, opts)
    row: Dict[str, Any] = {"shape": key, "scenario": n, "label": scenario_label(shape), "dims": shape.dims,
                           "bytes": shape.bytes, "flops": shape.flops,
                           "providers": {}, "checks": {}, "vs_fla": {}, "ratios": {}, "failed": {}, "errors": [],
                           "fla": {}}
    for f, st in fla_state.items():
        row["fla"][f] = {k: v for k, v in st.items()}

    in_bytes = sum(t.nbytes for t in shape.tensors if t.role == "in")
    out_bytes = sum(t.nbytes for t in shape.tensors if t.role != "in")
    free, _ = torch.cuda.mem_get_info()
    # FLA keeps ~10 KB per token-head of temporaries (docs/kda.md 2.3); the fp64 reference ~5 KB.
    B, T, H, N = dims_of(shape)
    reserve = 16 * 1024 * B * T * H
    want = pool_sets(in_bytes + out_bytes, env["l2_bytes"], args.pool_l2_multiple)
    exports = exports or {}
    fit = sets_that_fit(in_bytes + (len(builds) + len(exports)) * out_bytes, free, reserve)
    nsets = max(1, min(want, fit))
    if nsets < want:
        row["errors"].append(f"pool limited by memory to {nsets} sets (wanted {want})")
    row["pool_sets"], row["set_bytes"] = nsets, in_bytes + out_bytes

    cu = cu_tensor(shape)
    sets = [make_inputs(shape, opts, args.seed * 1000003 + i, cu) for i in range(nsets)]
    outs = {b.label: [poisoned_outputs(shape) for _ in range(nsets)] for b in builds}
    plans = {b.label: [prepare_plan(modules[b.label], shape_of(b, key).kernels,
                                    {**{k: v.data_ptr() for k, v in sets[i].items()},
                                     **{k: v.data_ptr() for k, v in outs[b.label][i].items()}})
                       for i in range(nsets)] for b in builds}
    stream = torch.cuda.current_stream().cuda_stream
    ex_outs = {l: [poisoned_outputs(shape) for _ in range(nsets)] for l in exports}
    seq_list = sequences(B, T, N)
    longest = max(m for _, m in seq_list)

    # ---- the reference first (from untouched inputs), then every candidate on the first and the
    # last set, then FLA on the first, before any timing; set 0's inputs must stay as they were
    pristine = {k: v.clone() for k, v in sets[0].items()}
    t0 = time.monotonic()
    ref = kda_reference(sets[0], shape, opts, args.ref_heads)
    torch.cuda.synchronize()
    row["reference"] = {"what": f"fp64 recurrence, {'all' if args.ref_heads <= 0 else min(args.ref_heads, H)} heads",
                        "seconds": round(time.monotonic() - t0, 2)}

    def changed_inputs() -> List[str]:
        names = [k for k, v in pristine.items() if not torch.equal(sets[0][k], v)]
        for k in names:
            sets[0][k].copy_(pristine[k])
        return names

    input_faults: Dict[str, List[str]] = {}
    for b in builds:
        run_plan(plans[b.label][0], stream)
        if nsets > 1:
            run_plan(plans[b.label][nsets - 1], stream)
        torch.cuda.synchronize()
        bad_in = changed_inputs()
        if bad_in:
            input_faults[b.label] = bad_in
    for l, mod in exports.items():
        try:
            export_call(mod, sets[0], ex_outs[l][0], opts, longest)
            if nsets > 1:
                export_call(mod, sets[nsets - 1], ex_outs[l][nsets - 1], opts, longest)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 -- the export's own checks raise ValueError / RuntimeError
            row["failed"][l] = f"the call raised {type(e).__name__}: {str(e)[:300]}"
            if not context_alive():
                raise
        bad_in = changed_inputs()
        if bad_in:
            input_faults[l] = bad_in
    fla_out: Dict[str, Dict[str, Any]] = {}
    fla_kw: Dict[str, Dict[str, Any]] = {}
    for f, st in row["fla"].items():
        if st["status"] not in ("ok", "untested"):
            continue
        try:
            fla_kw[f] = fla_kw_for(f, opts, fla)
            t0 = time.monotonic()
            o, s = fla.call(sets[0], fla_kw[f])
            torch.cuda.synchronize()
            st["first_call_s"] = round(time.monotonic() - t0, 2)
            fla_out[f] = {"out": o, "final_state": s} if opts["final_state"] else {"out": o}
            st["status"] = "ran"
            bad_in = changed_inputs()
            if bad_in:
                row["errors"].append(f"{f} modified its inputs {bad_in} (restored)")
        except Exception as e:  # noqa: BLE001
            st.update(status="failed", message=f"{type(e).__name__}: {str(e)[:400]}")
            print(f"  {key}: {f} failed: {st['message']}", flush=True)
            if not context_alive():
                raise
    pristine.clear()
    for b in builds:
        row["checks"][b.label] = check_against(shape, outs[b.label][0], ref, args)
    for l in exports:
        if l not in row["failed"]:
            row["checks"][l] = check_against(shape, ex_outs[l][0], ref, args)
    for f, o in fla_out.items():
        row["checks"][f] = check_against(shape, o, ref, args)  # reported, not enforced
    if FLA in fla_out:  # RMSE(ours - FLA) / RMS(FLA), every head
        for b in builds:
            row["vs_fla"][b.label] = {name: rel_l2(outs[b.label][0][name], v) for name, v in fla_out[FLA].items()}
        for l in exports:
            if l not in row["failed"]:
                row["vs_fla"][l] = {name: rel_l2(ex_outs[l][0][name], v) for name, v in fla_out[FLA].items()}
    alive = []
    for b in builds:
        bad = [f"{name}: {r['message']}" for name, r in row["checks"][b.label].items() if not r["ok"]]
        if b.label in input_faults:
            bad.append(f"modified its inputs {input_faults[b.label]}")
        if nsets > 1:
            nf = nonfinite(outs[b.label][nsets - 1])
            if nf:
                bad.append(f"{nf} non-finite output elements on the last input set")
        if bad:
            row["failed"][b.label] = "; ".join(bad)
            print(f"  {key}: {b.label} FAILED the check, not timed: {'; '.join(bad)}", flush=True)
        else:
            alive.append(b)
    alive_exports = []
    for l in exports:
        if l in row["failed"]:
            continue
        bad = [f"{name}: {r['message']}" for name, r in row["checks"][l].items() if not r["ok"]]
        if l in input_faults:
            bad.append(f"modified its inputs {input_faults[l]}")
        if bad and l == FLASHKDA:  # the anchor's accuracy is reported, not enforced (as FLA's)
            row["errors"].append(f"{l} outside the gate's tolerances: {'; '.join(bad)}")
            alive_exports.append(l)
        elif bad:
            row["failed"][l] = "; ".join(bad)
            print(f"  {key}: {l} FAILED the check, not timed: {'; '.join(bad)}", flush=True)
        else:
            alive_exports.append(l)
    del fla_out

    # ---- timing, round-robin over the candidates and FLA, inputs rotating over the pool
    providers = [Provider(b.label, (lambda pl: lambda i, s: run_plan(pl[i], s))(plans[b.label]), nsets)
                 for b in alive]
    providers += [Provider(l, (lambda m, o: lambda i, s: export_call(m, sets[i], o[i], opts, longest))(
        exports[l], ex_outs[l]), nsets) for l in alive_exports]
    providers += [Provider(f, (lambda kw: lambda i, s: fla.call(sets[i], kw))(fla_kw[f]), nsets)
                  for f, st in row["fla"].items() if st["status"] == "ran"]
    times: Dict[str, List[float]] = {}
    if providers:
        for p in providers:
            calibrate(p, args.target_batch_ms)
        times = time_round_robin(providers, args.samples, args.warmup)
        torch.cuda.synchronize()
        for p in providers:
            row["providers"][p.name] = {**summarize(times[p.name]), "per_batch": p.per_batch, "samples": times[p.name]}
            if p.name in row["fla"]:
                row["fla"][p.name]["status"] = "timed"

    # ---- the timed runs' outputs must still be right
    for b in alive:
        after = check_against(shape, outs[b.label][0], ref, args)
        bad = [f"{name}: {r['message']}" for name, r in after.items() if not r["ok"]]
        if bad:
            row["failed"][b.label] = "timed outputs wrong: " + "; ".join(bad)
            row["providers"].pop(b.label, None)
    for l in alive_exports:
        if l == FLASHKDA:
            continue
        after = check_against(shape, ex_outs[l][0], ref, args)
        bad = [f"{name}: {r['message']}" for name, r in after.items() if not r["ok"]]
        if bad:
            row["failed"][l] = "timed outputs wrong: " + "; ".join(bad)
            row["providers"].pop(l, None)
    for label in [b.label for b in alive] + alive_exports:
        if label not in row["providers"]:
            continue
        r: Dict[str, Any] = {}
        for f in row["fla"]:
            if f in row["providers"]:
                r[("fla" if f == FLA else f) + "_over_ours"] = paired_ratio(times[f], times[label])
        if FLASHKDA in row["providers"] and label != FLASHKDA:
            r["flashkda_over_ours"] = paired_ratio(times[FLASHKDA], times[label])
        if label in exports and builds and builds[0].label in row["providers"]:
            # the export against the first candidate (the same kernels): > 1 the export is faster
            r["candidate_over_export"] = paired_ratio(times[builds[0].label], times[label])
        row["ratios"][label] = r
    del ref
    return row


# ---------------------------------------------------------------- environment and main

def environment(drv, fla: Fla, args: argparse.Namespace) -> Dict[str, Any]:
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
        "fla": fla.version if fla.fn else f"unavailable ({fla.error})" if fla.error else None,
        "python": platform.python_version(), "samples": args.samples, "warmup_batches": args.warmup,
        "target_batch_ms": args.target_batch_ms, "pool_l2_multiple": args.pool_l2_multiple, "seed": args.seed,
        "budget_s": args.budget_s, "ref_heads": args.ref_heads,
        "env": {k: os.environ.get(k) for k in ("TRITON_CACHE_DIR", "FLA_FLASH_KDA", "FLA_CACHE_RESULTS",
                                               "CUDA_VISIBLE_DEVICES")},
    }


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidate", action="append", required=True, metavar="LABEL=DIR",
                    help="a build dir of `ptxevo build` (repeatable)")
    ap.add_argument("--export", action="append", default=[], metavar="LABEL=DIR",
                    help="a `ptxevo export --format torch` of kda_fwd, timed beside the candidates (repeatable)")
    ap.add_argument("--flashkda", metavar="DIR",
                    help="a MoonshotAI/FlashKDA checkout with CUTLASS in DIR/cutlass: built here and timed live "
                         "(label flashkda; the lower-bound gate only)")
    ap.add_argument("--out", required=True, help="directory for results.json and results.md")
    ap.add_argument("--commit", default="unknown", help="the commit the candidates were built from")
    ap.add_argument("--samples", type=int, default=30, help="timed batches per provider (>= 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed batches per provider first")
    ap.add_argument("--target-batch-ms", type=float, default=10.0,
                    help="calls per timed batch to last about this long (back to back, as a model calls them)")
    ap.add_argument("--pool-l2-multiple", type=float, default=2.0, help="input pool at least this many L2 sizes")
    ap.add_argument("--shapes", nargs="*", default=[], metavar="KEY|N",
                    help="only these benchmark shapes: keys (B=1,H=96,N=1,T=8192) or docs/targets.md scenario numbers")
    ap.add_argument("--max-shapes", type=int, default=0, help="only the first N benchmark shapes")
    ap.add_argument("--no-fla", action="store_true", help="time the candidates only")
    ap.add_argument("--fla-safe-gate", action="store_true",
                    help="also time chunk_kda with safe_gate=True (FLA's fastest Triton path; more autotuning)")
    ap.add_argument("--ref-heads", type=int, default=0,
                    help="check against the fp64 reference on this many heads (0: all)")
    ap.add_argument("--rel-l2", type=float, help="override the relative L2 tolerance of launch.json")
    ap.add_argument("--max-abs", type=float, help="override the normalized max-abs tolerance of launch.json")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=225.0,
                    help="wall-clock budget of the whole run (keep it below an outer timeout)")
    ap.add_argument("--main-reserve-s", type=float, default=75.0,
                    help="of the budget, what the preflight leaves to the main phase")
    ap.add_argument("--shape-min-s", type=float, default=12.0, help="no shape is started with less time left")
    ap.add_argument("--no-preflight", action="store_true", help="no preflight process (FLA autotunes in the main one)")
    ap.add_argument("--kernel-timeout-s", type=float, default=30.0,
                    help="preflight: a candidate's launch may take this long")
    ap.add_argument("--idle-timeout-s", type=float, default=120.0,
                    help="preflight: longest silence outside kernels and FLA (imports, inputs)")
    ap.add_argument("--preflight-child", metavar="PLAN", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.samples < 20:
        ap.error("--samples must be at least 20")
    return args


def write_results(out_dir: str, env: Dict[str, Any], builds: Sequence[BuildDir], pf: Optional[Preflight],
                  rows: Sequence[Dict[str, Any]], labels: Sequence[str], fnames: Sequence[str],
                  notes: Sequence[str]) -> str:
    os.makedirs(out_dir, exist_ok=True)
    result = {"environment": env, "candidates": [b.summary() for b in builds],
              "preflight": pf.summary() if pf else None, "shapes": list(rows), "notes": list(notes)}
    tmp = os.path.join(out_dir, "results.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    os.replace(tmp, os.path.join(out_dir, "results.json"))
    md = markdown_report(env, rows, labels, fnames, notes)
    with open(os.path.join(out_dir, "results.md"), "w", encoding="utf-8") as f:
        f.write(md)
    with open(os.path.join(out_dir, "summary.txt"), "w", encoding="utf-8") as f:
        f.write(short_table(rows, labels))
    return md


def final_notes(rows: Sequence[Dict[str, Any]], base: Sequence[str]) -> List[str]:
    notes = list(base)
    for r in rows:
        for label, why in r["failed"].items():
            notes.append(f"{r['label']}: {label} failed: {why}")
        for f, st in r.get("fla", {}).items():
            if st.get("status") != "timed":
                notes.append(f"{r['label']}: {f} not timed: {st.get('status')} {st.get('message', '')}".rstrip())
        for e in r["errors"]:
            notes.append(f"{r['label']}: {e}")
    notes.append(f"{FLA}/ours and FlashKDA/ours = median over rounds of the provider's ms / the candidate's ms, "
                 "timed in the same round (> 1: the candidate is faster); FlashKDA only where --flashkda ran it")
    return notes


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        cands = [parse_candidate_arg(c) for c in args.candidate]
        labels = [l for l, _ in cands]
        if len(set(labels)) != len(labels) or set(labels) & {FLA, FLA_SAFE}:
            raise BenchError(f"candidate labels must be distinct and not {FLA}/{FLA_SAFE}: {labels}")
        for l in labels:
            if not l.replace("_", "").replace("-", "").replace(".", "").isalnum():
                raise BenchError(f"candidate label '{l}': letters, digits, '_', '-' and '.' only")
        builds = [load_build_dir(l, p) for l, p in cands]
        check_candidates_agree(builds)
        opts = kda_options(builds[0])
        keys = select_shapes(builds, args.shapes, args.max_shapes)
        for k in keys:
            check_shape(shape_of(builds[0], k), opts)
    except (BenchError, LaunchFormatError, ValueError) as e:
        print(f"fla_bench.py: error: {e}", file=sys.stderr)
        return 2
    if args.preflight_child:
        return child_main(args, json.loads(args.preflight_child))

    start = time.monotonic()

    def on_term(signum, frame):
        raise Terminated()

    signal.signal(signal.SIGTERM, on_term)
    try:
        import torch
    except ImportError as e:
        print(f"fla_bench.py: error: PyTorch is needed to run the benchmark ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("fla_bench.py: error: torch sees no CUDA GPU", file=sys.stderr)
        return 2
    fnames = fla_names(args)
    base_notes: List[str] = []
    pf: Optional[Preflight] = None
    if not args.no_preflight:
        fla_keys = [f"{f}@{k}" for k in keys for f in fnames]
        try:
            pf = run_preflight(argv, labels, keys, fla_keys,
                               child_deadline(start, args.budget_s, args.main_reserve_s), args)
        except Terminated:
            print("fla_bench.py: terminated during the preflight", file=sys.stderr)
            return 124
        for l, s in pf.cand.items():
            print(f"preflight {l}: {s['status']} {s['message']}".rstrip(), flush=True)
        for f, s in pf.fla.items():
            print(f"preflight {f}: {s['status']} {s['message']}"
                  f"{'' if s['seconds'] is None else ' (%.1f s)' % s['seconds']}".rstrip(), flush=True)

    from cuda_ctypes import CudaError, Driver, Module
    torch.empty(1, device=DEVICE)  # makes torch's primary context current for the driver calls
    drv = Driver()
    fla = Fla()
    if fnames:
        if pf is not None and pf.fla_import is not None and not pf.fla_import["ok"]:
            fla.error = pf.fla_import["message"]
        else:
            fla.load()
        if fla.error:
            msg = f"flash-linear-attention is not available, only the candidates are timed: {fla.error}"
            print("fla_bench.py: " + msg, file=sys.stderr, flush=True)
            base_notes.append(msg)
    env = environment(drv, fla, args)
    print(f"{env['gpu']}, driver {env['nvidia_driver']} (CUDA {env['cuda_driver_api']}), torch {env['torch']}, "
          f"triton {env['triton']}, fla {env['fla']}; {len(keys)} shapes", flush=True)

    status = 0
    usable = pf.usable_candidates() if pf else labels
    excluded: Dict[str, str] = {}
    for l in labels:
        if l not in usable:
            excluded[l] = f"left out by the preflight: {pf.cand[l]['status']} {pf.cand[l]['message']}"
            base_notes.append(f"{l}: {excluded[l]}")
            status = 1
        elif pf and pf.cand[l]["status"] == "untested":
            base_notes.append(f"{l}: not tested by the preflight ({pf.cand[l]['message']}); run anyway")
    modules = {}
    run_builds = []
    for b in builds:
        if b.label not in usable:
            continue
        try:
            with open(b.cubin_path, "rb") as f:
                modules[b.label] = Module(drv, f.read(), b.cubin_path)
            run_builds.append(b)
        except CudaError as e:
            excluded[b.label] = f"cannot load its cubin: {e}"
            base_notes.append(f"{b.label}: {excluded[b.label]}")
            status = 1

    exports: Dict[str, Any] = {}
    if args.export:
        try:
            exports = load_exports(args.export, set(labels) | {FLA, FLA_SAFE, FLASHKDA})
        except Exception as e:  # noqa: BLE001 -- a module that does not load or build is reported, the rest run
            base_notes.append(f"the exports were not loaded: {type(e).__name__}: {str(e)[:500]}")
            status = 1
    if args.flashkda:
        if opts["gate"] != "lower_bound":
            base_notes.append("FlashKDA not run: it implements the lower-bound gate only")
        else:
            try:
                t0 = time.monotonic()
                exports[FLASHKDA] = load_flashkda(args.flashkda)
                print(f"FlashKDA built and loaded in {time.monotonic() - t0:.0f} s", flush=True)
            except Exception as e:  # noqa: BLE001 -- a build that fails is reported, the rest run
                base_notes.append(f"FlashKDA was not built: {type(e).__name__}: {str(e)[-800:]}")
                status = 1
    rows: List[Dict[str, Any]] = []
    shown = labels + list(exports)
    md = ""
    try:
        for i, key in enumerate(keys):
            if not enough_time(time.monotonic(), start, args.budget_s, args.shape_min_s):
                base_notes.append(f"out of time: shapes {keys[i:]} not run (budget {args.budget_s:.0f} s)")
                status = max(status, 1)
                break
            fla_state: Dict[str, Dict[str, Any]] = {}
            for f in fnames:
                if fla.error:
                    fla_state[f] = {"status": "unavailable", "message": fla.error}
                elif pf is not None:
                    s = pf.fla[f"{f}@{key}"]
                    fla_state[f] = {"status": s["status"], "message": s["message"], "preflight_s": s["seconds"]}
                else:
                    fla_state[f] = {"status": "untested", "message": ""}
            print(f"== {key} ({scenario_label(shape_of(builds[0], key))})", flush=True)
            try:
                row = run_shape(key, run_builds, modules, opts, fla, fla_state, env, args, exports)
            except CudaError as e:
                base_notes.append(f"{key}: CUDA error, run stopped: {e}")
                print(f"  {key}: CUDA error, stopping: {e}", file=sys.stderr, flush=True)
                status = 1
                break
            except BenchError as e:
                base_notes.append(f"{key}: {e}")
                status = 1
                continue
            except Exception as e:  # noqa: BLE001 -- torch errors: record, and stop if CUDA is broken
                traceback.print_exc()
                base_notes.append(f"{key}: {type(e).__name__}: {str(e)[:500]}")
                status = 1
                if "CUDA" in str(e) or not context_alive():
                    break
                continue
            finally:
                torch.cuda.empty_cache()
            row["excluded"] = excluded
            rows.append(row)
            if row["failed"]:
                status = 1
            for name, p in row["providers"].items():
                print(f"  {name:>14}: {p['median']:.4f} ms [{p['ci_low']:.4f}, {p['ci_high']:.4f}] "
                      f"({p['per_batch']} per batch)", flush=True)
            md = write_results(args.out, env, builds, pf, rows, shown, fnames, final_notes(rows, base_notes))
    except Terminated:
        base_notes.append("terminated (the outer timeout) before every shape was run")
        status = 124
    md = write_results(args.out, env, builds, pf, rows, shown, fnames, final_notes(rows, base_notes))
    if status == 0 and fnames and any(r["fla"].get(FLA, {}).get("status") != "timed" for r in rows):
        status = 3
    print(md)
    print(short_table(rows, shown), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
