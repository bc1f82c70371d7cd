"""Tests of torch_bench.py's pure parts; they run without torch or a GPU:

    python3 -m pytest bench/rmsnorm        or        python3 bench/rmsnorm/test_torch_bench.py

The backward's torch parts (formula, fp64 reference, checks, one whole shape with the CUDA calls
faked on the CPU) run when torch is importable (ctest: Debian's CPU torch 1.13), else are skipped.
testdata/rmsnorm_bwd_launch.json is the launch.json of
`build/ptxevo build kernels/rmsnorm/rmsnorm_bwd.spec --shapes all` (defaults), keeping the four
benchmark shapes and the correctness shapes M=7,N=4097 (scalar path), M=300,N=256 (ring),
M=3,N=40000 (cluster of 4) and M=20,N=262144 (cluster of 16).
"""

import contextlib
import copy
import ctypes
import io
import json
import math
import os
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_report  # noqa: E402
import bench_stats  # noqa: E402
import cuda_ctypes  # noqa: E402
import launch_json  # noqa: E402
import providers  # noqa: E402
import rmsnorm_checks  # noqa: E402
import torch_bench  # noqa: E402

try:
    import torch
except ImportError:  # the pure tests still run
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
BWD_FIXTURE = os.path.join(HERE, "testdata", "rmsnorm_bwd_launch.json")


def bwd_build(label="seed"):
    with open(BWD_FIXTURE, encoding="utf-8") as f:
        return launch_json.parse_launch(json.load(f), label, "/tmp/" + label)


def launch_doc():
    """A launch.json as `ptxevo build` writes it for the RMSNorm seed (two shapes)."""
    def shape(m, n):
        return {
            "class": "benchmark", "dims": {"M": m, "N": n},
            "tensors": [
                {"name": "x", "dtype": "bf16", "shape": [m, n], "role": "in"},
                {"name": "w", "dtype": "f32", "shape": [n], "role": "in"},
                {"name": "out", "dtype": "bf16", "shape": [m, n], "role": "out",
                 "tolerance": {"rel_l2": 0.005, "max_abs": 0.01}},
            ],
            "kernels": [{
                "entry": "rmsnorm_fwd", "grid": [m, 1, 1], "block": [256, 1, 1], "shared_bytes": 0,
                "cluster": [1, 1, 1],
                "args": [{"kind": "tensor", "tensor": "x"}, {"kind": "tensor", "tensor": "w"},
                         {"kind": "tensor", "tensor": "out"}, {"kind": "null"},
                         {"kind": "scalar", "type": "i64", "value": m}, {"kind": "scalar", "type": "i64", "value": n},
                         {"kind": "scalar", "type": "f32", "value": 9.999999974752427e-07}],
            }],
            "bytes": 4.0 * m * n + 4 * n, "flops": 4.0 * m * n,
        }
    return {
        "format": 1, "op": "rmsnorm_fwd", "arch": "sm_90a",
        "config": {"x_dtype": "bf16", "w_dtype": "fp32", "has_weight": "true", "store_rstd": "false", "eps": "1e-06"},
        "knobs": {"VEC": 8, "THREADS": 256}, "toolchain": "nvrtc 13.0 nvJitLink 13.0",
        "spec": {"path": "/repo/kernels/rmsnorm/rmsnorm_fwd.spec", "sha256": "ab" * 32},
        "candidate": {"kind": "template", "path": "/repo/kernels/rmsnorm/rmsnorm_fwd.cu"},
        "cubin_sha256": "cd" * 32,
        "shapes": [shape(32768, 4096), shape(8192, 262144)],
    }


class StatsTest(unittest.TestCase):
    def test_median_odd_even_and_nan(self):
        self.assertEqual(bench_stats.median([3, 1, 2]), 2)
        self.assertEqual(bench_stats.median([4, 1, 3, 2]), 2.5)
        self.assertEqual(bench_stats.median([1, float("nan"), 3]), 2)
        with self.assertRaises(ValueError):
            bench_stats.median([])

    def test_ci_ranks_match_the_engine(self):
        # Values of evaluator/timer_stats.cpp's median_ci_ranks: exact binomial below 30 samples.
        self.assertEqual(bench_stats.median_ci_ranks(5), (1, 5))
        self.assertEqual(bench_stats.median_ci_ranks(6), (1, 6))
        self.assertEqual(bench_stats.median_ci_ranks(10), (2, 9))
        self.assertEqual(bench_stats.median_ci_ranks(20), (6, 15))
        self.assertEqual(bench_stats.median_ci_ranks(30), (9, 21))
        self.assertEqual(bench_stats.median_ci_ranks(100), (40, 60))

    def test_ci_ranks_cover_95_percent(self):
        for n in range(6, 200):
            j, k = bench_stats.median_ci_ranks(n)
            self.assertLess(j, k)
            # P(x_(j) <= median <= x_(k)) = P(j <= X <= k - 1), X ~ Binomial(n, 1/2).
            cover = sum(math.comb(n, i) for i in range(j, k)) / 2.0 ** n
            self.assertGreaterEqual(cover, 0.945, n)

    def test_summarize(self):
        s = bench_stats.summarize([float(i) for i in range(1, 31)])
        self.assertEqual(s["n"], 30)
        self.assertEqual(s["median"], 15.5)
        self.assertEqual((s["ci_low"], s["ci_high"]), (9.0, 21.0))
        self.assertEqual((s["min"], s["max"], s["mean"]), (1.0, 30.0, 15.5))
        self.assertLessEqual(s["ci_low"], s["median"])
        self.assertLessEqual(s["median"], s["ci_high"])

    def test_paired_ratio_is_the_median_over_pairs(self):
        other = [2.0, 4.0, 6.0, 100.0, 3.0, 2.0]
        cand = [1.0, 2.0, 3.0, 50.0, 1.5, 1.0]
        r = bench_stats.paired_ratio(other, cand)
        self.assertEqual(r["ratio"], 2.0)
        self.assertEqual((r["ci_low"], r["ci_high"]), (2.0, 2.0))
        with self.assertRaises(ValueError):
            bench_stats.paired_ratio([1.0], [1.0, 2.0])

    def test_geomean(self):
        self.assertAlmostEqual(bench_stats.geomean([1.0, 4.0]), 2.0)
        self.assertTrue(math.isnan(bench_stats.geomean([])))

    def test_round_robin_rotates_the_first_provider(self):
        names = ["a", "b", "c"]
        firsts = [bench_stats.round_robin_order(names, s)[0] for s in range(6)]
        self.assertEqual(firsts, ["a", "b", "c", "a", "b", "c"])
        self.assertEqual(sorted(bench_stats.round_robin_order(names, 4)), names)

    def test_batch_and_pool_sizes(self):
        self.assertEqual(bench_stats.launches_per_batch(0.013, 1.0), 77)
        self.assertEqual(bench_stats.launches_per_batch(2.3, 1.0), 1)
        self.assertEqual(bench_stats.launches_per_batch(0.0, 1.0), 2000)
        l2 = 60 * 1024 * 1024
        # 32 MiB per set: more than 2 x 60 MiB needs 4 sets.
        n = bench_stats.pool_sets(32 * 1024 * 1024, l2)
        self.assertEqual(n, 4)
        self.assertGreater(n * 32 * 1024 * 1024, 2 * l2)
        self.assertEqual(bench_stats.pool_sets(8 << 30, l2), 2)
        self.assertEqual(bench_stats.sets_that_fit(10, 100, 0, 0.8), 8)
        self.assertEqual(bench_stats.sets_that_fit(10, 100, 200, 0.8), 1)


