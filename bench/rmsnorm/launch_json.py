"""Reading the build directories `ptxevo build` writes (launch.json, kernel.cubin), pure Python.

launch.json (format 1) is documented in docs/evaluator.md ("ptxevo build"). Every problem is a
LaunchFormatError naming the file and the field, so a bad or stale build dir says what to rebuild.
"""

from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

SUPPORTED_FORMAT = 1
SCALAR_CTYPES = {"i32": ctypes.c_int32, "i64": ctypes.c_int64, "f32": ctypes.c_float, "f64": ctypes.c_double}
DTYPE_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "u8": 1}


class LaunchFormatError(ValueError):
    pass


@dataclass
class TensorSpec:
    name: str
    dtype: str
    shape: List[int]
    role: str  # in, out, inout, scratch
    rel_l2: Optional[float] = None  # outputs only: the gate's tolerance
    max_abs: Optional[float] = None

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES[self.dtype]

    def signature(self) -> Tuple[str, str, Tuple[int, ...], str]:
        return (self.name, self.dtype, tuple(self.shape), self.role)


@dataclass
class ArgSpec:
    kind: str  # tensor, null, scalar
    tensor: Optional[str] = None
    type: Optional[str] = None  # i32, i64, f32, f64 (scalars)
    value: Any = None


@dataclass
class KernelSpec:
    entry: str
    grid: Tuple[int, int, int]
    block: Tuple[int, int, int]
    shared_bytes: int
    cluster: Tuple[int, int, int]
    args: List[ArgSpec]
    # Programmatic dependent launch: may start once every CTA of the previous kernel triggered it
    # (griddepcontrol.launch_dependents); absent in older launch.json files.
    programmatic: bool = False

    @property
    def cluster_size(self) -> int:
        return self.cluster[0] * self.cluster[1] * self.cluster[2]


@dataclass
class ShapeSpec:
    cls: str
    dims: Dict[str, int]
    tensors: List[TensorSpec]
    kernels: List[KernelSpec]
    bytes: float
    flops: float

    def key(self) -> str:
        """"M=32768,N=4096": dimension names sorted, as the engine prints shapes."""
        return ",".join(f"{k}={self.dims[k]}" for k in sorted(self.dims))

    def tensor(self, name: str) -> Optional[TensorSpec]:
        for t in self.tensors:
            if t.name == name:
                return t
        return None


@dataclass
class BuildDir:
    label: str
    path: str
    op: str
    arch: str
    config: Dict[str, str]
    knobs: Dict[str, Any]
    toolchain: str
    spec_path: str
    spec_sha256: str
    cubin_sha256: str
    shapes: List[ShapeSpec] = field(default_factory=list)

    @property
    def cubin_path(self) -> str:
        return os.path.join(self.path, "kernel.cubin")

    def summary(self) -> Dict[str, Any]:
        return {"label": self.label, "path": self.path, "op": self.op, "arch": self.arch, "config": self.config,
                "knobs": self.knobs, "toolchain": self.toolchain, "spec": self.spec_path,
                "spec_sha256": self.spec_sha256, "cubin_sha256": self.cubin_sha256}


def _get(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if not isinstance(obj, Mapping) or key not in obj:
        raise LaunchFormatError(f"{where}: missing '{key}'")
    v = obj[key]
    # bool is an int in Python; a JSON true is never a valid count or size here.
    if kind in (int, float) and (isinstance(v, bool) or not isinstance(v, (int, float))):
        raise LaunchFormatError(f"{where}: '{key}' must be a number, got {v!r}")
    if kind not in (int, float) and not isinstance(v, kind):
        raise LaunchFormatError(f"{where}: '{key}' must be a {kind.__name__}, got {v!r}")
    if kind is int and int(v) != v:
        raise LaunchFormatError(f"{where}: '{key}' must be an integer, got {v!r}")
    return int(v) if kind is int else v


def _dim3(obj: Mapping[str, Any], key: str, where: str) -> Tuple[int, int, int]:
    v = _get(obj, key, list, where)
    if len(v) != 3 or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in v):
        raise LaunchFormatError(f"{where}: '{key}' must be three positive integers, got {v!r}")
    return (v[0], v[1], v[2])


def _arg(a: Mapping[str, Any], tensors: Sequence[str], where: str) -> ArgSpec:
    kind = _get(a, "kind", str, where)
    if kind == "null":
        return ArgSpec("null")
    if kind == "tensor":
        name = _get(a, "tensor", str, where)
        if name not in tensors:
            raise LaunchFormatError(f"{where}: names tensor '{name}', which the shape does not list")
        return ArgSpec("tensor", tensor=name)
    if kind == "scalar":
        t = _get(a, "type", str, where)
        if t not in SCALAR_CTYPES:
            raise LaunchFormatError(f"{where}: scalar type '{t}' is not one of {sorted(SCALAR_CTYPES)}")
        value = _get(a, "value", float, where)
        if t in ("i32", "i64") and int(value) != value:
            raise LaunchFormatError(f"{where}: integer scalar has value {value!r}")
        return ArgSpec("scalar", type=t, value=int(value) if t in ("i32", "i64") else float(value))
    raise LaunchFormatError(f"{where}: argument kind '{kind}' is not tensor, null or scalar")


