"""The pure parts of fla_bench.py (no torch): the kda_fwd op's options, tensors and sequences as
kernels/kda/kda_fwd_op.cpp lays them out, the six docs/targets.md scenarios, the arguments of flash-linear-attention's chunk_kda, the time budget, and the line
protocol of the preflight process.
"""

from __future__ import annotations

import math
import struct
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from launch_json import BuildDir, ShapeSpec, TensorSpec

HEAD_DIM = 128

# The packed length sets by sequence count (kernels/kda/kda_shape.cpp, length_sets()): a shape
# with B = 1 and N > 1 packs these N sequences, with cu_seqlens their running sums.
LENGTH_SETS: Dict[int, List[int]] = {
    2: [1, 1],
    3: [17, 33, 65],
    4: [16, 4, 8, 12],
    5: [15, 85, 200, 900, 800],
    6: [1300, 547, 2048, 963, 271, 3063],
    7: [1, 15, 16, 17, 63, 64, 65],
    8: [1024] * 8,
    9: [129, 1, 31, 700, 2, 33, 250, 47, 96],
    10: [300, 5, 1000, 64, 17, 1, 500, 128, 33, 2000],
}

# docs/targets.md's scenario number by (H, N), for B = 1, T = 8192.
SCENARIOS = {(96, 1): 1, (96, 6): 2, (96, 8): 3, (64, 1): 4, (64, 6): 5, (64, 8): 6}

KNOWN_OPTIONS = {"gate", "lower_bound", "scale", "initial_state", "final_state", "head_dim"}


class BenchError(RuntimeError):
    """A problem with the inputs or a candidate that the user can act on."""


def float32(v: float) -> float:
    """v rounded to float32, as the kernel receives scale and lower_bound."""
    return struct.unpack("f", struct.pack("f", v))[0]


# ---------------------------------------------------------------- options and shapes

def _bool(cfg: Dict[str, str], key: str, default: bool, where: str) -> bool:
    v = cfg.get(key)
    if v is None:
        return default
    if v in ("true", "false"):
        return v == "true"
    raise BenchError(f"{where}: option {key} = '{v}' is not true or false")


def kda_options(b: BuildDir, op: str = "kda_fwd") -> Dict[str, Any]:
    """The options of a kda_fwd (or, with op, kda_bwd: the same options) build (its launch.json
    "config"), with KdaFwdOp's defaults."""
    if b.op != op:
        raise BenchError(f"{b.label}: op '{b.op}'; expected a build of {op}")
    cfg = b.config
    unknown = sorted(set(cfg) - KNOWN_OPTIONS)
    if unknown:
        raise BenchError(f"{b.label}: options {unknown} are unknown to fla_bench.py (it knows {sorted(KNOWN_OPTIONS)})")
    gate = cfg.get("gate", "lower_bound")
    if gate not in ("lower_bound", "softplus"):
        raise BenchError(f"{b.label}: gate '{gate}' is not lower_bound or softplus")
    if cfg.get("head_dim", "128") != "128":
        raise BenchError(f"{b.label}: head_dim {cfg['head_dim']}: only 128 is supported")
    lower_bound = None
    if gate == "lower_bound":
        lower_bound = float32(float(cfg.get("lower_bound", "-5")))
    elif "lower_bound" in cfg:
        raise BenchError(f"{b.label}: lower_bound is set but the gate is softplus")
    scale = float32(float(cfg["scale"])) if "scale" in cfg else float32(1.0 / math.sqrt(HEAD_DIM))
    return {"gate": gate, "lower_bound": lower_bound, "scale": scale,
            "initial_state": _bool(cfg, "initial_state", True, b.label),
            "final_state": _bool(cfg, "final_state", True, b.label)}


def check_candidates_agree(builds: Sequence[BuildDir]) -> None:
    first = builds[0]
    for b in builds[1:]:
        if b.op != first.op or b.config != first.config:
            raise BenchError(f"{b.label} ({b.op} {b.config}) and {first.label} ({first.op} {first.config}) "
                             "were built for different ops or options; compare candidates of one spec")


