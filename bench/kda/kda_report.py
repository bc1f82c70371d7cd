"""The markdown report of fla_bench.py, pure Python (tested without torch)."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

from bench_stats import geomean

FLA = "fla"  # flash-linear-attention chunk_kda, the op's flags (docs/kda.md 4.1)
FLA_SAFE = "fla_safe_gate"  # the same with safe_gate=True (its fastest Triton path), on request
FLA_PROVIDERS = (FLA, FLA_SAFE)


def _ms(v: Optional[float]) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:.3f}"


def _x(v: Optional[float]) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:.2f}x"


def _e(v: Optional[float]) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:.1e}"


def _ms_ci(row: Dict[str, Any], provider: str) -> str:
    p = row.get("providers", {}).get(provider)
    return f"{p['median']:.3f} [{p['ci_low']:.3f}, {p['ci_high']:.3f}]" if p else "—"


def _why_missing(row: Dict[str, Any], provider: str) -> str:
    if provider in row.get("failed", {}):
        return "failed"
    if provider in row.get("excluded", {}):
        return "excluded"
    if provider in FLA_PROVIDERS:
        st = row.get("fla", {}).get(provider, {}).get("status")
        return st if st and st != "timed" else "—"
    return "—"


def ratio_of(row: Dict[str, Any], label: str, what: str) -> Optional[float]:
    r = row.get("ratios", {}).get(label, {}).get(what)
    if r is None:
        return None
    return r["ratio"] if isinstance(r, dict) else r


def time_table(rows: Sequence[Dict[str, Any]], labels: Sequence[str], fla_names: Sequence[str]) -> str:
    """One line per scenario: FLA's time(s), then per candidate its median [95% CI], FLA / ours and
    FlashKDA / ours (medians of paired ratios from the same process: > 1 means ours is faster; "—"
    where FlashKDA did not run, --flashkda). The last line holds geometric means."""
    head = ["#", "scenario"] + [f"{f} ms [95% CI]" for f in fla_names]
    for l in labels:
        head += [f"{l} ms [95% CI]", f"{l}: {FLA}/ours", f"{l}: FlashKDA/ours"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    geo: Dict[str, List[float]] = {}
    for r in rows:
        cells = [str(r.get("scenario") or ""), r.get("label", r["shape"])]
        for f in fla_names:
            cells.append(_ms_ci(r, f) if f in r.get("providers", {}) else _why_missing(r, f))
        for l in labels:
            if l not in r.get("providers", {}):
                cells += [_why_missing(r, l), "—", "—"]
                continue
            vs_fla, vs_cut = ratio_of(r, l, "fla_over_ours"), ratio_of(r, l, "flashkda_over_ours")
            for name, v in (("fla", vs_fla), ("cutlass", vs_cut)):
                if v is not None and math.isfinite(v):
                    geo.setdefault(f"{l}/{name}", []).append(v)
            cells += [_ms_ci(r, l), _x(vs_fla), _x(vs_cut)]
        lines.append("| " + " | ".join(cells) + " |")
    if rows:
        cells = ["", "geomean"] + [""] * len(fla_names)
        for l in labels:
            cells.append("")
            for what in ("fla", "cutlass"):
                g = geo.get(f"{l}/{what}")
                cells.append(_x(geomean(g)) + (f" ({len(g)})" if len(g) != len(rows) else "") if g else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _acc_cell(check: Optional[Dict[str, Dict[str, Any]]]) -> str:
    if not check:
        return "—"
    out, st = check.get("out"), check.get("final_state")
    text = _e(out["rel_l2"]) if out else "—"
    if st:
        text += " / " + _e(st["rel_l2"])
    bad = [c for c in (out, st) if c and not c.get("ok", True)]
    if any(c.get("nonfinite") for c in bad):
        return "NON-FINITE " + text
    return ("FAIL " if bad else "") + text


def accuracy_table(rows: Sequence[Dict[str, Any]], labels: Sequence[str], fla_names: Sequence[str]) -> str:
    """RMSE / RMS(reference) of out / final state against the fp64 recurrent reference, per
    provider, and each candidate's against FLA's outputs."""
    head = ["#", "scenario", "reference"] + [f"{p} vs fp64" for p in list(fla_names) + list(labels)]
    head += [f"{l} vs {FLA}" for l in labels]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ref = r.get("reference", {})
        cells = [str(r.get("scenario") or ""), r.get("label", r["shape"]), ref.get("what", "—")]
        for p in list(fla_names) + list(labels):
            cells.append(_acc_cell(r.get("checks", {}).get(p)))
        for l in labels:
            v = r.get("vs_fla", {}).get(l)
            if not v:
                cells.append("—")
                continue
            cells.append(_e(v.get("out")) + (" / " + _e(v["final_state"]) if "final_state" in v else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown_report(env: Dict[str, Any], rows: Sequence[Dict[str, Any]], labels: Sequence[str],
                    fla_names: Sequence[str], notes: Sequence[str]) -> str:
    out = ["# KDA forward: candidates against flash-linear-attention chunk_kda", ""]
    for k in ("date", "commit", "gpu", "sm_count", "nvidia_driver", "cuda_driver_api", "torch", "torch_cuda", "triton",
              "fla", "python", "samples", "target_batch_ms"):
        out.append(f"- {k}: {env.get(k)}")
    out += ["", "## Time (ms; ratios > 1: the candidate is faster)", "", time_table(rows, labels, fla_names),
            "## Accuracy (RMSE / RMS of the reference: out / final state)", "",
            accuracy_table(rows, labels, fla_names), "## Notes", ""]
    out += [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def short_table(rows: Sequence[Dict[str, Any]], labels: Sequence[str]) -> str:
    """Plain text for the end of a log: per scenario FLA's median and each candidate's median with
    FLA/ours and FlashKDA/ours (live and paired, as in time_table; "—" where it did not run);
    geomeans last."""
    lines = []
    head = f"{'#':>2} {'scenario':<32} {'FLA ms':>8}" + "".join(f" {l[:23]:>23}" for l in labels)
    lines.append(head)
    geo: Dict[str, List[float]] = {}
    for r in rows:
        fla = r.get("providers", {}).get(FLA)
        line = f"{str(r.get('scenario') or ''):>2} {r.get('label', r['shape'])[:32]:<32} " \
               f"{(format(fla['median'], '8.3f') if fla else _why_missing(r, FLA)[:8].rjust(8))}"
        for l in labels:
            p = r.get("providers", {}).get(l)
            if not p:
                line += f" {_why_missing(r, l):>23}"
                continue
            a, c = ratio_of(r, l, "fla_over_ours"), ratio_of(r, l, "flashkda_over_ours")
            for name, v in (("fla", a), ("cut", c)):
                if v is not None and math.isfinite(v):
                    geo.setdefault(f"{l}/{name}", []).append(v)
            line += f" {p['median']:7.3f} {_x(a):>6} {_x(c):>7}"
        lines.append(line)
    line = f"{'':>2} {'geomean (FLA/ours, FlashKDA/ours)':<32} {'':>8}"
    for l in labels:
        a, c = geo.get(f"{l}/fla"), geo.get(f"{l}/cut")
        line += f" {'':>7} {_x(geomean(a)) if a else '—':>6} {_x(geomean(c)) if c else '—':>7}"
    lines.append(line)
    return "\n".join(lines) + "\n"
