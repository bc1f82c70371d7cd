#!/usr/bin/env python3
"""Where a KDA candidate's time goes: each kernel of its launch plan timed on its own.

    python3 bench/kda/phase_times.py --candidate LABEL=DIR [...] [--shapes 1 6] [--reps 20] [--out DIR]

For every chosen benchmark shape and candidate (built by `ptxevo build`), on one input set of
fla_bench.py's (docs/kda.md 3.5): the whole plan once (so a later kernel reads what an earlier one
wrote), then, round-robin over the plan's kernels and the whole plan, `--reps` launches of each
between two CUDA events, repeated `--rounds` times; the median per launch is reported. A kernel
timed alone sees a warm L2 from its own previous launch, so the parts may sum to less than the
whole: the table shows both. Correctness is fla_bench.py's and the gate's business, not this
script's. Writes phase_times.json (and .md) to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "rmsnorm"))

from kda_bench_core import kda_options, scenario_label, scenario_number, select_shapes, shape_of  # noqa: E402
from launch_json import load_build_dir, parse_candidate_arg  # noqa: E402


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--candidate", action="append", required=True, help="LABEL=BUILD_DIR (repeatable)")
    p.add_argument("--shapes", nargs="*", default=[], help="scenario numbers or shape keys (default: all)")
    p.add_argument("--reps", type=int, default=20, help="launches between two events")
    p.add_argument("--rounds", type=int, default=5, help="round-robin rounds (the median is reported)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="", help="folder for phase_times.json and .md")
    a = p.parse_args(argv)
    if a.reps < 1 or a.rounds < 1:
        p.error("--reps and --rounds must be positive")
    return a


def table(rows: Sequence[Dict[str, Any]]) -> str:
    """Markdown: one line per (shape, candidate), the kernels' ms in plan order, their sum and the
    whole plan (FlashKDA beside them: fla_bench.py --flashkda)."""
    lines = ["| shape | candidate | kernels (ms each, alone) | sum | plan |", "|---|---|---|---|---|"]
    for r in rows:
        parts = ", ".join(f"{k['entry']} {k['ms']:.3f}" for k in r["kernels"])
        total = sum(k["ms"] for k in r["kernels"])
        lines.append(f"| {r['label']} | {r['candidate']} | {parts} | {total:.3f} | {r['plan_ms']:.3f} |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    import torch
    from cuda_ctypes import Driver, Module, prepare_plan, run_plan
    from fla_bench import cu_tensor, make_inputs, poisoned_outputs

    builds = [load_build_dir(l, p) for l, p in (parse_candidate_arg(c) for c in args.candidate)]
    opts = kda_options(builds[0])
    keys = select_shapes(builds, args.shapes, 0)
    torch.empty(1, device="cuda")
    drv = Driver()
    modules = {}
    for b in builds:
        with open(b.cubin_path, "rb") as f:
            modules[b.label] = Module(drv, f.read(), b.cubin_path)
    stream = torch.cuda.current_stream().cuda_stream
    rows: List[Dict[str, Any]] = []
    for key in keys:
        shape = shape_of(builds[0], key)
        inp = make_inputs(shape, opts, args.seed, cu_tensor(shape))
        n = scenario_number(shape, opts)
        for b in builds:
            outs = poisoned_outputs(shape_of(b, key))
            ptrs = {**{k: v.data_ptr() for k, v in inp.items()}, **{k: v.data_ptr() for k, v in outs.items()}}
            plan = prepare_plan(modules[b.label], shape_of(b, key).kernels, ptrs)
            run_plan(plan, stream)
            torch.cuda.synchronize()
            steps = [(k.entry, [launch]) for k, launch in zip(shape_of(b, key).kernels, plan)] + [("plan", plan)]
            times: Dict[int, List[float]] = {i: [] for i in range(len(steps))}
            for _ in range(args.rounds):
                for i, (_, launches) in enumerate(steps):
                    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(args.reps):
                        run_plan(launches, stream)
                    stop.record()
                    stop.synchronize()
                    times[i].append(start.elapsed_time(stop) / args.reps)
            med = [statistics.median(times[i]) for i in range(len(steps))]
            kern = shape_of(b, key).kernels
            rows.append({"shape": key, "label": scenario_label(shape), "scenario": n, "candidate": b.label,
                         "kernels": [{"entry": k.entry, "grid": list(k.grid), "block": list(k.block),
                                      "shared_bytes": k.shared_bytes, "ms": med[i]} for i, k in enumerate(kern)],
                         "plan_ms": med[-1], "spread": {s[0]: [min(times[i]), max(times[i])] for i, s in enumerate(steps)}})
            print(f"{rows[-1]['label']:<28} {b.label:<14} " +
                  " ".join(f"{k['entry']}={k['ms']:.3f}" for k in rows[-1]["kernels"]) + f" plan={med[-1]:.3f} ms",
                  flush=True)
            del outs
        del inp
        torch.cuda.empty_cache()
    md = table(rows)
    print(md)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "phase_times.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "reps": args.reps, "rounds": args.rounds,
                       "rows": rows}, f, indent=1)
        with open(os.path.join(args.out, "phase_times.md"), "w") as f:
            f.write(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