def _tensor(t: Mapping[str, Any], where: str) -> TensorSpec:
    dtype = _get(t, "dtype", str, where)
    if dtype not in DTYPE_BYTES:
        raise LaunchFormatError(f"{where}: dtype '{dtype}' is not one of {sorted(DTYPE_BYTES)}")
    shape = _get(t, "shape", list, where)
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in shape):
        raise LaunchFormatError(f"{where}: shape must be non-negative integers, got {shape!r}")
    spec = TensorSpec(_get(t, "name", str, where), dtype, list(shape), _get(t, "role", str, where))
    if spec.role not in ("in", "out", "inout", "scratch"):
        raise LaunchFormatError(f"{where}: role '{spec.role}' is not in, out, inout or scratch")
    if "tolerance" in t:
        spec.rel_l2 = float(_get(t["tolerance"], "rel_l2", float, where + ".tolerance"))
        spec.max_abs = float(_get(t["tolerance"], "max_abs", float, where + ".tolerance"))
    return spec


def _shape(s: Mapping[str, Any], where: str) -> ShapeSpec:
    dims = _get(s, "dims", dict, where)
    for k, v in dims.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise LaunchFormatError(f"{where}: dimension '{k}' must be an integer, got {v!r}")
    tensors = [_tensor(t, f"{where}.tensors[{i}]") for i, t in enumerate(_get(s, "tensors", list, where))]
    names = [t.name for t in tensors]
    kernels = []
    for i, k in enumerate(_get(s, "kernels", list, where)):
        kw = f"{where}.kernels[{i}]"
        args = [_arg(a, names, f"{kw}.args[{j}]") for j, a in enumerate(_get(k, "args", list, kw))]
        programmatic = k.get("programmatic", False)
        if not isinstance(programmatic, bool):
            raise LaunchFormatError(f"{kw}: 'programmatic' must be true or false, got {programmatic!r}")
        kernels.append(KernelSpec(_get(k, "entry", str, kw), _dim3(k, "grid", kw), _dim3(k, "block", kw),
                                  _get(k, "shared_bytes", int, kw), _dim3(k, "cluster", kw), args, programmatic))
    if not kernels:
        raise LaunchFormatError(f"{where}: no kernels")
    return ShapeSpec(_get(s, "class", str, where), dict(dims), tensors, kernels,
                     float(_get(s, "bytes", float, where)), float(_get(s, "flops", float, where)))


def parse_launch(obj: Mapping[str, Any], label: str, path: str, where: str = "launch.json") -> BuildDir:
    fmt = _get(obj, "format", int, where)
    if fmt != SUPPORTED_FORMAT:
        raise LaunchFormatError(f"{where}: format {fmt}, but this script reads format {SUPPORTED_FORMAT}: "
                                "rebuild the candidate with a matching `ptxevo build`")
    spec = _get(obj, "spec", dict, where)
    config = _get(obj, "config", dict, where)
    b = BuildDir(label=label, path=path, op=_get(obj, "op", str, where), arch=_get(obj, "arch", str, where),
                 config={str(k): str(v) for k, v in config.items()}, knobs=dict(_get(obj, "knobs", dict, where)),
                 toolchain=_get(obj, "toolchain", str, where), spec_path=_get(spec, "path", str, where + ".spec"),
                 spec_sha256=_get(spec, "sha256", str, where + ".spec"),
                 cubin_sha256=_get(obj, "cubin_sha256", str, where))
    b.shapes = [_shape(s, f"{where}.shapes[{i}]") for i, s in enumerate(_get(obj, "shapes", list, where))]
    return b


def load_build_dir(label: str, path: str) -> BuildDir:
    lj = os.path.join(path, "launch.json")
    try:
        with open(lj, encoding="utf-8") as f:
            obj = json.load(f)
    except OSError as e:
        raise LaunchFormatError(f"{lj}: cannot read ({e.strerror}); make it with `ptxevo build SPEC --out {path}`")
    except json.JSONDecodeError as e:
        raise LaunchFormatError(f"{lj}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}")
    b = parse_launch(obj, label, path, lj)
    if not os.path.isfile(b.cubin_path):
        raise LaunchFormatError(f"{b.cubin_path}: missing; `ptxevo build` writes it next to launch.json")
    return b


def parse_candidate_arg(text: str) -> Tuple[str, str]:
    """"seed=build/seed" -> ("seed", "build/seed"); a bare DIR is labelled by its base name."""
    label, sep, path = text.partition("=")
    if not sep:
        path = text
        label = os.path.basename(os.path.normpath(text))
    if not label or not path:
        raise ValueError(f"--candidate: expected LABEL=DIR, got '{text}'")
    return label, path


def kernel_params(args: Sequence[ArgSpec], pointers: Mapping[str, int]) -> Tuple[Any, List[Any]]:
    """The kernelParams array for cuLaunchKernel (one void* per argument, pointing at its value)
    and the ctypes values it points into, which must stay alive as long as the array is used."""
    values: List[Any] = []
    for a in args:
        if a.kind == "tensor":
            if a.tensor not in pointers:
                raise KeyError(f"no device buffer for tensor '{a.tensor}'")
            values.append(ctypes.c_uint64(pointers[a.tensor]))
        elif a.kind == "null":
            values.append(ctypes.c_uint64(0))
        else:
            values.append(SCALAR_CTYPES[a.type](a.value))
    params = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.addressof(v) for v in values])
    return params, values
