"""The markdown table of torch_bench.py, pure Python (tested without torch)."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

from bench_stats import geomean

EAGER = "torch_eager"
COMPILE = "torch_compile"
AUTOGRAD = "torch_autograd"  # backward only: torch.autograd.grad through F.rms_norm
EXPERT = "expert"  # the expert kernel, built from a checkout given with --expert, run in this process


def _ms(v: Optional[float]) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:.4f}"


def _x(v: Optional[float]) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:.3f}x"


def _pct(v: Optional[float]) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{100 * v:.1f}%"


def _ms_ci(row: Dict[str, Any], provider: str) -> str:
    p = row.get("providers", {}).get(provider)
    return f"{p['median']:.4f} [{p['ci_low']:.4f}, {p['ci_high']:.4f}]" if p else "—"


def _speedup(row: Dict[str, Any], label: str, other: str) -> Optional[float]:
    s = row.get("speedups", {}).get(label, {}).get(other)
    return s["ratio"] if s else None


FASTER = "faster"  # per row, whichever of torch.compile and the expert has the smaller median


def _faster_reference(row: Dict[str, Any]) -> Optional[str]:
    p = row.get("providers", {})
    refs = [o for o in (COMPILE, EXPERT) if o in p]
    return min(refs, key=lambda o: p[o]["median"]) if refs else None


def markdown_table(rows: Sequence[Dict[str, Any]], labels: Sequence[str]) -> str:
    """One line per shape: floor, the torch providers and, where it ran, the expert kernel (ms),
    then per candidate its median [95% CI], fraction of the floor, and speedups (other ms /
    candidate ms; > 1: faster) over each of them, all timed in this run. With the expert, one more
    speedup: over the faster of torch.compile and the expert on that row (the inference-shape
    goal's measure). A last line holds the speedups' geometric means. Rows with autograd times
    (backward) add its column."""
    has_ag = any(AUTOGRAD in r.get("providers", {}) for r in rows)
    has_ex = any(EXPERT in r.get("providers", {}) for r in rows)
    others = [COMPILE, EAGER] + ([AUTOGRAD] if has_ag else []) + ([EXPERT, FASTER] if has_ex else [])
    head = ["shape", "MB", "floor ms", "eager ms [95% CI]", "compile ms [95% CI]"]
    head += ["autograd ms [95% CI]"] if has_ag else []
    head += ["expert ms [95% CI]"] if has_ex else []
    fixed = len(head)
    for l in labels:
        head += [f"{l} ms [95% CI]", f"{l} of floor", f"{l} vs compile", f"{l} vs eager"]
        head += [f"{l} vs autograd"] if has_ag else []
        head += [f"{l} vs expert", f"{l} vs faster of compile, expert"] if has_ex else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    geo: Dict[str, List[float]] = {}
    for r in rows:
        cells = [r["shape"], f"{r['bytes'] / 1e6:.0f}", _ms(r.get("floor_ms")), _ms_ci(r, EAGER), _ms_ci(r, COMPILE)]
        cells += [_ms_ci(r, AUTOGRAD)] if has_ag else []
        cells += [_ms_ci(r, EXPERT)] if has_ex else []
        for l in labels:
            p = r.get("providers", {}).get(l)
            if not p:
                cells += ["failed" if l in r.get("failed", {}) else "—"] + ["—"] * (1 + len(others))
                continue
            frac = r["floor_ms"] / p["median"] if r.get("floor_ms") else None
            ref = {o: _faster_reference(r) if o == FASTER else o for o in others}
            vs = {o: _speedup(r, l, ref[o]) if ref[o] else None for o in others}
            for o, v in vs.items():
                if v is not None:
                    geo.setdefault(f"{l}/{o}", []).append(v)
            cells += [_ms_ci(r, l), _pct(frac)] + [_x(vs[o]) for o in others]
        lines.append("| " + " | ".join(cells) + " |")
    if rows:
        cells = ["geomean"] + [""] * (fixed - 1)
        for l in labels:
            g = {o: geomean(geo[f"{l}/{o}"]) if geo.get(f"{l}/{o}") else None for o in others}
            cells += ["", ""] + [_x(g[o]) for o in others]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown_report(env: Dict[str, Any], rows: Sequence[Dict[str, Any]], labels: Sequence[str],
                    notes: Sequence[str]) -> str:
    what = {"rmsnorm_bwd": "RMSNorm backward", "rmsnorm_fwd": "RMSNorm forward"}.get(env.get("op", ""), "RMSNorm")
    out = [f"# {what}: candidates against PyTorch", ""]
    for k in ("date", "commit", "gpu", "nvidia_driver", "cuda_driver_api", "torch", "torch_cuda", "triton", "mode"):
        out.append(f"- {k}: {env.get(k)}")
    bw = env.get("copy_bandwidth_Bps")
    if bw:
        out.append(f"- device-to-device copy: {bw / 1e12:.3f} TB/s (bytes read + written); floor = bytes / that")
    out += ["", markdown_table(rows, labels)]
    out += [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"
