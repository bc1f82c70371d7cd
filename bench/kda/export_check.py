#!/usr/bin/env python3
"""Checks a kda_fwd export (`ptxevo export --format torch`) on the GPU, one JSON line per check:

    python3 bench/kda/export_check.py DIR [--seed 1] > checks.jsonl

1. random batches against the fp64 recurrence (fla_bench.kda_reference): packed sequences of random
   lengths (some shorter than a chunk) and batched rows, H in {1, 4, 16}; the initial state fp32,
   bf16 (converted both ways, FlashKDA's convention) or absent (the zero state);
2. the module's chunk_kda (FLA's arguments) equals its fwd bit for bit;
3. torch.compile(fullgraph=True) of a function calling fwd, and a CUDA graph of it (max_seqlen
   given), replayed on new inputs, equal the eager call bit for bit;
4. with flash-linear-attention importable: register_fla_backend(), then FLA's chunk_kda under
   torch.inference_mode() returns our output bit for bit (it dispatched to us), and (--fla-triton)
   with gradients on it runs its Triton path, whose error against fp64 is printed beside ours;
5. bad calls (a wrong dtype, the wrong gate) raise errors that name the problem.

Exit status 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "rmsnorm"))

D = 128
# Tolerances of kda_fwd's gate (kernels/kda/kda_fwd_op.cpp: rel_l2 of out and final_state).
REL_L2 = {"out": 0.01, "final_state": 0.01}
failures: List[str] = []


def emit(check: str, ok: bool, **fields: Any) -> None:
    print(json.dumps({"check": check, "ok": ok, **fields}), flush=True)
    if not ok:
        failures.append(check)


def load_module(path: str):
    files = [f for f in os.listdir(path) if f.startswith("ptxevo_") and f.endswith(".py")]
    if len(files) != 1:
        raise SystemExit(f"export_check.py: {path} holds no single ptxevo_*.py module")
    name = files[0][:-3]
    spec = importlib.util.spec_from_file_location(name, os.path.join(path, files[0]))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # torch.compile imports the custom op's module by name, as a user's import would
    spec.loader.exec_module(mod)
    mod.load()
    return mod


def rel_l2(x, ref) -> float:
    x = x.double()
    if not bool(x.isfinite().all()):
        return math.inf
    den = float(ref.square().mean().sqrt())
    return float((x - ref).square().mean().sqrt()) / (den if den > 0 else 1.0)


class Case:
    """One problem: inputs, sequences, and the options the reference follows."""

    def __init__(self, mod, gen, B: int, H: int, lengths: List[int], packed: bool, state: str):
        import torch
        import torch.nn.functional as F
        self.B, self.H, self.packed, self.state = B, H, packed, state
        self.T = sum(lengths) if packed else lengths[0]
        self.lengths = lengths
        dev, bf16 = "cuda", torch.bfloat16
        tok = (B, self.T, H, D)

        def randn(*s):
            return torch.randn(*s, generator=gen, device=dev)

        self.q = F.normalize(randn(*tok), dim=-1).to(bf16)
        self.k = F.normalize(randn(*tok), dim=-1).to(bf16)
        self.v, self.g = randn(*tok).to(bf16), randn(*tok).to(bf16)
        self.beta = randn(B, self.T, H).to(bf16)
        self.A_log = torch.rand(H, generator=gen, device=dev)
        self.dt_bias = torch.rand(H, D, generator=gen, device=dev)
        self.N = len(lengths) if packed else B
        self.cu = None
        if packed:
            offsets = [0]
            for n in lengths:
                offsets.append(offsets[-1] + n)
            self.cu = torch.tensor(offsets, dtype=torch.long, device=dev)
            self.seqs = list(zip(offsets[:-1], lengths))
        else:
            self.seqs = [(b * self.T, self.T) for b in range(B)]
        self.s0 = None
        if state != "none":
            s = randn(self.N, H, D, D)
            self.s0 = s.to(bf16) if state == "bf16" else s
        cfg = mod.CONFIG
        self.opts = {"gate": cfg["gate"], "lower_bound": -5.0, "scale": D ** -0.5,
                     "initial_state": cfg["initial_state"], "final_state": cfg["final_state"]}

    def inputs(self) -> Dict[str, Any]:
        import torch
        d = {"q": self.q, "k": self.k, "v": self.v, "g": self.g, "beta": self.beta, "A_log": self.A_log,
             "dt_bias": self.dt_bias}
        if self.opts["initial_state"]:
            d["initial_state"] = (self.s0.float() if self.s0 is not None
                                  else torch.zeros(self.N, self.H, D, D, device="cuda"))
        return d

    def run(self, mod, max_seqlen: Optional[int] = None):
        import torch
        out = torch.empty_like(self.v)
        fs = None
        if mod.CONFIG["final_state"]:
            dtype = self.s0.dtype if self.s0 is not None else torch.float32
            fs = torch.empty(self.N, self.H, D, D, dtype=dtype, device="cuda")
        lb = -5.0 if mod.CONFIG["gate"] == "lower_bound" else None
        mod.fwd(self.q, self.k, self.v, self.g, self.beta, D ** -0.5, out, self.A_log, self.dt_bias, lb,
                self.s0 if mod.CONFIG["initial_state"] else None, fs, self.cu, max_seqlen)
        return out, fs

    def reference(self):
        import fla_bench
        from launch_json import ShapeSpec
        shape = ShapeSpec(cls="benchmark", dims={"B": self.B, "T": self.T, "H": self.H, "N": self.N}, tensors=[],
                          kernels=[], bytes=0.0, flops=0.0)
        # A bf16 initial state enters as its exact fp32 values, as the module converts it.
        return fla_bench.kda_reference(self.inputs(), shape, self.opts, seqs=self.seqs)


def check_random(mod, gen, rnd) -> None:
    cases: List[Tuple[int, int, List[int], bool, str]] = []
    for H in (1, 4, 16):
        lengths = [rnd.randint(1, 15)] + [rnd.randint(1, 700) for _ in range(rnd.randint(1, 7))]  # one under a chunk
        cases.append((1, H, lengths, True, "fp32"))
        cases.append((rnd.randint(1, 3), H, [rnd.randint(1, 1500)], False, "bf16"))
    cases.append((1, 4, [3000, 5, 1024, 77], True, "none"))
    cases.append((1, 2, [8192], False, "fp32"))  # few chains: the sequence split engages
    for B, H, lengths, packed, state in cases:
        if state != "none" and not mod.CONFIG["initial_state"]:
            state = "none"
        c = Case(mod, gen, B, H, lengths, packed, state)
        out, fs = c.run(mod)
        ref = c.reference()
        errs = {"out": rel_l2(out, ref["out"])}
        if fs is not None and "final_state" in ref:
            errs["final_state"] = rel_l2(fs.float(), ref["final_state"])
        ok = all(v <= REL_L2[k] for k, v in errs.items())
        emit("random_vs_fp64", ok, B=B, H=H, lengths=lengths if packed else None, T=c.T, packed=packed,
             state=state, rel_l2=errs)


def check_compile_and_graph(mod, gen) -> None:
    import torch
    c = Case(mod, gen, 1, 8, [700, 15, 2048, 333], True, "fp32")
    longest = max(c.lengths)
    ref_out, ref_fs = c.run(mod, longest)

    def step(case: Case):
        return case.run(mod, longest)

    try:
        compiled = torch.compile(step, fullgraph=True)
        out, fs = compiled(c)
        same = torch.equal(out, ref_out) and (fs is None or torch.equal(fs, ref_fs))
        emit("torch_compile_fullgraph", same)
    except Exception as e:  # noqa: BLE001
        emit("torch_compile_fullgraph", False, error=f"{type(e).__name__}: {str(e)[:400]}")
    try:
        static = Case(mod, gen, 1, 8, [700, 15, 2048, 333], True, "fp32")
        out = torch.empty_like(static.v)
        fs = torch.empty(static.N, 8, D, D, device="cuda") if mod.CONFIG["final_state"] else None
        lb = -5.0 if mod.CONFIG["gate"] == "lower_bound" else None
        s0 = static.s0 if mod.CONFIG["initial_state"] else None

        def call():
            mod.fwd(static.q, static.k, static.v, static.g, static.beta, D ** -0.5, out, static.A_log,
                    static.dt_bias, lb, s0, fs, static.cu, longest)

        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            call()  # warm-up outside the capture (the extension's first launch sets attributes)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        for name in ("q", "k", "v", "g", "beta", "A_log", "dt_bias"):
            getattr(static, name).copy_(getattr(c, name))
        if s0 is not None:
            s0.copy_(c.s0)
        graph.replay()
        torch.cuda.synchronize()
        same = torch.equal(out, ref_out) and (fs is None or torch.equal(fs, ref_fs))
        emit("cuda_graph_replay", same)
    except Exception as e:  # noqa: BLE001
        emit("cuda_graph_replay", False, error=f"{type(e).__name__}: {str(e)[:400]}")


def check_chunk_kda_and_fla(mod, gen, fla_triton: bool) -> None:
    import torch
    c = Case(mod, gen, 1, 4, [500, 31, 1200], True, "fp32")
    out, fs = c.run(mod)
    lb = -5.0 if mod.CONFIG["gate"] == "lower_bound" else None
    o2, f2 = mod.chunk_kda(c.q, c.k, c.v, c.g, c.beta, None, c.s0 if mod.CONFIG["initial_state"] else None,
                           mod.CONFIG["final_state"], A_log=c.A_log, dt_bias=c.dt_bias, lower_bound=lb,
                           cu_seqlens=c.cu)
    emit("chunk_kda_equals_fwd", torch.equal(o2, out) and (f2 is None or torch.equal(f2, fs)))
    try:
        os.environ.setdefault("FLA_FLASH_KDA", "0")
        from fla.ops.kda import chunk_kda as fla_chunk_kda
    except Exception as e:  # noqa: BLE001
        emit("fla_backend", True, skipped=f"flash-linear-attention not importable: {type(e).__name__}: {e}")
        return
    mod.register_fla_backend()
    kw = dict(initial_state=c.s0 if mod.CONFIG["initial_state"] else None,
              output_final_state=mod.CONFIG["final_state"], use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
              use_beta_sigmoid_in_kernel=True, A_log=c.A_log, dt_bias=c.dt_bias, lower_bound=lb,
              cu_seqlens=c.cu, state_v_first=True)
    with torch.inference_mode():
        o3, f3 = fla_chunk_kda(c.q, c.k, c.v, c.g, c.beta, scale=D ** -0.5, **kw)[:2]
    emit("fla_dispatches_to_us", torch.equal(o3, out) and (f3 is None or torch.equal(f3, fs)))
    if not fla_triton:
        return
    ref = c.reference()
    ours = {"out": rel_l2(out, ref["out"])}
    if fs is not None:
        ours["final_state"] = rel_l2(fs, ref["final_state"])
    try:
        with torch.enable_grad():  # our backend refuses calls with gradients on: FLA's Triton path runs
            o4, f4 = fla_chunk_kda(c.q, c.k, c.v, c.g, c.beta, scale=D ** -0.5, **kw)[:2]
        theirs = {"out": rel_l2(o4.detach(), ref["out"])}
        if f4 is not None and fs is not None:
            theirs["final_state"] = rel_l2(f4.detach().float(), ref["final_state"])
        emit("fla_triton_path_vs_fp64", not torch.equal(o4, out), ours=ours, fla=theirs,
             ours_no_worse={k: ours[k] <= theirs[k] for k in theirs})
    except Exception as e:  # noqa: BLE001
        emit("fla_triton_path_vs_fp64", False, error=f"{type(e).__name__}: {str(e)[:400]}")


def check_refusals(mod, gen) -> None:
    import torch
    c = Case(mod, gen, 1, 2, [64], False, "fp32")
    out = torch.empty_like(c.v)
    lb_ok = -5.0 if mod.CONFIG["gate"] == "lower_bound" else None
    s0 = c.s0 if mod.CONFIG["initial_state"] else None
    fs = torch.empty(1, 2, D, D, device="cuda") if mod.CONFIG["final_state"] else None
    tries = {
        "q_fp16": (lambda: mod.fwd(c.q.half(), c.k, c.v, c.g, c.beta, 0.1, out, c.A_log, c.dt_bias, lb_ok, s0, fs),
                   "q must be"),
        "wrong_gate": (lambda: mod.fwd(c.q, c.k, c.v, c.g, c.beta, 0.1, out, c.A_log, c.dt_bias,
                                       None if lb_ok is not None else -5.0, s0, fs), "gate"),
    }
    for name, (fn, words) in tries.items():
        try:
            fn()
            torch.cuda.synchronize()
            emit(f"refuses_{name}", False, error="no error raised")
        except Exception as e:  # noqa: BLE001
            emit(f"refuses_{name}", words in str(e), message=str(e)[:300])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("export_dir")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fla-triton", action="store_true",
                    help="also run FLA's Triton path once (its first call autotunes: minutes)")
    args = ap.parse_args()
    import random
    import torch
    mod = load_module(args.export_dir)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed)
    rnd = random.Random(args.seed)
    emit("config", True, config=mod.CONFIG, torch=torch.__version__, gpu=torch.cuda.get_device_name())
    for step in (lambda: check_random(mod, gen, rnd), lambda: check_chunk_kda_and_fla(mod, gen, args.fla_triton),
                 lambda: check_compile_and_graph(mod, gen), lambda: check_refusals(mod, gen)):
        try:
            step()
        except Exception as e:  # noqa: BLE001 -- one broken step must not hide the others
            emit("step_raised", False, error=f"{type(e).__name__}: {str(e)[:500]}")
    print(json.dumps({"summary": "ok" if not failures else "failed", "failed": failures}), flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