def run_with_fake_driver(shape):
    """Prepares and runs a shape's plan through cuda_ctypes against a fake driver; returns what it
    was asked: ("attr", attribute, value), ("plain", grid x, block x, shared bytes) and ("ex",
    grid x, block x, shared bytes, [(attribute id, clusterDim, programmaticStreamSerializationAllowed)])."""
    calls = []

    class Lib:
        def cuFuncSetAttribute(self, f, attr, value):
            calls.append(("attr", attr, value))
            return 0

        def cuLaunchKernelEx(self, cfg, f, params, extra):
            c = cfg._obj
            attrs = [(c.attrs[i].id, tuple(c.attrs[i].value.clusterDim),
                      c.attrs[i].value.programmaticStreamSerializationAllowed) for i in range(c.numAttrs)]
            calls.append(("ex", c.gridDimX, c.blockDimX, c.sharedMemBytes, attrs))
            return 0

        def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
            calls.append(("plain", gx, bx, smem))
            return 0

    class Drv:
        lib = Lib()

        def check(self, rc, what):
            assert rc == 0, what

    class Mod:
        drv = Drv()

        def function(self, entry):
            return ctypes.c_void_p(1)

    ptrs = {t.name: 0x1000 * (i + 1) for i, t in enumerate(shape.tensors)}
    cuda_ctypes.run_plan(cuda_ctypes.prepare_plan(Mod(), shape.kernels, ptrs), 0)
    return calls


class ReferenceOutputsTest(unittest.TestCase):
    """--reference-outputs per-set: a torch provider keeps one result per input set alive."""

    def run_provider(self, hold: bool, calls: int):
        import types
        from unittest import mock
        # Provider.run asks torch only for the current stream: this stand-in lets the test run
        # where torch is not installed.
        fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
            current_stream=lambda: types.SimpleNamespace(cuda_stream=0)))
        made = []

        def step(i, stream):
            made.append((i, object()))
            return made[-1][1]
        with mock.patch.dict(sys.modules, {"torch": fake}):
            p = providers.Provider("ref", step, 3)
            p.hold = hold
            p.run(calls)
        return p, made

    def test_held_results_are_the_last_per_set(self):
        p, made = self.run_provider(True, 7)
        self.assertEqual([i for i, _ in made], [0, 1, 2, 0, 1, 2, 0])
        self.assertIs(p.held[0], made[6][1])
        self.assertIs(p.held[1], made[4][1])
        self.assertIs(p.held[2], made[5][1])

    def test_reused_results_are_dropped(self):
        p, _ = self.run_provider(False, 4)
        self.assertEqual(p.held, [None, None, None])

    def test_held_references_count_the_torch_providers(self):
        import argparse
        a = argparse.Namespace(reference_outputs="per-set", export_modules={"e": 1}, expert_module=object(),
                               skip_compile=False, autograd=False)
        self.assertEqual(torch_bench.held_references(a), 4)  # eager, export, expert, compile
        a.skip_compile, a.expert_module = True, None
        self.assertEqual(torch_bench.held_references(a), 2)
        a.reference_outputs = "reused"
        self.assertEqual(torch_bench.held_references(a), 0)
        self.assertEqual(torch_bench.parse_args(["--candidate", "x", "--out", "o"]).reference_outputs, "per-set")


