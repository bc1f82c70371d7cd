"""RMSNorm's fp64 references and the gate's error measures, for torch tensors: the forward
(out, rstd, residual_out) and the backward (dx, dw), checked block by block so that no whole
fp64 copy of a large tensor is ever made. torch is imported inside functions."""

from __future__ import annotations

import argparse
import math
from typing import Any, Dict, List, Tuple

from launch_json import ShapeSpec, TensorSpec


def check_blocks(m: int, n: int, check_rows: int, block_elems: int = 1 << 25) -> List[Tuple[int, int, bool]]:
    """Row blocks of at most block_elems elements covering all M rows (dw's fp64 reference needs
    every row), each with whether dx is checked on it: all blocks when check_rows <= 0 or >= M,
    else about check_rows rows in whole blocks spread evenly, the first and the last always."""
    step = max(1, block_elems // max(1, n))
    blocks = [(r0, min(m, r0 + step)) for r0 in range(0, m, step)]
    if check_rows <= 0 or check_rows >= m:
        return [(a, b, True) for a, b in blocks]
    want = max(2, -(-check_rows // step))
    if want >= len(blocks):
        return [(a, b, True) for a, b in blocks]
    chosen = {round(i * (len(blocks) - 1) / (want - 1)) for i in range(want)}
    return [(a, b, i in chosen) for i, (a, b) in enumerate(blocks)]


def tolerance(t: TensorSpec, args: argparse.Namespace) -> Tuple[float, float]:
    rel = args.rel_l2 if args.rel_l2 is not None else (t.rel_l2 if t.rel_l2 is not None else 1e-2)
    mx = args.max_abs if args.max_abs is not None else (t.max_abs if t.max_abs is not None else 1e-1)
    return rel, mx


def rmsnorm_reference(x, w, eps: float, residual=None):
    """fp64 out and rstd of a block of rows (of h = x + residual with a residual)."""
    import torch
    xd = x.to(torch.float64)
    if residual is not None:
        xd = xd + residual.to(torch.float64)
    rstd = torch.rsqrt(xd.square().mean(dim=-1, keepdim=True) + eps)
    out = xd * rstd
    if w is not None:
        out = out * w.to(torch.float64)
    return out, rstd.squeeze(-1)


class ErrorAcc:
    """Relative L2 error and max-abs error normalized by max(1, max |ref|), as the gate computes
    them, accumulated over blocks of rows; non-finite outputs counted."""

    def __init__(self) -> None:
        self.diff2 = self.ref2 = self.max_diff = self.max_ref = 0.0
        self.nonfinite = 0

    def add(self, out, ref) -> None:
        import torch
        o = out.to(torch.float64)
        finite = torch.isfinite(o)
        self.nonfinite += int((~finite).sum())
        d = torch.where(finite, o - ref, torch.zeros_like(ref))
        self.diff2 += float(d.square().sum())
        self.ref2 += float(ref.square().sum())
        self.max_diff = max(self.max_diff, float(d.abs().max()) if d.numel() else 0.0)
        self.max_ref = max(self.max_ref, float(ref.abs().max()) if ref.numel() else 0.0)

    def result(self, rel_tol: float, abs_tol: float) -> Dict[str, Any]:
        rel = math.sqrt(self.diff2) / math.sqrt(self.ref2) if self.ref2 > 0 else math.sqrt(self.diff2)
        mx = self.max_diff / max(1.0, self.max_ref)
        ok = self.nonfinite == 0 and rel <= rel_tol and mx <= abs_tol
        msg = ""
        if self.nonfinite:
            msg = f"{self.nonfinite} non-finite elements (unwritten, NaN or inf)"
        elif not ok:
            msg = f"rel_l2 {rel:.3g} (tolerance {rel_tol:g}), max_abs {mx:.3g} (tolerance {abs_tol:g})"
        return {"rel_l2": rel, "max_abs": mx, "nonfinite": self.nonfinite, "ok": ok, "message": msg}


def compare(shape: ShapeSpec, opts: Dict[str, Any], inputs: Dict[str, Any], results: Dict[str, Dict[str, Any]],
            args: argparse.Namespace) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """Checks several providers' outputs of one input set against one fp64 reference, computed
    block by block (a whole fp64 copy of a 2^31-element tensor would take 17 GB)."""
    import torch
    x, w, res = inputs["x"], inputs.get("w"), inputs.get("residual")
    rows, n = x.shape[0], x.shape[-1]
    step = max(1, (1 << 25) // max(1, n))
    accs = {p: {name: ErrorAcc() for name in outs} for p, outs in results.items()}
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        blk_res = res[r0:r1] if res is not None else None
        ref_out, ref_rstd = rmsnorm_reference(x[r0:r1], w, opts["eps"], blk_res)
        refs = {"out": ref_out, "rstd": ref_rstd}
        if blk_res is not None:
            refs["residual_out"] = x[r0:r1].to(torch.float64) + blk_res.to(torch.float64)
        for p, outs in results.items():
            for name, t in outs.items():
                accs[p][name].add(t[r0:r1], refs[name])
    report: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for p, per in accs.items():
        report[p] = {}
        for name, acc in per.items():
            report[p][name] = acc.result(*tolerance(shape.tensor(name), args))
    return report


def real_rstd(x, eps: float, block_elems: int = 1 << 26):
    """fp32 rstd of each row of x, rsqrt(mean(x^2) + eps) in fp32, block by block (an fp32 copy of
    a 2^31-element x would take 8 GiB)."""
    import torch
    m, n = x.shape[0], x.shape[-1]
    out = torch.empty(m, dtype=torch.float32, device=x.device)
    step = max(1, block_elems // max(1, n))
    for r0 in range(0, m, step):
        xf = x[r0:r0 + step].float()
        out[r0:r0 + step] = torch.rsqrt(xf.square().mean(dim=-1) + eps)
    return out


def rmsnorm_bwd_torch(x, w, dout, rstd):
    """The backward as an explicit fp32 torch formula (QuACK's rmsnorm_bwd_ref; kernels/rmsnorm/README.md,
    "QuACK's backward"):
    xhat = x * rstd, g = dout * w, c1 = mean(xhat * g), dx = (g - xhat * c1) * rstd in x's dtype,
    dw = sum over rows of dout * xhat (fp32). Eager runs it; torch.compile compiles it."""
    r = rstd.float().unsqueeze(-1)
    xhat = x.float() * r
    g = dout.float() * w.float() if w is not None else dout.float()
    c1 = (xhat * g).mean(dim=-1, keepdim=True)
    dx = ((g - xhat * c1) * r).to(x.dtype)
    dw = (dout.float() * xhat).sum(dim=0) if w is not None else None
    return dx, dw


def rmsnorm_bwd_reference(x, w, dout, rstd, with_dx: bool = True, with_dw: bool = True):
    """fp64 dx and dw's partial sum over a block of rows (None where not asked for or without a
    weight), from the given rstd."""
    import torch
    r = rstd.to(torch.float64).unsqueeze(-1)
    xhat = x.to(torch.float64) * r
    dd = dout.to(torch.float64)
    dw = (dd * xhat).sum(dim=0) if w is not None and with_dw else None
    dx = None
    if with_dx:
        g = dd * w.to(torch.float64) if w is not None else dd
        c1 = (xhat * g).mean(dim=-1, keepdim=True)
        dx = (g - xhat * c1) * r
    return dx, dw


def compare_bwd(shape: ShapeSpec, inputs: Dict[str, Any], results: Dict[str, Dict[str, Any]],
                args: argparse.Namespace) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """Checks several providers' dx and dw of one input set against an fp64 reference: dw over
    every row, dx on the rows of check_blocks (--check-rows), block by block."""
    import torch
    x, w, dout, rstd = inputs["x"], inputs.get("w"), inputs["dout"], inputs["rstd"]
    m, n = x.shape[0], x.shape[-1]
    accs = {p: {name: ErrorAcc() for name in outs} for p, outs in results.items()}
    want_dw = w is not None and any("dw" in outs for outs in results.values())
    dw_ref = torch.zeros(n, dtype=torch.float64, device=x.device) if want_dw else None
    checked = 0
    for r0, r1, with_dx in check_blocks(m, n, getattr(args, "check_rows", 0)):
        if not with_dx and not want_dw:
            continue
        dx_ref, dw_part = rmsnorm_bwd_reference(x[r0:r1], w, dout[r0:r1], rstd[r0:r1], with_dx=with_dx,
                                                with_dw=want_dw)
        if dw_ref is not None:
            dw_ref += dw_part
        if with_dx:
            checked += r1 - r0
            for p, outs in results.items():
                if "dx" in outs:
                    accs[p]["dx"].add(outs["dx"][r0:r1], dx_ref)
        del dx_ref, dw_part
    for p, outs in results.items():
        if "dw" in outs:
            accs[p]["dw"].add(outs["dw"], dw_ref)
    report: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for p, per in accs.items():
        report[p] = {}
        for name, acc in per.items():
            r = acc.result(*tolerance(shape.tensor(name), args))
            if name == "dx":
                r["rows_checked"] = checked
            report[p][name] = r
    return report
