#!/usr/bin/env python3
"""Summarises the CSV of bench/gpu/ncu_kda_sass.sh: instructions executed per opcode and
the share of stall samples per opcode and per stall reason, normalised by an instruction count
(e.g. the warp-chunks of the kernel) when --per is given.

    python3 bench/kda/sass_summary.py sass_kda_fwd_recurrence.csv [--per 393216] [--top 25]
"""

from __future__ import annotations

import argparse
import collections
import csv
import sys
from typing import Dict, List, Optional, Sequence


def parse(lines: Sequence[str]) -> List[Dict[str, str]]:
    rows = list(csv.reader(lines))
    for i, r in enumerate(rows):
        if len(r) > 3 and r[0] == "Address":
            hdr = r
            return [dict(zip(hdr, x)) for x in rows[i + 1:] if len(x) == len(hdr)]
    raise ValueError("no 'Address' header row: not an ncu --page source --csv file")


def opcode(sass: str) -> str:
    parts = sass.split()
    if not parts:
        return "?"
    op = parts[1] if parts[0].startswith("@") and len(parts) > 1 else parts[0]
    return op.split(".")[0]


def num(x: str) -> float:
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def summarise(rows: List[Dict[str, str]], per: float, top: int) -> str:
    samples = collections.Counter()
    executed = collections.Counter()
    reasons = collections.Counter()
    for r in rows:
        op = opcode(r.get("Source", ""))
        samples[op] += num(r.get("Warp Stall Sampling (All Samples)", "0"))
        executed[op] += num(r.get("Instructions Executed", "0"))
        for k, v in r.items():
            if k.startswith("stall_") and "Not Issued" not in k:
                reasons[k] += num(v)
    total = sum(samples.values()) or 1.0
    out = [f"instructions executed: {sum(executed.values()) / per:.1f} per unit (--per {per:g})",
           "| opcode | executed / unit | stall samples |", "|---|---|---|"]
    for op, v in samples.most_common(top):
        out.append(f"| {op} | {executed[op] / per:.1f} | {100 * v / total:.1f}% |")
    rt = sum(reasons.values()) or 1.0
    out += ["", "| stall reason | share |", "|---|---|"]
    out += [f"| {k} | {100 * v / rt:.1f}% |" for k, v in reasons.most_common() if v > 0]
    return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv")
    p.add_argument("--per", type=float, default=1.0)
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args(argv)
    with open(a.csv) as f:
        print(summarise(parse(f.readlines()), a.per, a.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