class LaunchJsonTest(unittest.TestCase):
    def test_parses_what_ptxevo_build_writes(self):
        b = launch_json.parse_launch(launch_doc(), "seed", "/tmp/seed")
        self.assertEqual((b.op, b.arch, b.config["x_dtype"], b.knobs["VEC"]), ("rmsnorm_fwd", "sm_90a", "bf16", 8))
        self.assertEqual([s.key() for s in b.shapes], ["M=32768,N=4096", "M=8192,N=262144"])
        s = b.shapes[0]
        self.assertEqual(s.tensor("x").nbytes, 32768 * 4096 * 2)
        self.assertEqual((s.tensor("out").rel_l2, s.tensor("out").max_abs), (0.005, 0.01))
        self.assertIsNone(s.tensor("x").rel_l2)
        k = s.kernels[0]
        self.assertEqual((k.entry, k.grid, k.block, k.cluster_size), ("rmsnorm_fwd", (32768, 1, 1), (256, 1, 1), 1))
        self.assertEqual([a.kind for a in k.args], ["tensor", "tensor", "tensor", "null", "scalar", "scalar", "scalar"])
        self.assertEqual((k.args[4].type, k.args[4].value), ("i64", 32768))
        self.assertIsInstance(k.args[4].value, int)

    def test_errors_name_the_field(self):
        cases = [
            (lambda d: d.update(format=2), "format 2"),
            (lambda d: d.pop("op"), "missing 'op'"),
            (lambda d: d["shapes"][0]["kernels"][0]["args"].append({"kind": "tensor", "tensor": "bias"}),
             "shapes[0].kernels[0].args[7]: names tensor 'bias'"),
            (lambda d: d["shapes"][1]["kernels"][0].update(grid=[0, 1, 1]), "shapes[1].kernels[0]: 'grid'"),
            (lambda d: d["shapes"][0]["tensors"][0].update(dtype="fp8"), "dtype 'fp8'"),
            (lambda d: d["shapes"][0]["kernels"][0]["args"].append({"kind": "scalar", "type": "u16", "value": 1}),
             "scalar type 'u16'"),
            (lambda d: d["shapes"][0]["kernels"][0]["args"].append({"kind": "tensormap"}), "argument kind 'tensormap'"),
            (lambda d: d["shapes"][0]["kernels"][0].update(shared_bytes=True), "'shared_bytes' must be a number"),
            (lambda d: d["shapes"][0].update(kernels=[]), "no kernels"),
            (lambda d: d["shapes"][0]["kernels"][0].update(programmatic=1), "'programmatic' must be true or false"),
        ]
        for edit, expected in cases:
            d = copy.deepcopy(launch_doc())
            edit(d)
            with self.assertRaises(launch_json.LaunchFormatError) as cm:
                launch_json.parse_launch(d, "seed", "/tmp/seed")
            self.assertIn(expected, str(cm.exception))

    def test_load_build_dir_needs_the_cubin(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(launch_json.LaunchFormatError) as cm:
                launch_json.load_build_dir("seed", d)
            self.assertIn("ptxevo build", str(cm.exception))
            with open(os.path.join(d, "launch.json"), "w") as f:
                json.dump(launch_doc(), f)
            with self.assertRaises(launch_json.LaunchFormatError) as cm:
                launch_json.load_build_dir("seed", d)
            self.assertIn("kernel.cubin: missing", str(cm.exception))
            with open(os.path.join(d, "kernel.cubin"), "wb") as f:
                f.write(b"\x7fELF")
            self.assertEqual(launch_json.load_build_dir("seed", d).label, "seed")

    def test_candidate_argument(self):
        self.assertEqual(launch_json.parse_candidate_arg("best=out/b"), ("best", "out/b"))
        self.assertEqual(launch_json.parse_candidate_arg("out/seed/"), ("seed", "out/seed/"))
        with self.assertRaises(ValueError):
            launch_json.parse_candidate_arg("x=")

    def test_kernel_params_point_at_the_values(self):
        k = launch_json.parse_launch(launch_doc(), "s", "/s").shapes[0].kernels[0]
        params, keep = launch_json.kernel_params(k.args, {"x": 0x1000, "w": 0x2000, "out": 0x3000})
        self.assertEqual(len(params), 7)
        def read(i, ctype):
            return ctype.from_address(params[i]).value
        self.assertEqual([read(i, ctypes.c_uint64) for i in range(4)], [0x1000, 0x2000, 0x3000, 0])
        self.assertEqual(read(4, ctypes.c_int64), 32768)
        self.assertEqual(read(5, ctypes.c_int64), 4096)
        self.assertEqual(read(6, ctypes.c_float), struct.unpack("f", struct.pack("f", 1e-6))[0])
        with self.assertRaises(KeyError):
            launch_json.kernel_params(k.args, {"x": 1})

    def test_launch_structs_match_cuda_h(self):
        self.assertEqual(ctypes.sizeof(cuda_ctypes.CUlaunchAttributeValue), 64)
        self.assertEqual(ctypes.sizeof(cuda_ctypes.CUlaunchAttribute), 72)
        self.assertEqual(cuda_ctypes.CUlaunchAttribute.value.offset, 8)
        self.assertEqual(ctypes.sizeof(cuda_ctypes.CUlaunchConfig), 56)
        self.assertEqual(cuda_ctypes.CUlaunchConfig.hStream.offset, 32)
        self.assertEqual(cuda_ctypes.version_string(13000), "13.0")
        self.assertEqual(cuda_ctypes.version_string(12080), "12.8")


class BenchTest(unittest.TestCase):
    def build(self, **config):
        d = launch_doc()
        d["config"].update(config)
        return launch_json.parse_launch(d, "seed", "/tmp/seed")

    def test_options(self):
        b = self.build()
        opts = torch_bench.rmsnorm_options(b)
        self.assertEqual(opts["eps"], struct.unpack("f", struct.pack("f", 1e-6))[0])
        # The fused residual add is implemented; a bias is not.
        res = torch_bench.rmsnorm_options(self.build(has_residual="true", residual_out_dtype="fp32"))
        self.assertEqual((res["has_residual"], res["residual_out_fp32"]), (True, True))
        self.assertFalse(torch_bench.rmsnorm_options(b)["has_residual"])
        with self.assertRaises(torch_bench.BenchError) as cm:
            torch_bench.rmsnorm_options(self.build(has_bias="true"))
        self.assertIn("has_bias = true", str(cm.exception))

    def test_expert_checkout(self):
        # A checkout's package is loaded by path; a folder without one is refused by name.
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(torch_bench.BenchError) as cm:
                torch_bench.load_expert(d)
            self.assertIn("no rmsnorm/__init__.py", str(cm.exception))
            os.makedirs(os.path.join(d, "rmsnorm"))
            with open(os.path.join(d, "rmsnorm", "__init__.py"), "w") as f:
                f.write("from .rmsnorm import rmsnorm_fwd\n")
            with open(os.path.join(d, "rmsnorm", "rmsnorm.py"), "w") as f:
                f.write("def rmsnorm_fwd(x, weight=None, eps=1e-6):\n    return ('out', x, None)\n"
                        "def rmsnorm_bwd(x, weight, dout, rstd):\n    return ('dx', 'dw', None, None)\n")
            with self.assertRaises(torch_bench.BenchError) as cm:
                torch_bench.load_expert(d)
            self.assertIn("no rmsnorm_bwd()", str(cm.exception))
            with open(os.path.join(d, "rmsnorm", "__init__.py"), "w") as f:
                f.write("from .rmsnorm import rmsnorm_fwd, rmsnorm_bwd\n")
            for k in [k for k in sys.modules if k == "rmsnorm" or k.startswith("rmsnorm.")]:
                del sys.modules[k]
            mod = torch_bench.load_expert(d)
            step = torch_bench.expert_forward(mod, [{"x": "x0", "w": "w0"}, {"x": "x1"}], 1e-6)
            self.assertEqual((step(0), step(1)), ("out", "out"))
            # With a residual the expert returns (out, residual_out, None): both are checked.
            with open(os.path.join(d, "rmsnorm", "rmsnorm.py"), "a") as f:
                f.write("def rmsnorm_fwd(x, weight=None, residual=None, residual_dtype=None, eps=1e-6):\n"
                        "    return ('out', 'res:' + str(residual), None)\n")
            for k in [k for k in sys.modules if k == "rmsnorm" or k.startswith("rmsnorm.")]:
                del sys.modules[k]
            mod = torch_bench.load_expert(d)
            step = torch_bench.expert_forward(mod, [{"x": "x0", "w": "w0", "residual": "r0"}], 1e-6,
                                              {"has_residual": False})
            self.assertEqual(step(0), "out")
            try:
                import torch  # noqa: F401  (the residual path names torch.float32 when asked for fp32)
            except ImportError:
                torch = None
            if torch is not None:
                step = torch_bench.expert_forward(mod, [{"x": "x0", "w": "w0", "residual": "r0"}], 1e-6,
                                                  {"has_residual": True})
                self.assertEqual(step(0), ("out", "res:r0"))
                self.assertEqual(torch_bench.torch_outputs(step(0)), {"out": "out", "residual_out": "res:r0"})
        self.assertEqual(torch_bench.torch_outputs("o"), {"out": "o"})
        args = torch_bench.parse_args(["--candidate", "a=/x", "--out", "/o", "--expert", "/e"])
        self.assertEqual(args.expert, "/e")

    def test_shape_selection(self):
        a, b = self.build(), self.build()
        b.label = "best"
        self.assertEqual(torch_bench.select_shapes([a, b], [], 0), ["M=32768,N=4096", "M=8192,N=262144"])
        self.assertEqual(torch_bench.select_shapes([a, b], ["M=8192,N=262144"], 0), ["M=8192,N=262144"])
        self.assertEqual(torch_bench.select_shapes([a], [], 1), ["M=32768,N=4096"])
        with self.assertRaises(torch_bench.BenchError):
            torch_bench.select_shapes([a], ["M=1,N=1"], 0)
        b.shapes[1].tensors[1].dtype = "bf16"
        with self.assertRaises(torch_bench.BenchError) as cm:
            torch_bench.select_shapes([a, b], [], 0)
        self.assertIn("different tensors", str(cm.exception))
        c = self.build(x_dtype="fp16")
        with self.assertRaises(torch_bench.BenchError):
            torch_bench.check_candidates_agree([a, c])

    def test_unknown_tensors_are_refused(self):
        d = launch_doc()
        d["shapes"][0]["tensors"].append({"name": "residual", "dtype": "bf16", "shape": [1], "role": "in"})
        torch_bench.check_tensors(launch_json.parse_launch(d, "s", "/s").shapes[0])  # known
        d["shapes"][0]["tensors"].append({"name": "b", "dtype": "f32", "shape": [1], "role": "in"})
        s = launch_json.parse_launch(d, "s", "/s").shapes[0]
        with self.assertRaises(torch_bench.BenchError) as cm:
            torch_bench.check_tensors(s)
        self.assertIn("'b'", str(cm.exception))

    def test_args_and_tolerance(self):
        args = torch_bench.parse_args(["--candidate", "a=/x", "--out", "/o"])
        self.assertEqual((args.samples, args.graph, args.commit), (30, False, "unknown"))
        t = launch_json.parse_launch(launch_doc(), "s", "/s").shapes[0].tensor("out")
        self.assertEqual(rmsnorm_checks.tolerance(t, args), (0.005, 0.01))
        args.rel_l2 = 1e-2
        self.assertEqual(rmsnorm_checks.tolerance(t, args), (1e-2, 0.01))
        with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as err:
            torch_bench.parse_args(["--candidate", "a=/x", "--out", "/o", "--samples", "10"])
        self.assertIn("--samples must be at least 30", err.getvalue())

    def test_markdown_table(self):
        def prov(m):
            return {"median": m, "ci_low": m * 0.99, "ci_high": m * 1.01}
        rows = [{
            "shape": "M=32768,N=4096", "bytes": 536887296.0, "floor_ms": 0.1257,
            "providers": {"seed": prov(0.14), "torch_eager": prov(0.158), "torch_compile": prov(0.147),
                          "expert": prov(0.1327)},
            "speedups": {"seed": {"torch_compile": {"ratio": 1.05}, "torch_eager": {"ratio": 1.13},
                                  "expert": {"ratio": 0.948}}},
            "failed": {"best": "out: rel_l2 0.3"},
        }]
        md = bench_report.markdown_table(rows, ["seed", "best"])
        lines = md.strip().splitlines()
        self.assertEqual(len(lines), 4)  # header, rule, one shape, geomean
        self.assertTrue(all(l.count("|") == lines[0].count("|") for l in lines))
        self.assertIn("0.1400 [0.1386, 0.1414]", lines[2])
        self.assertIn("89.8%", lines[2])
        self.assertIn("1.050x", lines[2])
        self.assertIn("failed", lines[2])
        self.assertIn("expert ms [95% CI]", lines[0])
        self.assertIn("seed vs expert", lines[0])
        self.assertIn("0.1327 [", lines[2])
        self.assertIn("0.948x", lines[3])
        # The faster reference here is the expert (0.1327 ms against compile's 0.147).
        self.assertIn("seed vs faster of compile, expert", lines[0])
        self.assertEqual(lines[2].count("0.948x"), 2)
        slower_expert = dict(rows[0], providers=dict(rows[0]["providers"], expert=prov(0.2)))
        self.assertEqual(bench_report.markdown_table([slower_expert], ["seed"]).splitlines()[2].count("1.050x"), 2)
        # No expert in the run: no expert columns (and never a figure from elsewhere).
        plain = dict(rows[0], providers={k: v for k, v in rows[0]["providers"].items() if k != "expert"})
        self.assertNotIn("expert", bench_report.markdown_table([plain], ["seed"]))
        report = bench_report.markdown_report({"gpu": "NVIDIA H200", "copy_bandwidth_Bps": 4.27e12}, rows, ["seed"], ["n1"])
        self.assertIn("4.270 TB/s", report)
        self.assertIn("- n1", report)


class BackwardPureTest(unittest.TestCase):
    def test_parses_a_real_backward_launch_json(self):
        b = bwd_build()
        self.assertEqual(b.op, "rmsnorm_bwd")
        opts = torch_bench.rmsnorm_options(b)
        self.assertEqual((opts["op"], opts["x_dtype"], opts["has_weight"]), ("rmsnorm_bwd", "bf16", True))
        self.assertEqual(torch_bench.rmsnorm_options(b, "rmsnorm_bwd")["op"], "rmsnorm_bwd")
        with self.assertRaises(torch_bench.BenchError) as cm:
            torch_bench.rmsnorm_options(b, "rmsnorm_fwd")
        self.assertIn("--op rmsnorm_fwd", str(cm.exception))
        self.assertEqual(torch_bench.select_shapes([b], [], 0),
                         ["M=32768,N=16384", "M=32768,N=65536", "M=16384,N=131072", "M=8192,N=262144"])
        for s in b.shapes:
            torch_bench.check_tensors(s, "rmsnorm_bwd")
            self.assertEqual([t.name for t in s.tensors], ["x", "w", "dout", "rstd", "dx", "dw", "dw_partial"])
            self.assertEqual(s.tensor("dw_partial").role, "scratch")
            self.assertEqual((s.tensor("dx").rel_l2, s.tensor("dw").rel_l2), (0.005, 1e-4))
            self.assertEqual(len(s.kernels), 2)
            self.assertEqual(s.kernels[1].entry, "rmsnorm_bwd_dw_reduce")
            self.assertEqual([a.tensor for a in s.kernels[1].args[:2]], ["dw_partial", "dw"])
            self.assertIn("dw_partial", [a.tensor for a in s.kernels[0].args])
        by = {s.key(): s for s in b.shapes}
        k = by["M=32768,N=16384"].kernels[0]
        self.assertEqual((k.entry, k.cluster_size, k.shared_bytes), ("rmsnorm_bwd_ring", 1, 196608))
        k = by["M=8192,N=262144"].kernels[0]
        self.assertEqual((k.entry, k.cluster, k.shared_bytes), ("rmsnorm_bwd_ring_cluster", (16, 1, 1), 196608))
        self.assertEqual(by["M=7,N=4097"].kernels[0].entry, "rmsnorm_bwd")
        with self.assertRaises(torch_bench.BenchError):
            torch_bench.check_tensors(launch_json.parse_launch(launch_doc(), "f", "/f").shapes[0], "rmsnorm_bwd")

    def test_cluster_16_launch_gets_the_non_portable_attribute(self):
        # PreparedLaunch with a fake driver: the max dynamic smem and non-portable cluster
        # attributes are set before a cluster launch of 16 (cuLaunchKernelEx).
        s = {x.key(): x for x in bwd_build().shapes}["M=8192,N=262144"]
        calls = run_with_fake_driver(s)
        self.assertIn(("attr", cuda_ctypes.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 196608), calls)
        self.assertIn(("attr", cuda_ctypes.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1), calls)
        launches = [(c[0], c[1], c[2], c[3], len(c[4]), c[4][0][1]) if c[0] == "ex" else c
                    for c in calls if c[0] != "attr"]
        self.assertEqual(launches, [("ex", 112, 512, 196608, 1, (16, 1, 1)), ("plain", 8192, 256, 0)])

    def test_programmatic_launch_gets_the_stream_serialization_attribute(self):
        # KDA's PREPARE_CTAS plans launch the recurrence programmatically (launch.json
        # "programmatic"): cuLaunchKernelEx with
        # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1; a kernel without it (and older
        # launch.json files, which lack the field) launches plainly.
        d = copy.deepcopy(launch_doc())
        self.assertFalse(launch_json.parse_launch(d, "seed", "/tmp/seed").shapes[0].kernels[0].programmatic)
        d["shapes"][0]["kernels"].append(copy.deepcopy(d["shapes"][0]["kernels"][0]))
        d["shapes"][0]["kernels"][1]["programmatic"] = True
        s = launch_json.parse_launch(d, "seed", "/tmp/seed").shapes[0]
        self.assertEqual([k.programmatic for k in s.kernels], [False, True])
        launches = [("ex", len(c[4]), c[4][0][0], c[4][0][2]) if c[0] == "ex" else c[:1]
                    for c in run_with_fake_driver(s) if c[0] != "attr"]
        self.assertEqual(launches,
                         [("plain",), ("ex", 1, cuda_ctypes.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 1)])

    def test_byte_count_is_targets_md(self):
        self.assertEqual(torch_bench.bwd_bytes(32768, 16384), 3 * 32768 * 16384 * 2 + 4 * 32768 + 4 * 16384)
        for s in bwd_build().shapes:
            self.assertEqual(s.bytes, torch_bench.bwd_bytes(s.dims["M"], s.dims["N"]))
        # docs/targets.md's floors (4.27 TB/s).
        floors = {(32768, 16384): 0.754, (32768, 65536): 3.018, (16384, 131072): 3.018, (8192, 262144): 3.018}
        for (m, n), fl in floors.items():
            self.assertAlmostEqual(torch_bench.bwd_bytes(m, n) / 4.27e12 * 1e3, fl, delta=0.001)

    def test_backward_options(self):
        b = bwd_build()
        b.config["has_bias"] = "true"
        with self.assertRaises(torch_bench.BenchError):
            torch_bench.rmsnorm_options(b)

    def test_check_blocks(self):
        all_rows = rmsnorm_checks.check_blocks(100, 10, 0, block_elems=200)
        self.assertEqual(all_rows, [(0, 20, True), (20, 40, True), (40, 60, True), (60, 80, True), (80, 100, True)])
        some = rmsnorm_checks.check_blocks(100, 10, 30, block_elems=200)
        self.assertEqual([b[:2] for b in some], [b[:2] for b in all_rows])  # dw needs every row
        self.assertEqual([b[2] for b in some], [True, False, False, False, True])
        self.assertEqual([b[2] for b in rmsnorm_checks.check_blocks(100, 10, 50, block_elems=200)],
                         [True, False, True, False, True])
        self.assertTrue(all(b[2] for b in rmsnorm_checks.check_blocks(100, 10, 100, block_elems=200)))
        big = rmsnorm_checks.check_blocks(8192, 262144, 4096)
        self.assertEqual((len(big), big[0][:2], big[-1][:2]), (64, (0, 128), (8064, 8192)))
        self.assertEqual(sum(b[1] - b[0] for b in big if b[2]), 4096)

    def test_backward_args(self):
        args = torch_bench.parse_args(["--candidate", "a=/x", "--out", "/o"])
        self.assertEqual((args.op, args.autograd, args.check_rows), (None, False, 8192))
        args = torch_bench.parse_args(["--candidate", "a=/x", "--out", "/o", "--op", "rmsnorm_bwd", "--autograd",
                                       "--check-rows", "0"])
        self.assertEqual((args.op, args.autograd, args.check_rows), ("rmsnorm_bwd", True, 0))

    def test_backward_table(self):
        def prov(m):
            return {"median": m, "ci_low": m * 0.99, "ci_high": m * 1.01}
        row = {
            "shape": "M=32768,N=16384", "bytes": torch_bench.bwd_bytes(32768, 16384), "floor_ms": 0.754,
            "providers": {"seed": prov(0.80), "torch_eager": prov(5.0), "torch_compile": prov(1.2),
                          "torch_autograd": prov(3.0), "expert": prov(0.770)},
            "speedups": {"seed": {"torch_compile": {"ratio": 1.5}, "torch_eager": {"ratio": 6.25},
                                  "torch_autograd": {"ratio": 3.75}, "expert": {"ratio": 0.9625}}},
            "failed": {},
        }
        md = bench_report.markdown_table([row], ["seed"])
        lines = md.strip().splitlines()
        self.assertEqual(len(lines), 4)
        self.assertTrue(all(l.count("|") == lines[0].count("|") for l in lines))
        self.assertIn("autograd ms [95% CI]", lines[0])
        self.assertIn("seed vs autograd", lines[0])
        self.assertIn("expert ms [95% CI]", lines[0])
        self.assertIn("| 3221 |", lines[2])
        self.assertIn("94.2%", lines[2])
        self.assertIn("0.7700", lines[2])
        self.assertIn("3.750x", lines[2])
        self.assertIn("0.963x", lines[3])
        # Without autograd times the forward's columns are unchanged.
        row2 = dict(row, providers={k: v for k, v in row["providers"].items() if k != "torch_autograd"})
        head = bench_report.markdown_table([row2], ["seed"]).splitlines()[0]
        self.assertNotIn("autograd", head)
        report = bench_report.markdown_report({"op": "rmsnorm_bwd"}, [row], ["seed"], [])
        self.assertTrue(report.startswith("# RMSNorm backward"))


@unittest.skipIf(torch is None, "needs torch (CPU)")
class BackwardTorchTest(unittest.TestCase):
    def small_shape(self, m, n):
        s = copy.deepcopy({x.key(): x for x in bwd_build().shapes}["M=300,N=256"])
        s.dims = {"M": m, "N": n}
        for t in s.tensors:
            if t.shape and t.name != "dw_partial":
                t.shape = [m, n] if len(t.shape) == 2 else ([n] if t.name in ("w", "dw") else [m])
        return s

    def test_inputs_have_the_real_rstd(self):
        s = self.small_shape(6, 40)
        st = torch_bench.make_bwd_inputs(s, 3, 1e-6, device="cpu")
        self.assertEqual((st["x"].dtype, st["w"].dtype, st["dout"].dtype, st["rstd"].dtype),
                         (torch.bfloat16, torch.float32, torch.bfloat16, torch.float32))
        ref = torch.rsqrt(st["x"].double().square().mean(-1) + 1e-6)
        self.assertLess(float((st["rstd"].double() - ref).abs().max() / ref.abs().max()), 1e-6)
        again = torch_bench.make_bwd_inputs(s, 3, 1e-6, device="cpu")
        self.assertTrue(torch.equal(st["x"], again["x"]))
        self.assertFalse(torch.equal(st["x"], torch_bench.make_bwd_inputs(s, 4, 1e-6, device="cpu")["x"]))
        # the block-by-block rstd equals one pass
        x = st["x"]
        self.assertTrue(torch.equal(rmsnorm_checks.real_rstd(x, 1e-6, block_elems=80), rmsnorm_checks.real_rstd(x, 1e-6)))

    def test_eager_formula_against_fp64(self):
        torch.manual_seed(0)
        m, n = 64, 512
        x = torch.randn(m, n).to(torch.bfloat16)
        dout = torch.randn(m, n).to(torch.bfloat16)
        w = 1.0 + 0.5 * torch.randn(n)
        rstd = rmsnorm_checks.real_rstd(x, 1e-6)
        dx, dw = rmsnorm_checks.rmsnorm_bwd_torch(x, w, dout, rstd)
        self.assertEqual((dx.dtype, dw.dtype, dx.shape, dw.shape), (torch.bfloat16, torch.float32, (m, n), (n,)))
        rdx, rdw = rmsnorm_checks.rmsnorm_bwd_reference(x, w, dout, rstd)
        # fp64 autograd of the forward agrees with the closed form
        xd = x.double().requires_grad_(True)
        wd = w.double().requires_grad_(True)
        y = xd * torch.rsqrt(xd.square().mean(-1, keepdim=True) + 1e-6) * wd
        gx, gw = torch.autograd.grad(y, (xd, wd), dout.double())
        self.assertLess(float((gx - rdx).norm() / gx.norm()), 1e-6)
        self.assertLess(float((gw - rdw).norm() / gw.norm()), 1e-6)
        self.assertLess(float((dx.double() - rdx).norm() / rdx.norm()), 5e-3)
        self.assertLess(float((dw.double() - rdw).norm() / rdw.norm()), 1e-5)
        ndx, ndw = rmsnorm_checks.rmsnorm_bwd_torch(x, None, dout, rstd)
        self.assertIsNone(ndw)
        self.assertLess(float((ndx.double() - rmsnorm_checks.rmsnorm_bwd_reference(x, None, dout, rstd)[0]).norm()
                              / ndx.double().norm()), 5e-3)

    def test_compare_bwd_flags_wrong_outputs(self):
        s = self.small_shape(50, 64)
        st = torch_bench.make_bwd_inputs(s, 1, 1e-6, device="cpu")
        dx, dw = rmsnorm_checks.rmsnorm_bwd_torch(st["x"], st["w"], st["dout"], st["rstd"])
        bad_dx = dx.clone()
        bad_dx[37, 5] += 4.0
        nan_dw = dw.clone()
        nan_dw[3] = float("nan")
        args = torch_bench.parse_args(["--candidate", "a=/x", "--out", "/o", "--check-rows", "0"])
        r = rmsnorm_checks.compare_bwd(s, st, {"good": {"dx": dx, "dw": dw}, "bad": {"dx": bad_dx, "dw": dw * 1.001},
                                            "nan": {"dx": dx, "dw": nan_dw}}, args)
        self.assertTrue(r["good"]["dx"]["ok"] and r["good"]["dw"]["ok"], r["good"])
        self.assertEqual(r["good"]["dx"]["rows_checked"], 50)
        self.assertFalse(r["bad"]["dx"]["ok"])
        self.assertFalse(r["bad"]["dw"]["ok"])
        self.assertIn("rel_l2", r["bad"]["dw"]["message"])
        self.assertEqual(r["nan"]["dw"]["nonfinite"], 1)


@unittest.skipIf(torch is None, "needs torch (CPU)")
class BackwardShapeFakeCudaTest(unittest.TestCase):
    """run_shape_bwd end to end on the CPU: torch.cuda's streams, events, graphs and memory query
    faked, the candidate's kernels replaced by the torch formula writing through the pointers the
    plan was bound to, F.rms_norm by a composite one where torch lacks it."""

    @contextlib.contextmanager
    def fakes(self, shapes, bad=False):
        """torch.cuda faked on the CPU; the candidate's plan computes the backward with the torch
        formula through the pointers it was bound to (shapes: key -> ShapeSpec). Yields the list
        of launches (entries, scratch pointer) and the streams graphs were captured on."""
        import time
        from unittest import mock
        import torch.nn.functional as F
        launches, captured = [], []

        def view(ptr, t):
            buf = (ctypes.c_char * t.nbytes).from_address(ptr)
            return torch.frombuffer(buf, dtype=torch_bench.torch_dtype(t.dtype)).view(t.shape)

        def prepare_plan(module, kernels, pointers):
            shape = [s for s in shapes.values() if s.kernels == kernels][0]
            self.assertEqual(set(pointers), {t.name for t in shape.tensors})
            return [(k.entry, dict(pointers), shape) for k in kernels]

        def run_plan(plan, stream):
            (e0, p, shape), (e1, _, _) = plan
            launches.append((e0, e1, p["dw_partial"]))
            v = {t.name: view(p[t.name], t) for t in shape.tensors}
            dx, dw = rmsnorm_checks.rmsnorm_bwd_torch(v["x"], v["w"], v["dout"], v["rstd"])
            v["dx"].copy_(dx)
            v["dw_partial"][:2].zero_()
            v["dw"].copy_(dw if not bad else dw + 1.0)

        class Stream:
            cuda_stream = 0

            def wait_stream(self, other):
                pass

        class Event:
            def __init__(self, enable_timing=False):
                self.t = 0.0

            def record(self):
                self.t = time.perf_counter()

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return max(1e-3, (end.t - self.t) * 1e3)

        class Graph:
            def replay(self):
                pass

        @contextlib.contextmanager
        def graph_ctx(g, pool=None, stream=None):
            captured.append(stream)
            yield

        def rms_norm(x, shape_, w, eps):
            xf = x.float()
            return xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps) * w

        class Module:
            def __init__(self, drv, image, name):
                pass

        patches = [
            mock.patch.object(torch_bench, "DEVICE", "cpu"),
            mock.patch.object(cuda_ctypes, "prepare_plan", prepare_plan),
            mock.patch.object(cuda_ctypes, "run_plan", run_plan),
            mock.patch.object(cuda_ctypes, "Driver", lambda: None),
            mock.patch.object(cuda_ctypes, "Module", Module),
            mock.patch.object(torch_bench, "environment", lambda drv, args: {
                "gpu": "fake", "l2_bytes": 256 << 10, "mode": "graph" if args.graph else "stream",
                "nvidia_driver": None, "cuda_driver_api": None, "torch": torch.__version__, "triton": None}),
            mock.patch.object(torch_bench, "copy_bandwidth", lambda l2: {"Bps": 4.27e12, "bytes": 1 << 30}),
            mock.patch.object(torch.cuda, "is_available", lambda: True),
            mock.patch.object(torch.cuda, "mem_get_info", lambda: (8 << 30, 16 << 30), create=True),
            mock.patch.object(torch.cuda, "current_stream", lambda: Stream()),
            mock.patch.object(torch.cuda, "Stream", Stream),
            mock.patch.object(torch.cuda, "stream", lambda s: contextlib.nullcontext()),
            mock.patch.object(torch.cuda, "synchronize", lambda: None),
            mock.patch.object(torch.cuda, "empty_cache", lambda: None),
            mock.patch.object(torch.cuda, "Event", Event),
            mock.patch.object(torch.cuda, "CUDAGraph", Graph),
            mock.patch.object(torch.cuda, "graph", graph_ctx),
            mock.patch.object(F, "rms_norm", getattr(F, "rms_norm", rms_norm), create=True),
        ]
        with contextlib.ExitStack() as stack:
            for p in patches:
                stack.enter_context(p)
            yield launches, captured

    FAST = ["--skip-compile", "--autograd", "--check-rows", "100", "--warmup", "1", "--target-batch-ms", "0.01"]

    def run_fake(self, graph, bad=False):
        b = bwd_build()
        key = "M=300,N=256"
        args = torch_bench.parse_args(["--candidate", "seed=/s", "--out", "/o"] + self.FAST + (["--graph"] if graph else []))
        env = {"copy_bandwidth_Bps": 4.27e12, "l2_bytes": 256 << 10}
        with self.fakes({key: torch_bench.shape_of(b, key)}, bad) as (launches, captured):
            with contextlib.redirect_stdout(io.StringIO()):
                row = torch_bench.run_shape(key, [b], {"seed": None}, torch_bench.rmsnorm_options(b), env, args)
        return row, launches, captured

    def test_main_end_to_end(self):
        with tempfile.TemporaryDirectory() as d:
            with open(BWD_FIXTURE, encoding="utf-8") as f:
                doc = json.load(f)
            for s in doc["shapes"]:  # the small shapes stand in for the benchmark ones
                s["class"] = "benchmark" if (s["dims"]["M"], s["dims"]["N"]) in ((300, 256), (7, 4097)) else "correctness"
            cand = os.path.join(d, "seed")
            os.makedirs(cand)
            with open(os.path.join(cand, "launch.json"), "w") as f:
                json.dump(doc, f)
            with open(os.path.join(cand, "kernel.cubin"), "wb") as f:
                f.write(b"\x7fELF")
            b = launch_json.load_build_dir("seed", cand)
            out = os.path.join(d, "out")
            with self.fakes({s.key(): s for s in b.shapes}) as (launches, _):
                with contextlib.redirect_stdout(io.StringIO()) as printed:
                    rc = torch_bench.main(["--candidate", f"seed={cand}", "--out", out, "--graph"] + self.FAST)
            self.assertEqual(rc, 0, printed.getvalue())
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)
            self.assertEqual([r["shape"] for r in res["shapes"]], ["M=7,N=4097", "M=300,N=256"])
            self.assertEqual({l[0] for l in launches}, {"rmsnorm_bwd", "rmsnorm_bwd_ring"})
            with open(os.path.join(out, "results.md")) as f:
                md = f.read()
            self.assertTrue(md.startswith("# RMSNorm backward"))
            self.assertIn("3*M*N*2 + 4*M + 4*N", md)
            self.assertIn("torch.autograd.grad(F.rms_norm", md)
            self.assertIn("| M=300,N=256 |", md)
            self.assertIn("check", printed.getvalue())

    def test_stream_mode(self):
        row, launches, _ = self.run_fake(graph=False)
        self.assertEqual(row["errors"], [])
        self.assertEqual(set(row["providers"]), {"seed", "torch_eager", "torch_autograd"})
        self.assertEqual(row["providers"]["seed"]["n"], 30)
        self.assertEqual(row["pool_sets"], 2)
        self.assertTrue(all(r["ok"] for p in row["checks"].values() for r in p.values()), row["checks"])
        self.assertEqual(set(row["checks"]), {"seed", "torch_eager", "torch_autograd"})
        self.assertEqual(set(row["speedups"]["seed"]), {"torch_eager", "torch_autograd"})
        self.assertEqual(row["plan"]["seed"][0]["entry"], "rmsnorm_bwd_ring")
        # both kernels per step, one scratch buffer for every input set
        self.assertTrue(all(l[:2] == ("rmsnorm_bwd_ring", "rmsnorm_bwd_dw_reduce") for l in launches))
        self.assertEqual(len({l[2] for l in launches}), 1)
        self.assertEqual(row["floor_ms"], row["bytes"] / 4.27e12 * 1e3)
        self.assertIn("torch_autograd", row["autograd_note"])
        md = bench_report.markdown_report({"op": "rmsnorm_bwd"}, [row], ["seed"], [])
        self.assertIn("seed vs autograd", md)

    def test_graph_mode_captures_autograd_on_its_stream(self):
        row, _, captured = self.run_fake(graph=True)
        self.assertEqual(row["errors"], [])
        self.assertEqual(set(row["providers"]), {"seed", "torch_eager", "torch_autograd"})
        self.assertEqual(len(captured), 3)
        self.assertEqual(sum(s is not None for s in captured), 1)  # autograd's forward stream
        self.assertEqual(row["providers"]["seed"]["per_batch"] % row["pool_sets"], 0)

    def test_wrong_candidate_is_not_timed(self):
        row, _, _ = self.run_fake(graph=False, bad=True)
        self.assertIn("seed", row["failed"])
        self.assertIn("dw:", row["failed"]["seed"])
        self.assertNotIn("seed", row["providers"])


if __name__ == "__main__":
    unittest.main()
