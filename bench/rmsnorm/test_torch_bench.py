"""Tests of torch_bench.py's pure parts; they run without torch or a GPU:

    python3 -m pytest bench/rmsnorm        or        python3 bench/rmsnorm/test_torch_bench.py
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
import torch_bench  # noqa: E402


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

    def test_options_and_best_known(self):
        b = self.build()
        opts = torch_bench.rmsnorm_options(b)
        self.assertEqual(opts["eps"], struct.unpack("f", struct.pack("f", 1e-6))[0])
        self.assertEqual(torch_bench.best_known_ms(opts, b.shapes[0]), 0.1327)
        self.assertEqual(torch_bench.best_known_ms(opts, b.shapes[1]), 2.3343)
        fp16 = self.build(x_dtype="fp16")
        self.assertIsNone(torch_bench.best_known_ms(torch_bench.rmsnorm_options(fp16), fp16.shapes[0]))
        off = self.build(has_bias="false")
        self.assertEqual(torch_bench.best_known_ms(torch_bench.rmsnorm_options(off), off.shapes[0]), 0.1327)
        with self.assertRaises(torch_bench.BenchError) as cm:
            torch_bench.rmsnorm_options(self.build(has_residual="true"))
        self.assertIn("has_residual = true", str(cm.exception))

    def test_best_known_table_is_targets_md(self):
        self.assertEqual(len(torch_bench.BEST_KNOWN_MS), 11)
        for (m, n), ms in torch_bench.BEST_KNOWN_MS.items():
            floor = (2 * m * n * 2 + 4 * n) / 4.27e12 * 1e3
            # Above TARGETS.md's floor, and within 1.7x of it (the worst is N = 256).
            self.assertGreater(ms, floor)
            self.assertLess(ms, 1.7 * floor)

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
        s = launch_json.parse_launch(d, "s", "/s").shapes[0]
        with self.assertRaises(torch_bench.BenchError) as cm:
            torch_bench.check_tensors(s)
        self.assertIn("residual", str(cm.exception))

    def test_args_and_tolerance(self):
        args = torch_bench.parse_args(["--candidate", "a=/x", "--out", "/o"])
        self.assertEqual((args.samples, args.graph, args.commit), (30, False, "unknown"))
        t = launch_json.parse_launch(launch_doc(), "s", "/s").shapes[0].tensor("out")
        self.assertEqual(torch_bench.tolerance(t, args), (0.005, 0.01))
        args.rel_l2 = 1e-2
        self.assertEqual(torch_bench.tolerance(t, args), (1e-2, 0.01))
        with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as err:
            torch_bench.parse_args(["--candidate", "a=/x", "--out", "/o", "--samples", "10"])
        self.assertIn("--samples must be at least 30", err.getvalue())

    def test_markdown_table(self):
        def prov(m):
            return {"median": m, "ci_low": m * 0.99, "ci_high": m * 1.01}
        rows = [{
            "shape": "M=32768,N=4096", "bytes": 536887296.0, "floor_ms": 0.1257, "best_known_ms": 0.1327,
            "providers": {"seed": prov(0.14), "torch_eager": prov(0.158), "torch_compile": prov(0.147)},
            "speedups": {"seed": {"torch_compile": {"ratio": 1.05}, "torch_eager": {"ratio": 1.13},
                                  "best_known": {"ratio": 0.948}}},
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
        self.assertIn("0.948x", lines[3])
        report = bench_report.markdown_report({"gpu": "NVIDIA H200", "copy_bandwidth_Bps": 4.27e12}, rows, ["seed"], ["n1"])
        self.assertIn("4.270 TB/s", report)
        self.assertIn("- n1", report)


if __name__ == "__main__":
    unittest.main()
