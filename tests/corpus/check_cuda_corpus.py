#!/usr/bin/env python3
"""Compile every tests/corpus/cuda/*.cu file through NVRTC (ctypes) for each
arch listed in its `// corpus: archs=...` header and each option set, then
assemble the PTX with ptxas for the same arch.

Usage:
  check_cuda_corpus.py [--keep DIR] [--sets default,lineinfo,G,fast]
                       [--nvrtc PATH] [--ptxas PATH] [FILE_OR_SUBSTRING ...]

Exit status 0 when every (file, arch, option set) combination compiles and
assembles; 1 otherwise.  Runs one compiler at a time (no parallelism).
"""
import argparse
import ctypes
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CUDA_DIR = os.path.join(HERE, "cuda")
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")

# Option sets; the base options are always passed.
BASE_OPTS = ["--std=c++17", "-I" + os.path.join(CUDA_HOME, "include")]
OPTION_SETS = {
    "default": [],
    "lineinfo": ["-lineinfo"],
    "G": ["-G"],
    "fast": ["--Ofast-compile=max"],
}

HEADER_RE = re.compile(r"^//\s*corpus:\s*archs=([A-Za-z0-9_,]+)\s*$")


def parse_header(path):
    with open(path, "r", encoding="utf-8") as f:
        first = f.readline().rstrip("\n")
    m = HEADER_RE.match(first)
    if not m:
        raise ValueError("%s: missing or malformed '// corpus: archs=...' header" % path)
    return [a for a in m.group(1).split(",") if a]


class Nvrtc:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        L = self.lib
        L.nvrtcGetErrorString.restype = ctypes.c_char_p
        L.nvrtcGetErrorString.argtypes = [ctypes.c_int]
        L.nvrtcCreateProgram.restype = ctypes.c_int
        L.nvrtcCreateProgram.argtypes = [
            ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_char_p,
            ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p)]
        L.nvrtcCompileProgram.restype = ctypes.c_int
        L.nvrtcCompileProgram.argtypes = [
            ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        L.nvrtcGetPTXSize.restype = ctypes.c_int
        L.nvrtcGetPTXSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        L.nvrtcGetPTX.restype = ctypes.c_int
        L.nvrtcGetPTX.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        L.nvrtcGetProgramLogSize.restype = ctypes.c_int
        L.nvrtcGetProgramLogSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        L.nvrtcGetProgramLog.restype = ctypes.c_int
        L.nvrtcGetProgramLog.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        L.nvrtcDestroyProgram.restype = ctypes.c_int
        L.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        L.nvrtcVersion.restype = ctypes.c_int
        L.nvrtcVersion.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]

    def version(self):
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        return major.value, minor.value

    def _check(self, rc, what):
        if rc != 0:
            raise RuntimeError("%s failed: %s" % (what, self.lib.nvrtcGetErrorString(rc).decode()))

    def compile(self, src, name, opts):
        """Return (ok, ptx_text_or_None, log)."""
        prog = ctypes.c_void_p()
        self._check(self.lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(),
                                                0, None, None), "nvrtcCreateProgram")
        try:
            arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
            rc = self.lib.nvrtcCompileProgram(prog, len(opts), arr)
            n = ctypes.c_size_t()
            self._check(self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n)), "nvrtcGetProgramLogSize")
            buf = ctypes.create_string_buffer(n.value)
            self._check(self.lib.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
            log = buf.value.decode(errors="replace")
            if rc != 0:
                return False, None, log + "\n(" + self.lib.nvrtcGetErrorString(rc).decode() + ")"
            self._check(self.lib.nvrtcGetPTXSize(prog, ctypes.byref(n)), "nvrtcGetPTXSize")
            buf = ctypes.create_string_buffer(n.value)
            self._check(self.lib.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
            return True, buf.value.decode(), log
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", help="write the PTX files here instead of a temporary dir")
    ap.add_argument("--sets", default=",".join(OPTION_SETS), help="comma-separated option sets")
    ap.add_argument("--nvrtc", default=os.path.join(CUDA_HOME, "lib64", "libnvrtc.so"))
    ap.add_argument("--ptxas", default=os.path.join(CUDA_HOME, "bin", "ptxas"))
    ap.add_argument("-v", "--verbose", action="store_true", help="print every combination")
    ap.add_argument("files", nargs="*", help="files (or substrings of file names) to check; default all")
    args = ap.parse_args()

    sets = [s for s in args.sets.split(",") if s]
    for s in sets:
        if s not in OPTION_SETS:
            ap.error("unknown option set %r (known: %s)" % (s, ", ".join(OPTION_SETS)))

    all_files = sorted(os.path.join(CUDA_DIR, f) for f in os.listdir(CUDA_DIR) if f.endswith(".cu"))
    if args.files:
        files = []
        for want in args.files:
            if os.path.isfile(want):
                files.append(os.path.abspath(want))
            else:
                files.extend(f for f in all_files if want in os.path.basename(f))
    else:
        files = all_files

    nv = Nvrtc(args.nvrtc)
    print("NVRTC %d.%d, %d files, option sets: %s" % (nv.version() + (len(files), ", ".join(sets))))

    outdir = args.keep or tempfile.mkdtemp(prefix="cuda_corpus_")
    os.makedirs(outdir, exist_ok=True)
    passed, failed = 0, []
    for path in files:
        base = os.path.splitext(os.path.basename(path))[0]
        archs = parse_header(path)
        with open(path, "r", encoding="utf-8") as f:
            src = f.read()
        for arch in archs:
            for s in sets:
                tag = "%s [%s, %s]" % (os.path.basename(path), arch, s)
                opts = ["--gpu-architecture=" + arch] + BASE_OPTS + OPTION_SETS[s]
                ok, ptx, log = nv.compile(src, os.path.basename(path), opts)
                if not ok:
                    failed.append(tag)
                    print("FAIL nvrtc  %s\n%s" % (tag, log.strip()))
                    continue
                ptx_path = os.path.join(outdir, "%s.%s.%s.ptx" % (base, arch, s))
                with open(ptx_path, "w") as f:
                    f.write(ptx)
                r = subprocess.run([args.ptxas, "-arch=" + arch, ptx_path, "-o", os.devnull],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                if r.returncode != 0:
                    failed.append(tag)
                    print("FAIL ptxas  %s (%s)\n%s" % (tag, ptx_path, r.stdout.strip()))
                    continue
                passed += 1
                if args.verbose:
                    print("ok   %s" % tag)
                    if log.strip():
                        print("     nvrtc log: %s" % log.strip().replace("\n", "\n     "))
    if not args.keep:
        import shutil
        shutil.rmtree(outdir, ignore_errors=True)
    else:
        print("PTX written to %s" % outdir)
    print("%d passed, %d failed" % (passed, len(failed)))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