def dims_of(shape: ShapeSpec) -> Tuple[int, int, int, int]:
    d = shape.dims
    try:
        B, T, H, N = (int(d[k]) for k in ("B", "T", "H", "N"))
    except KeyError as e:
        raise BenchError(f"shape {shape.key()}: no dimension {e.args[0]} (kda_fwd shapes are B, T, H, N)")
    if d.get("D", HEAD_DIM) != HEAD_DIM:
        raise BenchError(f"shape {shape.key()}: D must be {HEAD_DIM}")
    return B, T, H, N


def is_packed(B: int, N: int) -> bool:
    return N != B


def sequences(B: int, T: int, N: int) -> List[Tuple[int, int]]:
    """(first packed token, length) of every sequence, as kda_shape.cpp defines them: N == B is B
    rows of T tokens; otherwise B == 1 and the length set of N, which must sum to T."""
    if N == B:
        return [(b * T, T) for b in range(B)]
    if B != 1:
        raise BenchError(f"N={N} with B={B}: packed sequences need B = 1")
    lengths = LENGTH_SETS.get(N)
    if lengths is None:
        raise BenchError(f"no length set for N={N} (sets exist for N in {sorted(LENGTH_SETS)})")
    if sum(lengths) != T:
        raise BenchError(f"the N={N} set sums to {sum(lengths)}, not T={T}")
    out, pos = [], 0
    for n in lengths:
        out.append((pos, n))
        pos += n
    return out


def cu_seqlens(B: int, T: int, N: int) -> Optional[List[int]]:
    """The cu_seqlens values of a packed shape (None for B fixed-length rows)."""
    if not is_packed(B, N):
        return None
    return [s for s, _ in sequences(B, T, N)] + [T]


def scenario_number(shape: ShapeSpec, opts: Dict[str, Any]) -> Optional[int]:
    """docs/targets.md's scenario (1-6) this shape and option set is, or None."""
    B, T, H, N = dims_of(shape)
    if (B, T) != (1, 8192) or not targets_config(opts):
        return None
    return SCENARIOS.get((H, N))


def targets_config(opts: Dict[str, Any]) -> bool:
    """The six scenarios are defined for the lower-bound gate at -5, fp32 state in and out and the
    default scale only (FlashKDA's configuration)."""
    return (opts["gate"] == "lower_bound" and opts["lower_bound"] == -5.0 and opts["initial_state"]
            and opts["final_state"] and opts["scale"] == float32(1.0 / math.sqrt(HEAD_DIM)))


def scenario_label(shape: ShapeSpec) -> str:
    B, T, H, N = dims_of(shape)
    if not is_packed(B, N):
        return f"H={H} {B}x{T}" if B > 1 else f"H={H} {T}"
    lengths = LENGTH_SETS.get(N, [])
    if lengths and all(n == lengths[0] for n in lengths):
        return f"H={H} {N}x{lengths[0]}"
    return f"H={H} " + ",".join(str(n) for n in lengths)


def expected_tensors(B: int, T: int, H: int, N: int, opts: Dict[str, Any]) -> List[Tuple[str, str, List[int], str]]:
    """(name, dtype, shape, role) in the op's order (KdaFwdOp::tensors)."""
    tok = [B, T, H, HEAD_DIM]
    state = [N, H, HEAD_DIM, HEAD_DIM]
    out = [("q", "bf16", tok, "in"), ("k", "bf16", tok, "in"), ("v", "bf16", tok, "in"), ("g", "bf16", tok, "in"),
           ("beta", "bf16", [B, T, H], "in"), ("A_log", "f32", [H], "in"), ("dt_bias", "f32", [H, HEAD_DIM], "in")]
    if is_packed(B, N):
        out.append(("cu_seqlens", "i64", [N + 1], "in"))
    if opts["initial_state"]:
        out.append(("initial_state", "f32", state, "in"))
    out.append(("out", "bf16", tok, "out"))
    if opts["final_state"]:
        out.append(("final_state", "f32", state, "out"))
    out.append(("workspace", "u8", [workspace_bytes(B, T, H, N)], "scratch"))
    return out


