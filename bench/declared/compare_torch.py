#!/usr/bin/env python3
"""Exported declared ops (examples/ops) beside PyTorch, side by side on one GPU.

    python3 bench/declared/compare_torch.py --op gelu_bias --export winner=DIR [--export seed=DIR2] \
        --out OUTDIR [--samples 30] [--shapes M=16384,N=4096 ...]

Each DIR is the output of `ptxevo export --format torch`. In one process, for every shape: draw
inputs (a pool of sets larger than twice the L2, so no provider reads from a warm cache), check
every export and the torch baselines against an fp64 reference (exact for integer outputs),
then time, interleaved round-robin per sample with CUDA events around batches of calls:
  - each export through its torch.library custom op (eager),
  - the first export under torch.compile (the op inside a compiled function),
  - the first export replayed from a CUDA graph,
  - torch eager and torch.compile of the same computation.
Reports medians with 95% CIs, ratios to torch eager and torch.compile, and the fraction of the
floor (bytes moved / the measured device-to-device copy bandwidth). Writes results.json and
results.md to --out.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import subprocess
import sys
from typing import Callable, Dict, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rmsnorm"))

from bench_stats import round_robin_order, summarize  # noqa: E402

SHAPES = {
    "gelu_bias": [(16384, 4096), (4096, 12288), (65536, 1024)],
    "row_argmax": [(16384, 4096), (4096, 32768), (262144, 256)],
}


def torch_ops(op: str):
    """(make inputs, torch computation, fp64 reference, bytes moved) for an example op."""
    import torch
    import torch.nn.functional as F

    if op == "gelu_bias":
        def make(m, n, g):
            return (torch.randn(m, n, generator=g, device="cuda").to(torch.bfloat16),
                    (0.5 * torch.randn(n, generator=g, device="cuda")).to(torch.bfloat16))

        def fn(x, b):
            return F.gelu(x + b)

        def ref(x, b):
            v = x.double() + b.double()
            return 0.5 * v * torch.special.erfc(-v / 2 ** 0.5)  # erfc: no cancellation for v << 0

        return make, fn, ref, lambda m, n: 2 * (2 * m * n + n)
    if op == "row_argmax":
        def make(m, n, g):
            return (torch.randn(m, n, generator=g, device="cuda").to(torch.bfloat16),)

        def fn(x):
            return torch.argmax(x, dim=1)

        def ref(x):
            return torch.argmax(x.double(), dim=1)

        return make, fn, ref, lambda m, n: 2 * m * n + 8 * m
    raise SystemExit(f"unknown op {op}; this bench knows {sorted(SHAPES)}")


def load_export(name: str, directory: str, op: str):
    path = os.path.join(directory, f"ptxevo_{op}.py")
    spec = importlib.util.spec_from_file_location(f"ptxevo_export_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.load(build_directory=None)
    return getattr(module, op)


def error_of(out, ref) -> float:
    import torch

    if not out.dtype.is_floating_point:
        return float((out != ref).sum().item())
    d = out.double() - ref
    return float(torch.linalg.vector_norm(d) / torch.linalg.vector_norm(ref))


def copy_bandwidth() -> float:
    import torch

    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        b.copy_(a)
    e.record()
    torch.cuda.synchronize()
    return 2 * a.numel() * 10 / (s.elapsed_time(e) * 1e-3)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", required=True)
    ap.add_argument("--export", action="append", required=True, help="NAME=DIR of `ptxevo export --format torch`")
    ap.add_argument("--out", required=True)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--commit", default="")
    args = ap.parse_args()
    import torch

    torch.manual_seed(0)
    make, fn, ref, bytes_of = torch_ops(args.op)
    exports = {}
    for item in args.export:
        name, directory = item.split("=", 1)
        exports[name] = load_export(name, directory, args.op)
    first = next(iter(exports))
    compiled_torch = torch.compile(fn)
    ours = exports[first]
    compiled_ours = torch.compile(lambda *xs: ours(*xs))
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    bw = copy_bandwidth()
    results = {"op": args.op, "date": datetime.datetime.utcnow().isoformat() + "Z", "commit": args.commit,
               "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
               "driver": subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                        capture_output=True, text=True).stdout.strip(),
               "copy_bandwidth_GBps": bw / 1e9, "exports": {k: v for k, v in (e.split("=", 1) for e in args.export)},
               "shapes": []}
    for m, n in SHAPES[args.op]:
        g = torch.Generator(device="cuda").manual_seed(m * 7919 + n)
        one = make(m, n, g)
        set_bytes = sum(t.numel() * t.element_size() for t in one)
        nsets = max(2, -(-2 * l2 // set_bytes))
        pool = [one] + [make(m, n, g) for _ in range(nsets - 1)]
        providers: Dict[str, Callable] = {f"ptxevo {k}": v for k, v in exports.items()}
        providers[f"ptxevo {first} (torch.compile)"] = compiled_ours
        providers["torch eager"] = fn
        providers["torch.compile"] = compiled_torch
        row = {"M": m, "N": n, "pool_sets": nsets, "errors": {}}
        want = ref(*pool[0])
        for name, p in providers.items():
            row["errors"][name] = error_of(p(*pool[0]), want)
        # A CUDA graph of the first export, one graph per pool set.
        graphs = []
        for s in pool:
            ours(*s)
            gr = torch.cuda.CUDAGraph()
            with torch.cuda.graph(gr):
                ours(*s)
            graphs.append(gr)
        providers[f"ptxevo {first} (CUDA graph)"] = None
        calls = max(1, int(2.0 / max(1e-3, 1e3 * bytes_of(m, n) / bw)))  # ~2 ms per batch
        times: Dict[str, List[float]] = {k: [] for k in providers}
        for sample in range(args.samples):
            for name in round_robin_order(list(providers), sample):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                p = providers[name]
                start.record()
                for i in range(calls):
                    if p is None:
                        graphs[i % len(graphs)].replay()
                    else:
                        p(*pool[i % len(pool)])
                end.record()
                torch.cuda.synchronize()
                times[name].append(start.elapsed_time(end) / calls)
        floor_ms = 1e3 * bytes_of(m, n) / bw
        row["floor_ms"] = floor_ms
        row["times"] = {k: summarize(v) for k, v in times.items()}
        results["shapes"].append(row)
        print(f"M={m} N={n}: " + ", ".join(f"{k} {row['times'][k]['median']:.4f}" for k in providers), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    lines = [f"# {args.op}: ptxevo exports beside PyTorch ({results['gpu']}, torch {results['torch']}, "
             f"driver {results['driver']}, {results['date']}, commit {args.commit})", "",
             f"Medians of {args.samples} interleaved samples (ms); the floor is bytes / measured copy bandwidth "
             f"({bw / 1e9:.0f} GB/s). Errors: rel_l2 vs fp64 (float outputs) or mismatching elements (integer).", ""]
    names = list(results["shapes"][0]["times"])
    lines.append("| shape | " + " | ".join(names) + " | first export vs eager | vs torch.compile | export of floor |")
    lines.append("|" + "---|" * (len(names) + 4))
    for row in results["shapes"]:
        t = row["times"]
        ours_ms = t[f"ptxevo {first}"]["median"]
        cells = [f"{t[k]['median']:.4f}" for k in names]
        lines.append(f"| M={row['M']},N={row['N']} | " + " | ".join(cells) +
                     f" | {t['torch eager']['median'] / ours_ms:.2f}x | {t['torch.compile']['median'] / ours_ms:.2f}x"
                     f" | {100 * row['floor_ms'] / ours_ms:.0f}% |")
    lines += ["", "Errors:", ""]
    for row in results["shapes"]:
        lines.append(f"- M={row['M']},N={row['N']}: " + ", ".join(f"{k} {v:.3g}" for k, v in row["errors"].items()))
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
