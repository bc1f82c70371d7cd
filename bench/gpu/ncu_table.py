#!/usr/bin/env python3
"""A short table from an Nsight Compute CSV (`ncu --csv`, page "details"): per kernel launch its
duration, throughputs, occupancy and launch resources, and the rules that name a stall or an
occupancy limit. The profiled program's own output may come first on stdout: the table starts at
ncu's header row.

Usage: ncu_table.py NCU_CSV
"""
import csv
import sys

WANT = ("Duration", "Compute (SM) Throughput", "Memory Throughput", "DRAM Throughput", "Achieved Occupancy",
        "Registers Per Thread", "Block Size", "Grid Size", "Dynamic Shared Memory Per Block",
        "Warp Cycles Per Issued Instruction")


def table(path: str) -> list:
    rows = [r for r in csv.reader(open(path, errors="replace")) if len(r) > 10]
    start = next((i for i, r in enumerate(rows) if r[0] == "ID"), None)
    if start is None:
        raise SystemExit(f"{path}: no ncu rows (see the run's stderr)")
    head, body = rows[start], rows[start + 1:]
    col = {n: i for i, n in enumerate(head)}
    out = []
    for r in body:
        name = f"{r[col['ID']]}:{r[col['Kernel Name']][:40]}"
        metric = r[col["Metric Name"]]
        if metric in WANT:
            out.append(f"{name:44s} {metric:40s} {r[col['Metric Value']]:>18s} {r[col['Metric Unit']]}")
        rule = r[col["Rule Description"]] if len(r) > col["Rule Description"] else ""
        if rule and ("stalled" in rule or "limited by" in rule):
            out.append(f"{name:44s} {r[col['Rule Name']]}: {rule[:240]}")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print("\n".join(table(sys.argv[1])))