def workspace_chunk_bytes(c: int) -> int:
    """One (head, chunk slot) of the prepare + recurrence pair's workspace (KdaFwdOp::workspace_chunk_bytes):
    Qd, W0, Kr^T bf16, M's two bf16 terms, 2^Gtot fp32, U0^T fp32."""
    return 3 * c * HEAD_DIM * 2 + 2 * c * c * 2 + HEAD_DIM * 4 + HEAD_DIM * c * 4


SEQSPLIT_CHAINS = 128  # KdaFwdOp::kSeqSplitChains
MAX_SEQSPLIT = 32      # KdaFwdOp::kMaxSeqSplit


def seq_segments(B: int, T: int, H: int, N: int, chunk: int, seqsplit: int) -> int:
    """KdaFwdOp::seq_segments: the sequence split's segment count for a shape (1: no split)."""
    if seqsplit <= 1:
        return 1
    longest = max(LENGTH_SETS[N]) if is_packed(B, N) else T
    p = min(seqsplit, SEQSPLIT_CHAINS // (N * H), -(-longest // chunk))
    return p if p >= 4 else 1


def workspace_bytes(B: int, T: int, H: int, N: int) -> int:
    """KdaFwdOp::workspace_bytes: H (N + T_total / C) slots at the largest CHUNK's need, then a
    4-byte flag a (head, CHUNK 16 slot) for PREPARE_CTAS > 0, then (16-byte aligned) the sequence
    split's segment states, 128 KB a (sequence, head, segment but the last) at the most segments
    any SEQSPLIT gives the shape."""
    total = B * T
    segs = seq_segments(B, T, H, N, 16, MAX_SEQSPLIT)
    seg_bytes = N * H * (segs - 1) * 2 * HEAD_DIM * HEAD_DIM * 4 + 16 if segs > 1 else 0
    return (max(H * (N + total // c) * workspace_chunk_bytes(c) for c in (16, 32, 64)) + H * (N + total // 16) * 4
            + seg_bytes)


def check_shape(shape: ShapeSpec, opts: Dict[str, Any]) -> None:
    """The shape's tensors must be what this script draws and compares (the op's layout), and the
    kernels' f32 scalars must include the scale (and lower bound) the reference uses."""
    B, T, H, N = dims_of(shape)
    sequences(B, T, N)
    want = expected_tensors(B, T, H, N, opts)
    have = [(t.name, t.dtype, list(t.shape), t.role) for t in shape.tensors]
    if have != want:
        raise BenchError(f"shape {shape.key()}: launch.json lists tensors {have}, but fla_bench.py lays out {want} "
                         "(kernels/kda/kda_fwd_op.cpp changed? update kda_bench_core.expected_tensors)")
    for k in shape.kernels:
        f32 = [a.value for a in k.args if a.kind == "scalar" and a.type == "f32"]
        if opts["scale"] not in f32:
            raise BenchError(f"shape {shape.key()}: kernel {k.entry} gets no f32 scalar equal to the scale "
                             f"{opts['scale']!r} (its f32 scalars: {f32})")
        if opts["lower_bound"] is not None and opts["lower_bound"] not in f32:
            raise BenchError(f"shape {shape.key()}: kernel {k.entry} gets no f32 scalar equal to the lower bound "
                             f"{opts['lower_bound']!r} (its f32 scalars: {f32})")


def select_shapes(builds: Sequence[BuildDir], wanted: Sequence[str], max_shapes: int) -> List[str]:
    """Benchmark shape keys of the first candidate (filtered by `wanted`, a list of keys such as
    "B=1,H=96,N=1,T=8192" or scenario numbers "1".."6"); every candidate must have each with the
    same tensors."""
    first = builds[0]
    shapes = [s for s in first.shapes if s.cls == "benchmark"]
    if not shapes:
        raise BenchError(f"{first.path}/launch.json has no benchmark shapes: build with --shapes benchmark or all")
    keys = [s.key() for s in shapes]
    if wanted:
        opts = kda_options(first, "kda_bwd" if first.op == "kda_bwd" else "kda_fwd")
        by_number = {str(scenario_number(s, opts)): s.key() for s in shapes if scenario_number(s, opts)}
        resolved = []
        for w in wanted:
            k = by_number.get(w, w)
            if k not in keys:
                raise BenchError(f"shape '{w}' is not a benchmark shape of {first.label} (it has {keys})")
            resolved.append(k)
        keys = [k for k in keys if k in resolved]
    if max_shapes > 0:
        keys = keys[:max_shapes]
    for b in builds[1:]:
        theirs = {s.key(): s for s in b.shapes}
        for k in keys:
            if k not in theirs:
                raise BenchError(f"{b.label} has no shape {k}; rebuild it from the same spec")
            mine = [t.signature() for t in shape_of(first, k).tensors]
            if [t.signature() for t in theirs[k].tensors] != mine:
                raise BenchError(f"{b.label} and {first.label} list different tensors for shape {k}")
    return keys


def shape_of(b: BuildDir, key: str) -> ShapeSpec:
    for s in b.shapes:
        if s.key() == key:
            return s
    raise KeyError(key)


def tolerance(t: Optional[TensorSpec], rel_override: Optional[float],
              abs_override: Optional[float]) -> Tuple[float, float]:
    """The gate's tolerance of an output from launch.json (the op's 1e-2 / 5e-2 when absent)."""
    rel = rel_override if rel_override is not None else (t.rel_l2 if t is not None and t.rel_l2 is not None else 1e-2)
    mx = abs_override if abs_override is not None else (t.max_abs if t is not None and t.max_abs is not None else 5e-2)
    return rel, mx


# ---------------------------------------------------------------- flash-linear-attention

def fla_kwargs(opts: Dict[str, Any], params: Iterable[str], safe_gate: bool = False) -> Dict[str, Any]:
    """Keyword arguments of fla.ops.kda.chunk_kda for the op's convention (docs/kda.md 4.1): raw gate,
    beta logits and unnormalised q, k fused in the kernel, the op's gate, V-first fp32 states.
    `params` are chunk_kda's parameter names (inspect.signature): FLA before state_v_first took
    the same flag as transpose_state_layout (a **kwargs entry)."""
    names = set(params)
    kw: Dict[str, Any] = {
        "scale": opts["scale"],
        "output_final_state": bool(opts["final_state"]),
        "use_qk_l2norm_in_kernel": True,
        "use_gate_in_kernel": True,
        "use_beta_sigmoid_in_kernel": True,
        # FLA picks the gate by `lower_bound is not None` (docs/kda.md 1.2): None is the softplus gate.
        "lower_bound": opts["lower_bound"],
    }
    if "state_v_first" in names:
        kw["state_v_first"] = True
    elif "kwargs" in names:
        kw["transpose_state_layout"] = True
    else:
        raise BenchError("this chunk_kda has neither state_v_first nor **kwargs (transpose_state_layout): "
                         "cannot pass V-first states")
    for p in ("use_qk_l2norm_in_kernel", "use_gate_in_kernel", "use_beta_sigmoid_in_kernel", "lower_bound"):
        if p not in names:
            raise BenchError(f"this chunk_kda has no parameter {p}: a version of flash-linear-attention before "
                             "0.4 (the fused gate, beta sigmoid and lower bound are needed)")
    if safe_gate:
        if opts["lower_bound"] is None or "safe_gate" not in names:
            raise BenchError("safe_gate needs the lower-bound gate and a chunk_kda with safe_gate")
        kw["safe_gate"] = True
    return kw


# ---------------------------------------------------------------- time budget

def child_deadline(start: float, budget_s: float, reserve_s: float) -> float:
    """When the preflight process must end: the budget less what the main phase keeps."""
    return start + max(0.0, budget_s - reserve_s)


def enough_time(now: float, start: float, budget_s: float, need_s: float) -> bool:
    return start + budget_s - now >= need_s


# ---------------------------------------------------------------- the preflight protocol
#
# The preflight process (fla_bench.py --preflight-child PLAN) runs each candidate once per shape
# (a kernel that faults or hangs is caught there, not in the process that keeps FLA's and the
# other candidates' results), then calls FLA once per shape, which autotunes and compiles its
# Triton kernels into Triton's disk cache, so the main process's first calls are fast. It prints
# one event a line; the parent feeds them to Preflight and, when the child ends, learns what it
# left unfinished.

PREFIX = "@@ "
# events: the fields after the kind; the last one takes the rest of the line
EVENTS = {
    "start": 0, "cand_start": 2, "cand_ok": 2, "cand_fail": 3, "fla_import_start": 0, "fla_import_ok": 1,
    "fla_import_fail": 1, "fla_start": 1, "fla_ok": 2, "fla_fail": 2, "done": 0,
}


def format_event(kind: str, *fields: Any) -> str:
    if kind not in EVENTS or len(fields) != EVENTS[kind]:
        raise ValueError(f"event {kind} with {len(fields)} fields")
    parts = [str(f).replace("\n", " ").replace("\r", " ") for f in fields]
    for p in parts[:-1]:
        if not p or " " in p:
            raise ValueError(f"event {kind}: field '{p}' must be one word")
    return PREFIX + " ".join([kind] + parts)


def parse_event(line: str) -> Optional[Tuple[str, List[str]]]:
    """(kind, fields) of an event line, or None for any other output."""
    if not line.startswith(PREFIX):
        return None
    rest = line[len(PREFIX):].rstrip("\r\n")
    kind, _, tail = rest.partition(" ")
    n = EVENTS.get(kind)
    if n is None:
        return None
    fields = tail.split(" ", n - 1) if n else []
    fields += [""] * (n - len(fields))  # an empty last field (message)
    return kind, fields


class Preflight:
    """What the preflight processes found: per candidate ok / failed / hung / untested, per shape
    whether FLA is warm (ok), failed, crashed, timed out or untested."""

    def __init__(self, candidates: Sequence[str], keys: Sequence[str], fla_keys: Sequence[str]) -> None:
        self.keys = list(keys)
        self.cand: Dict[str, Dict[str, Any]] = {c: {"status": "pending", "message": "", "ok_keys": []}
                                                for c in candidates}
        self.fla: Dict[str, Dict[str, Any]] = {k: {"status": "pending", "message": "", "seconds": None}
                                               for k in fla_keys}
        self.fla_import: Optional[Dict[str, Any]] = None
        self.current: Optional[Tuple[str, ...]] = None  # ("cand", label, key), ("fla", key), ("fla_import",)
        self.children = 0
        self.events = 0  # events other than "start": a child that adds none made no progress

    # -- what the next child does
    def pending_candidates(self) -> List[str]:
        return [c for c, s in self.cand.items() if s["status"] == "pending"]

    def pending_fla(self) -> List[str]:
        if self.fla_import is not None and not self.fla_import["ok"]:
            return []
        return [k for k, s in self.fla.items() if s["status"] == "pending"]

    def plan(self) -> Dict[str, List[str]]:
        return {"candidates": self.pending_candidates(), "fla": self.pending_fla()}

    def done(self) -> bool:
        p = self.plan()
        return not p["candidates"] and not p["fla"]

    def phase(self) -> str:
        """'cand' (a kernel is running: a short inactivity limit applies), 'fla' (FLA importing or
        autotuning: only the deadline applies) or 'other'."""
        if self.current is None:
            return "other"
        return "cand" if self.current[0] == "cand" else "fla"

    # -- events
    def feed(self, line: str) -> bool:
        ev = parse_event(line)
        if ev is None:
            return False
        kind, f = ev
        if kind != "start":
            self.events += 1
        if kind == "start":
            self.current = None
        elif kind == "cand_start" and f[0] in self.cand:
            self.current = ("cand", f[0], f[1])
        elif kind == "cand_ok" and f[0] in self.cand:
            s = self.cand[f[0]]
            if f[1] not in s["ok_keys"]:
                s["ok_keys"].append(f[1])
            if s["status"] == "pending" and all(k in s["ok_keys"] for k in self.keys):
                s["status"] = "ok"
            self.current = None
        elif kind == "cand_fail" and f[0] in self.cand:
            self.cand[f[0]].update(status="failed", message=f"{f[1]}: {f[2]}")
            self.current = None
        elif kind == "fla_import_start":
            self.current = ("fla_import",)
        elif kind == "fla_import_ok":
            self.fla_import = {"ok": True, "version": f[0]}
            self.current = None
        elif kind == "fla_import_fail":
            self.fla_import = {"ok": False, "message": f[0]}
            for s in self.fla.values():
                if s["status"] == "pending":
                    s.update(status="failed", message=f"flash-linear-attention did not import: {f[0]}")
            self.current = None
        elif kind == "fla_start" and f[0] in self.fla:
            self.current = ("fla", f[0])
        elif kind == "fla_ok" and f[0] in self.fla:
            self.fla[f[0]].update(status="ok", seconds=float(f[1]))
            self.current = None
        elif kind == "fla_fail" and f[0] in self.fla:
            self.fla[f[0]].update(status="failed", message=f[1])
            self.current = None
        elif kind == "done":
            self.current = None
        return True

    def child_ended(self, rc: Optional[int], killed: Optional[str], waited_s: float = 0.0) -> None:
        """The child exited with rc, or was killed: 'inactivity' (no event for waited_s seconds)
        or 'deadline' (the preflight's time is up)."""
        self.children += 1
        how = (f"hung (no progress for {waited_s:.0f} s; killed)" if killed == "inactivity" else
               "was still running at the preflight deadline (killed)" if killed == "deadline" else
               f"crashed the preflight process (exit status {rc})")
        cur = self.current
        if cur is not None and cur[0] == "cand":
            if killed == "deadline" and waited_s < 5.0:  # it had just started: not its fault
                self.cand[cur[1]].update(status="untested", message="the preflight ran out of time")
            else:
                status = "hung" if killed else "failed"
                self.cand[cur[1]].update(status=status, message=f"{cur[2]}: {how}")
        elif cur is not None and cur[0] == "fla":
            if killed == "deadline":
                self.fla[cur[1]].update(status="timeout", message="FLA's autotuning did not finish within the budget")
            else:
                self.fla[cur[1]].update(status="crashed", message=f"FLA {how}")
        elif cur is not None and cur[0] == "fla_import":
            self.fla_import = {"ok": False, "message": f"importing flash-linear-attention {how}"}
            for s in self.fla.values():
                if s["status"] == "pending":
                    s.update(status="failed", message=self.fla_import["message"])
        if killed == "deadline":
            self.give_up("the preflight ran out of time")
        self.current = None

    def give_up(self, why: str) -> None:
        """Nothing more is tried: pending candidates are run untested in the main process; FLA
        shapes not yet warm are skipped (their autotuning would not fit either)."""
        for s in self.cand.values():
            if s["status"] == "pending":
                s.update(status="untested", message=why)
        for s in self.fla.values():
            if s["status"] == "pending":
                s.update(status="timeout", message=f"FLA not warmed up: {why}")

    def usable_candidates(self) -> List[str]:
        return [c for c, s in self.cand.items() if s["status"] in ("ok", "untested")]

    def summary(self) -> Dict[str, Any]:
        return {"candidates": {c: {"status": s["status"], "message": s["message"]} for c, s in self.cand.items()},
                "fla": {k: dict(s) for k, s in self.fla.items()}, "fla_import": self.fla_import,
                "processes": self.children}
