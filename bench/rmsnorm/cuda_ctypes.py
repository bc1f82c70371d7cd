"""The CUDA driver API through ctypes (libcuda.so.1): just what launching a cubin next to PyTorch
needs. Modules load into the current context, which is PyTorch's primary context once torch has
touched the GPU, and kernels launch on the stream handle given (torch's current stream), so they
order with torch's own work and are captured by torch.cuda.graph like any other launch.
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, List, Mapping, Optional

from launch_json import KernelSpec, kernel_params

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class CudaError(RuntimeError):
    pass


class CUlaunchAttributeValue(ctypes.Union):
    # 64 bytes, 8-byte aligned (the C union holds pointers); clusterDim is {x, y, z}.
    # programmaticStreamSerializationAllowed is an int at offset 0.
    _fields_ = [("pad", ctypes.c_char * 64), ("align", ctypes.c_uint64), ("clusterDim", ctypes.c_uint * 3),
                ("programmaticStreamSerializationAllowed", ctypes.c_int)]


class CUlaunchAttribute(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", CUlaunchAttributeValue)]


class CUlaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(CUlaunchAttribute)), ("numAttrs", ctypes.c_uint)]


class Driver:
    def __init__(self, lib: str = "libcuda.so.1") -> None:
        try:
            self.lib = ctypes.CDLL(lib)
        except OSError as e:
            raise CudaError(f"cannot load the CUDA driver {lib}: {e}") from e
        L = self.lib
        vp, u = ctypes.c_void_p, ctypes.c_uint
        L.cuLaunchKernel.argtypes = [vp, u, u, u, u, u, u, u, vp, vp, vp]
        L.cuLaunchKernel.restype = ctypes.c_int
        L.cuLaunchKernelEx.argtypes = [ctypes.POINTER(CUlaunchConfig), vp, vp, vp]
        L.cuLaunchKernelEx.restype = ctypes.c_int
        L.cuModuleLoadData.argtypes = [ctypes.POINTER(vp), ctypes.c_char_p]
        L.cuModuleGetFunction.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_char_p]
        L.cuFuncSetAttribute.argtypes = [vp, ctypes.c_int, ctypes.c_int]
        L.cuModuleUnload.argtypes = [vp]
        self.check(L.cuInit(0), "cuInit")

    def error_text(self, rc: int) -> str:
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self.lib.cuGetErrorName(rc, ctypes.byref(name))
        self.lib.cuGetErrorString(rc, ctypes.byref(text))
        n = name.value.decode() if name.value else f"CUresult {rc}"
        return n + (f" ({text.value.decode()})" if text.value else "")

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise CudaError(f"{what}: {self.error_text(rc)}")

    def version(self) -> int:
        v = ctypes.c_int()
        self.check(self.lib.cuDriverGetVersion(ctypes.byref(v)), "cuDriverGetVersion")
        return v.value


def version_string(v: int) -> str:
    """cuDriverGetVersion's 13000 -> "13.0"."""
    return f"{v // 1000}.{(v % 1000) // 10}"


class Module:
    """One cubin loaded into the current context; functions by entry name."""

    def __init__(self, drv: Driver, image: bytes, name: str) -> None:
        self.drv, self.name = drv, name
        self.handle = ctypes.c_void_p()
        self._image = image  # the driver reads it during the call only; kept for clarity
        drv.check(drv.lib.cuModuleLoadData(ctypes.byref(self.handle), image), f"cuModuleLoadData({name})")
        self.functions: Dict[str, ctypes.c_void_p] = {}

    def function(self, entry: str) -> ctypes.c_void_p:
        if entry not in self.functions:
            f = ctypes.c_void_p()
            self.drv.check(self.drv.lib.cuModuleGetFunction(ctypes.byref(f), self.handle, entry.encode()),
                           f"cuModuleGetFunction({self.name}: {entry}): is '{entry}' an .entry of the cubin?")
            self.functions[entry] = f
        return self.functions[entry]

    def unload(self) -> None:
        if self.handle:
            self.drv.lib.cuModuleUnload(self.handle)
            self.handle = ctypes.c_void_p()


class PreparedLaunch:
    """One kernel of a launch plan bound to one set of device buffers: the parameter array is
    built once, so a launch is a single driver call."""

    def __init__(self, module: Module, k: KernelSpec, pointers: Mapping[str, int]) -> None:
        drv = module.drv
        self.lib = drv.lib
        self.drv = drv
        self.k = k
        self.func = module.function(k.entry)
        self.params, self._values = kernel_params(k.args, pointers)
        if k.shared_bytes > 48 * 1024:
            drv.check(drv.lib.cuFuncSetAttribute(self.func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                 k.shared_bytes),
                      f"cuFuncSetAttribute({k.entry}: {k.shared_bytes} B dynamic shared memory)")
        attrs: List[CUlaunchAttribute] = []
        if k.programmatic:
            a = CUlaunchAttribute()
            a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            a.value.programmaticStreamSerializationAllowed = 1
            attrs.append(a)
        if k.cluster_size > 1:
            if k.cluster_size > 8:
                drv.check(drv.lib.cuFuncSetAttribute(self.func, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                          f"cuFuncSetAttribute({k.entry}: non-portable cluster size {k.cluster_size})")
            a = CUlaunchAttribute()
            a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            a.value.clusterDim[0], a.value.clusterDim[1], a.value.clusterDim[2] = k.cluster
            attrs.append(a)
        self.nattrs = len(attrs)
        self.attrs = (CUlaunchAttribute * max(1, len(attrs)))(*attrs)

    def __call__(self, stream: int) -> None:
        k = self.k
        if self.nattrs == 0:
            rc = self.lib.cuLaunchKernel(self.func, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1],
                                         k.block[2], k.shared_bytes, stream, self.params, None)
        else:
            cfg = CUlaunchConfig(k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2],
                                 k.shared_bytes, stream, ctypes.cast(self.attrs, ctypes.POINTER(CUlaunchAttribute)),
                                 self.nattrs)
            rc = self.lib.cuLaunchKernelEx(ctypes.byref(cfg), self.func, self.params, None)
        if rc != 0:
            self.drv.check(rc, f"launch of {k.entry} grid {k.grid} block {k.block} cluster {k.cluster}")


def prepare_plan(module: Module, kernels: List[KernelSpec], pointers: Mapping[str, int]) -> List[PreparedLaunch]:
    return [PreparedLaunch(module, k, pointers) for k in kernels]


def run_plan(plan: List[Any], stream: int) -> None:
    for launch in plan:
        launch(stream)
