"""Tests of fla_bench.py's parts that run without a GPU:

    python3 bench/kda/test_fla_bench.py        or        python3 -m pytest bench/kda

The pure parts (options, shapes, FLA's arguments, the preflight protocol and its processes, the
report, derive_spec.py) need neither torch nor a GPU. With torch installed (CPU is enough), the
fp64 reference is checked against a plain per-token loop, and the whole benchmark (main()) runs
on the CPU with the CUDA calls, the cubin launches and FLA replaced by stand-ins.
"""

import contextlib
import io
import json
import math
import os
import sys
import tempfile
import textwrap
import time
import types
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "rmsnorm"))

import derive_spec  # noqa: E402
import fla_bench  # noqa: E402
import kda_bench_core as core  # noqa: E402
import phase_times  # noqa: E402
import sass_summary  # noqa: E402
import kda_report  # noqa: E402
import launch_json  # noqa: E402

import torch  # CPU is enough (Debian's python3-torch, scripts/setup.sh)

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SCALE = 0.0883883461356163  # float32(1 / sqrt(128)), as launch.json prints it


def kda_shape_doc(B, T, H, N, initial_state=True, final_state=True, entry="kda_fwd_chunked", bv=32):
    """One shape of a launch.json as `ptxevo build kernels/kda/kda_fwd.spec` writes it."""
    opts = {"initial_state": initial_state, "final_state": final_state}
    tensors = []
    for name, dtype, shape, role in core.expected_tensors(B, T, H, N, opts):
        t = {"name": name, "dtype": dtype, "shape": shape, "role": role}
        if role == "out":
            t["tolerance"] = {"rel_l2": 0.01, "max_abs": 0.05}
        tensors.append(t)
    packed = N != B

    def tensor(name, present=True):
        return {"kind": "tensor", "tensor": name} if present else {"kind": "null"}

    args = [tensor(n) for n in ("q", "k", "v", "g", "beta", "A_log", "dt_bias")]
    args += [tensor("cu_seqlens", packed), tensor("initial_state", initial_state), tensor("out"),
             tensor("final_state", final_state), {"kind": "scalar", "type": "i64", "value": T},
             {"kind": "scalar", "type": "i32", "value": H}, {"kind": "scalar", "type": "f32", "value": SCALE},
             {"kind": "scalar", "type": "f32", "value": -5.0}]
    return {"class": "benchmark", "dims": {"B": B, "H": H, "N": N, "T": T}, "tensors": tensors,
            "kernels": [{"entry": entry, "grid": [N, H, 128 // bv], "block": [128, 1, 1], "shared_bytes": 75520,
                         "cluster": [1, 1, 1], "args": args}],
            "bytes": 1282.0 * B * T * H, "flops": 6.0 * B * T * H * 128 * 128}


def kda_doc(shapes=((1, 8192, 96, 1), (1, 8192, 96, 6), (1, 8192, 96, 8), (1, 8192, 64, 1), (1, 8192, 64, 6),
                    (1, 8192, 64, 8)), **config):
    cfg = {"final_state": "true", "gate": "lower_bound", "initial_state": "true", "lower_bound": "-5"}
    cfg.update(config)
    st = {"initial_state": cfg["initial_state"] == "true", "final_state": cfg["final_state"] == "true"}
    return {
        "format": 1, "op": "kda_fwd", "arch": "sm_90a", "config": cfg,
        "knobs": {"BV": 32, "CHUNK": 16, "LM_TENSOR_CORES": 1, "STAGE": 1, "WARPS": 4},
        "toolchain": "nvrtc 13.0 nvJitLink 13.0",
        "spec": {"path": "/tmp/kda_chunked.spec", "sha256": "ab" * 32},
        "candidate": {"kind": "template", "path": "/repo/kernels/kda/kda_fwd_chunked.cu"}, "cubin_sha256": "cd" * 32,
        "shapes": [kda_shape_doc(*s, **st) for s in shapes],
    }


def build(label="chunked", doc=None, **config):
    return launch_json.parse_launch(doc or kda_doc(**config), label, f"/tmp/{label}")


def write_build_dir(d, doc):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "launch.json"), "w") as f:
        json.dump(doc, f)
    with open(os.path.join(d, "kernel.cubin"), "wb") as f:
        f.write(b"\x7fELF")


# ---------------------------------------------------------------- the op, pure

class OptionsAndShapesTest(unittest.TestCase):
    def test_options_of_the_main_spec(self):
        o = core.kda_options(build())
        self.assertEqual(o, {"gate": "lower_bound", "lower_bound": -5.0, "scale": SCALE, "initial_state": True,
                             "final_state": True})
        self.assertTrue(core.targets_config(o))
        soft = core.kda_options(build(doc={**kda_doc(), "config": {"gate": "softplus", "initial_state": "false"}}))
        self.assertEqual((soft["gate"], soft["lower_bound"], soft["initial_state"]), ("softplus", None, False))
        self.assertFalse(core.targets_config(soft))
        self.assertEqual(core.kda_options(build(scale="0.5"))["scale"], 0.5)

    def test_options_errors(self):
        cases = [({"op": "rmsnorm_fwd"}, "expected a build of kda_fwd"), ({"config": {"gate": "relu"}}, "gate 'relu'"),
                 ({"config": {"bias": "true"}}, "['bias'] are unknown"),
                 ({"config": {"gate": "softplus", "lower_bound": "-5"}}, "gate is softplus"),
                 ({"config": {"initial_state": "yes"}}, "not true or false"),
                 ({"config": {"head_dim": "64"}}, "head_dim 64")]
        for edit, msg in cases:
            d = kda_doc()
            d.update(edit)
            with self.assertRaises(core.BenchError) as cm:
                core.kda_options(build(doc=d))
            self.assertIn(msg, str(cm.exception))

    def test_sequences_follow_kda_shape_cpp(self):
        self.assertEqual(core.sequences(1, 8192, 1), [(0, 8192)])
        self.assertEqual(core.sequences(3, 17, 3), [(0, 17), (17, 17), (34, 17)])
        self.assertEqual(core.cu_seqlens(1, 8192, 6), [0, 1300, 1847, 3895, 4858, 5129, 8192])
        self.assertEqual(core.cu_seqlens(1, 8192, 8), list(range(0, 8193, 1024)))
        self.assertIsNone(core.cu_seqlens(2, 65, 2))
        # T of every set as kernels/kda/README.md lists it
        sums = {2: 2, 3: 115, 4: 40, 5: 2000, 6: 8192, 7: 241, 8: 8192, 9: 1289, 10: 4048}
        self.assertEqual({n: sum(l) for n, l in core.LENGTH_SETS.items()}, sums)
        self.assertEqual({n: len(l) for n, l in core.LENGTH_SETS.items()}, {n: n for n in sums})
        with open(os.path.join(REPO, "kernels", "kda", "kda_shape.cpp")) as f:
            src = f.read()
        for n, lengths in core.LENGTH_SETS.items():
            if len(set(lengths)) > 1:
                self.assertIn("{%d, {%s}}" % (n, ", ".join(map(str, lengths))), src)
        for bad, msg in [((2, 10, 3), "need B = 1"), ((1, 10, 11), "no length set"), ((1, 10, 6), "not T=10")]:
            with self.assertRaises(core.BenchError) as cm:
                core.sequences(*bad)
            self.assertIn(msg, str(cm.exception))

    def test_scenarios(self):
        b = build()
        o = core.kda_options(b)
        self.assertEqual([core.scenario_number(s, o) for s in b.shapes], [1, 2, 3, 4, 5, 6])
        self.assertEqual([core.scenario_label(s) for s in b.shapes],
                         ["H=96 8192", "H=96 1300,547,2048,963,271,3063", "H=96 8x1024", "H=64 8192",
                          "H=64 1300,547,2048,963,271,3063", "H=64 8x1024"])
        soft = build(doc={**kda_doc(), "config": {"gate": "softplus"}})
        self.assertIsNone(core.scenario_number(soft.shapes[0], core.kda_options(soft)))

    def test_check_shape(self):
        b = build()
        o = core.kda_options(b)
        for s in b.shapes:
            core.check_shape(s, o)
        d = kda_doc()
        d["shapes"][0]["tensors"][-3]["dtype"] = "f32"  # out (then final_state, workspace)
        with self.assertRaises(core.BenchError) as cm:
            core.check_shape(build(doc=d).shapes[0], o)
        self.assertIn("lays out", str(cm.exception))
        d = kda_doc()
        d["shapes"][1]["kernels"][0]["args"][13]["value"] = 0.125
        with self.assertRaises(core.BenchError) as cm:
            core.check_shape(build(doc=d).shapes[1], o)
        self.assertIn("scale", str(cm.exception))
        nostate = build(doc=kda_doc(initial_state="false", final_state="false"))
        core.check_shape(nostate.shapes[2], core.kda_options(nostate))
        self.assertEqual([t.name for t in nostate.shapes[2].tensors][-3:], ["cu_seqlens", "out", "workspace"])
        self.assertEqual(nostate.shapes[2].tensors[-1].role, "scratch")

    def test_select_shapes(self):
        a, b = build("a"), build("b")
        self.assertEqual(len(core.select_shapes([a, b], [], 0)), 6)
        self.assertEqual(core.select_shapes([a], ["4", "B=1,H=96,N=6,T=8192"], 0),
                         ["B=1,H=96,N=6,T=8192", "B=1,H=64,N=1,T=8192"])
        self.assertEqual(core.select_shapes([a], [], 2), ["B=1,H=96,N=1,T=8192", "B=1,H=96,N=6,T=8192"])
        with self.assertRaises(core.BenchError):
            core.select_shapes([a], ["7"], 0)
        c = build("c", doc=kda_doc(shapes=((1, 8192, 96, 1),)))
        with self.assertRaises(core.BenchError) as cm:
            core.select_shapes([a, c], [], 0)
        self.assertIn("c has no shape", str(cm.exception))
        d = kda_doc()
        for s in d["shapes"]:
            s["class"] = "correctness"
        with self.assertRaises(core.BenchError) as cm:
            core.select_shapes([build(doc=d)], [], 0)
        self.assertIn("no benchmark shapes", str(cm.exception))
        with self.assertRaises(core.BenchError):
            core.check_candidates_agree([a, build("s", doc={**kda_doc(), "config": {"gate": "softplus"}})])

    def test_workspace_follows_the_op(self):
        # KdaFwdOp::seq_segments and ::workspace_bytes (kernels/tests/kda_fwd_op_test.cpp): the
        # sequence split's segment states only where the chains are few; 421464096 is what
        # launch.json listed for H = 4, T = 65536 (H200 run, 2026-12-02).
        self.assertEqual(core.seq_segments(1, 65536, 4, 1, 16, 16), 16)
        self.assertEqual(core.seq_segments(1, 65536, 16, 1, 16, 32), 8)
        self.assertEqual(core.seq_segments(1, 8192, 64, 1, 16, 32), 1)
        self.assertEqual(core.seq_segments(1, 48, 4, 1, 16, 16), 1)
        self.assertEqual(core.seq_segments(1, 2000, 4, 5, 16, 32), 6)
        self.assertEqual(core.workspace_bytes(1, 65536, 4, 1), 421464096)
        most = max(4 * (1 + 160 // c) * core.workspace_chunk_bytes(c) for c in (16, 32, 64))
        self.assertEqual(core.workspace_bytes(1, 160, 4, 1), most + 4 * 11 * 4 + 16 + 4 * 9 * 131072)

    def test_tolerance(self):
        t = build().shapes[0].tensor("out")
        self.assertEqual(core.tolerance(t, None, None), (0.01, 0.05))
        self.assertEqual(core.tolerance(t, 0.005, None), (0.005, 0.05))
        self.assertEqual(core.tolerance(None, None, None), (1e-2, 5e-2))


class FlaArgumentsTest(unittest.TestCase):
    # chunk_kda's parameters in flash-linear-attention 0.5.2 (fla/ops/kda/chunk.py)
    PARAMS_052 = ["q", "k", "v", "g", "beta", "scale", "initial_state", "output_final_state",
                  "use_qk_l2norm_in_kernel", "use_gate_in_kernel", "use_beta_sigmoid_in_kernel", "allow_neg_eigval",
                  "safe_gate", "lower_bound", "disable_recompute", "return_intermediate_states", "state_v_first",
                  "cu_seqlens", "cu_seqlens_cpu", "cp_context", "kwargs"]

    def test_the_ops_convention(self):
        o = core.kda_options(build())
        kw = core.fla_kwargs(o, self.PARAMS_052)
        self.assertEqual(kw, {"scale": SCALE, "output_final_state": True, "use_qk_l2norm_in_kernel": True,
                              "use_gate_in_kernel": True, "use_beta_sigmoid_in_kernel": True, "lower_bound": -5.0,
                              "state_v_first": True})
        self.assertTrue(core.fla_kwargs(o, self.PARAMS_052, safe_gate=True)["safe_gate"])

    def test_older_and_other_versions(self):
        o = core.kda_options(build())
        old = [p for p in self.PARAMS_052 if p != "state_v_first"]
        kw = core.fla_kwargs(o, old)
        self.assertTrue(kw["transpose_state_layout"])
        self.assertNotIn("state_v_first", kw)
        with self.assertRaises(core.BenchError):
            core.fla_kwargs(o, [p for p in old if p != "kwargs"])
        with self.assertRaises(core.BenchError) as cm:
            core.fla_kwargs(o, [p for p in self.PARAMS_052 if p != "use_gate_in_kernel"])
        self.assertIn("use_gate_in_kernel", str(cm.exception))
        soft = core.kda_options(build(doc={**kda_doc(), "config": {"gate": "softplus", "final_state": "false"}}))
        kw = core.fla_kwargs(soft, self.PARAMS_052)
        self.assertIsNone(kw["lower_bound"])  # FLA's softplus gate
        self.assertFalse(kw["output_final_state"])
        with self.assertRaises(core.BenchError):
            core.fla_kwargs(soft, self.PARAMS_052, safe_gate=True)

    def test_budget(self):
        self.assertEqual(core.child_deadline(100.0, 225.0, 75.0), 250.0)
        self.assertEqual(core.child_deadline(100.0, 50.0, 75.0), 100.0)
        self.assertTrue(core.enough_time(110.0, 100.0, 225.0, 12.0))
        self.assertFalse(core.enough_time(320.0, 100.0, 225.0, 12.0))


# ---------------------------------------------------------------- the preflight

class PreflightTest(unittest.TestCase):
    KEYS = ["B=1,H=96,N=1,T=8192", "B=1,H=64,N=8,T=8192"]

    def events(self, pf, *events):
        for e in events:
            self.assertTrue(pf.feed(core.format_event(*e) + "\n"), e)

    def test_event_lines(self):
        line = core.format_event("cand_fail", "c16", self.KEYS[0], "CudaError: launch failed\nsecond line")
        self.assertEqual(core.parse_event(line + "\n"),
                         ("cand_fail", ["c16", self.KEYS[0], "CudaError: launch failed second line"]))
        self.assertEqual(core.parse_event(core.format_event("done")), ("done", []))
        self.assertEqual(core.parse_event(core.format_event("fla_import_fail", "")), ("fla_import_fail", [""]))
        self.assertIsNone(core.parse_event("Traceback (most recent call last):"))
        self.assertIsNone(core.parse_event("@@ bogus 1 2"))
        with self.assertRaises(ValueError):
            core.format_event("cand_ok", "a b", "k")
        with self.assertRaises(ValueError):
            core.format_event("cand_ok", "a")

    def test_everything_passes(self):
        pf = core.Preflight(["a", "b"], self.KEYS, [f"fla@{k}" for k in self.KEYS])
        self.assertEqual(pf.plan(), {"candidates": ["a", "b"], "fla": ["fla@" + k for k in self.KEYS]})
        self.events(pf, ("start",))
        for k in self.KEYS:
            for c in ("a", "b"):
                self.events(pf, ("cand_start", c, k))
                self.assertEqual(pf.phase(), "cand")
                self.events(pf, ("cand_ok", c, k))
            if k == self.KEYS[0]:
                self.events(pf, ("fla_import_start",))
                self.assertEqual(pf.phase(), "fla")
                self.events(pf, ("fla_import_ok", "0.5.2"))
            self.events(pf, ("fla_start", "fla@" + k))
            self.assertEqual(pf.phase(), "fla")
            self.events(pf, ("fla_ok", "fla@" + k, "61.5"))
        self.events(pf, ("done",))
        pf.child_ended(0, None)
        self.assertTrue(pf.done())
        self.assertEqual(pf.usable_candidates(), ["a", "b"])
        self.assertEqual(pf.fla["fla@" + self.KEYS[0]]["seconds"], 61.5)
        self.assertEqual(pf.summary()["fla_import"], {"ok": True, "version": "0.5.2"})

    def test_a_faulting_candidate_is_left_out_and_the_rest_rerun(self):
        pf = core.Preflight(["a", "b", "c"], self.KEYS, ["fla@" + k for k in self.KEYS])
        self.events(pf, ("start",), ("cand_start", "a", self.KEYS[0]), ("cand_ok", "a", self.KEYS[0]),
                    ("cand_start", "b", self.KEYS[0]))
        pf.child_ended(-11, None)  # b killed the process
        self.assertEqual(pf.cand["b"]["status"], "failed")
        self.assertIn("exit status -11", pf.cand["b"]["message"])
        self.assertEqual(pf.plan()["candidates"], ["a", "c"])  # a was not seen on every shape yet
        self.events(pf, ("start",), ("cand_start", "a", self.KEYS[0]), ("cand_ok", "a", self.KEYS[0]),
                    ("cand_start", "c", self.KEYS[0]))
        pf.child_ended(None, "inactivity", 30.0)  # c hangs
        self.assertEqual(pf.cand["c"]["status"], "hung")
        self.assertIn("no progress for 30 s", pf.cand["c"]["message"])
        self.events(pf, ("start",), ("cand_start", "a", self.KEYS[0]), ("cand_ok", "a", self.KEYS[0]),
                    ("cand_start", "a", self.KEYS[1]), ("cand_fail", "a", self.KEYS[1], "CudaError: x"))
        self.assertEqual(pf.cand["a"], {"status": "failed", "message": self.KEYS[1] + ": CudaError: x",
                                        "ok_keys": [self.KEYS[0]]})
        pf.child_ended(3, None)
        self.assertEqual(pf.pending_candidates(), [])
        self.assertEqual(pf.usable_candidates(), [])
        self.assertEqual(len(pf.pending_fla()), 2)

    def test_fla_crash_import_failure_and_deadline(self):
        fk = ["fla@" + k for k in self.KEYS]
        pf = core.Preflight([], self.KEYS, fk)
        self.events(pf, ("start",), ("fla_import_start",), ("fla_import_ok", "0.5.2"), ("fla_start", fk[0]))
        pf.child_ended(-6, None)
        self.assertEqual(pf.fla[fk[0]]["status"], "crashed")
        self.assertEqual(pf.plan()["fla"], [fk[1]])
        self.events(pf, ("start",), ("fla_import_start",), ("fla_import_ok", "0.5.2"), ("fla_start", fk[1]))
        pf.child_ended(None, "deadline")
        self.assertEqual(pf.fla[fk[1]]["status"], "timeout")
        self.assertTrue(pf.done())

        pf = core.Preflight(["a"], self.KEYS, fk)
        self.events(pf, ("start",), ("cand_start", "a", self.KEYS[0]), ("cand_ok", "a", self.KEYS[0]),
                    ("fla_import_start",), ("fla_import_fail", "ModuleNotFoundError: No module named 'fla'"))
        self.assertEqual(pf.pending_fla(), [])
        self.assertIn("did not import", pf.fla[fk[1]]["message"])
        pf.child_ended(None, "deadline")  # killed while a's second shape was pending
        self.assertEqual(pf.cand["a"]["status"], "untested")
        self.assertEqual(pf.usable_candidates(), ["a"])

        pf = core.Preflight(["a", "b"], self.KEYS, [])
        self.events(pf, ("start",), ("cand_start", "a", self.KEYS[0]))
        pf.child_ended(None, "deadline", 0.5)  # the deadline came as a's launch had just started
        self.assertEqual(pf.cand["a"]["status"], "untested")
        self.assertEqual(pf.cand["b"]["status"], "untested")
        pf = core.Preflight(["a"], self.KEYS, [])
        self.events(pf, ("start",), ("cand_start", "a", self.KEYS[0]))
        pf.child_ended(None, "deadline", 20.0)
        self.assertEqual(pf.cand["a"]["status"], "hung")

        pf = core.Preflight(["a"], self.KEYS, fk)
        self.events(pf, ("start",), ("fla_import_start",))
        pf.child_ended(None, "deadline")
        self.assertFalse(pf.fla_import["ok"])


class PreflightProcessTest(unittest.TestCase):
    """run_preflight with stand-in child processes (plain Python scripts printing events)."""

    def run_with(self, scripts, labels, keys, fla_keys, budget=20.0, kernel_timeout=1.0):
        calls = []

        def command(argv, plan):
            script = scripts[min(len(calls), len(scripts) - 1)]
            calls.append(plan)
            return [sys.executable, "-c", textwrap.dedent(script)]

        args = types.SimpleNamespace(kernel_timeout_s=kernel_timeout, idle_timeout_s=5.0)
        out = io.StringIO()
        with mock.patch.object(fla_bench, "child_command", command), contextlib.redirect_stdout(out):
            pf = fla_bench.run_preflight([], labels, keys, fla_keys, time.monotonic() + budget, args)
        return pf, calls, out.getvalue()

    def test_crash_then_hang_then_success(self):
        crash = """
            import os
            print("@@ start", flush=True)
            print("@@ cand_start bad K1", flush=True)
            os._exit(7)
        """
        hang = """
            import time
            print("@@ start", flush=True)
            print("@@ cand_start slow K1", flush=True)
            time.sleep(60)
        """
        ok = """
            print("@@ start", flush=True)
            print("@@ cand_start good K1", flush=True)
            print("@@ cand_ok good K1", flush=True)
            print("@@ fla_import_start", flush=True)
            print("@@ fla_import_ok 0.5.2", flush=True)
            print("@@ fla_start fla@K1", flush=True)
            print("some Triton chatter", flush=True)
            print("@@ fla_ok fla@K1 12.5", flush=True)
            print("@@ done", flush=True)
        """
        t0 = time.monotonic()
        pf, calls, log = self.run_with([crash, hang, ok], ["bad", "slow", "good"], ["K1"], ["fla@K1"])
        self.assertLess(time.monotonic() - t0, 15)
        self.assertEqual([c["candidates"] for c in calls], [["bad", "slow", "good"], ["slow", "good"], ["good"]])
        self.assertEqual(calls[0]["keys"], ["K1"])
        self.assertEqual({c: s["status"] for c, s in pf.cand.items()}, {"bad": "failed", "slow": "hung", "good": "ok"})
        self.assertEqual(pf.fla["fla@K1"]["status"], "ok")
        self.assertIn("[preflight] some Triton chatter", log)

    def test_the_deadline_stops_fla_autotuning(self):
        slow_fla = """
            import time
            print("@@ start", flush=True)
            print("@@ fla_import_start", flush=True)
            print("@@ fla_import_ok 0.5.2", flush=True)
            print("@@ fla_start fla@K1", flush=True)
            time.sleep(60)
        """
        t0 = time.monotonic()
        pf, calls, _ = self.run_with([slow_fla], [], ["K1", "K2"], ["fla@K1", "fla@K2"], budget=8.0)
        self.assertLess(time.monotonic() - t0, 12)
        self.assertGreater(time.monotonic() - t0, 2.5)  # the kernel timeout does not apply to FLA
        self.assertEqual(len(calls), 1)
        self.assertEqual(pf.fla["fla@K1"]["status"], "timeout")
        self.assertEqual(pf.fla["fla@K2"]["status"], "timeout")

    def test_a_child_that_keeps_failing_is_given_up(self):
        broken = """
            import sys
            print("Traceback: ImportError: torch", flush=True)
            sys.exit(1)
        """
        pf, calls, _ = self.run_with([broken], ["a"], ["K1"], ["fla@K1"])
        self.assertEqual(len(calls), 2)  # two without progress
        self.assertEqual(pf.cand["a"]["status"], "untested")
        self.assertEqual(pf.fla["fla@K1"]["status"], "timeout")


# ---------------------------------------------------------------- the report

def row(n, label, fla_ms=2.9, ours=None, failed=None, fla_status="timed", flashkda_ms=None):
    ours = ours or {}
    r = {"shape": f"key{n}", "scenario": n, "label": label, "providers": {}, "ratios": {}, "failed": failed or {},
         "fla": {"fla": {"status": fla_status, "message": ""}}, "checks": {}, "vs_fla": {}, "errors": [],
         "reference": {"what": "fp64 recurrence, all heads"}}
    if fla_ms:
        r["providers"]["fla"] = {"median": fla_ms, "ci_low": fla_ms * 0.99, "ci_high": fla_ms * 1.01}
        r["checks"]["fla"] = {"out": {"rel_l2": 4e-3, "ok": True}, "final_state": {"rel_l2": 1e-3, "ok": True}}
    for l, ms in ours.items():
        r["providers"][l] = {"median": ms, "ci_low": ms * 0.99, "ci_high": ms * 1.01}
        r["ratios"][l] = {"fla_over_ours": {"ratio": fla_ms / ms, "ci_low": 1, "ci_high": 2} if fla_ms else None}
        if flashkda_ms:
            r["ratios"][l]["flashkda_over_ours"] = {"ratio": flashkda_ms / ms, "ci_low": 1, "ci_high": 2}
        r["checks"][l] = {"out": {"rel_l2": 2e-3, "ok": True}, "final_state": {"rel_l2": 2e-6, "ok": True}}
        r["vs_fla"][l] = {"out": 4e-3, "final_state": 1e-3}
    return r


class ReportTest(unittest.TestCase):
    def test_tables(self):
        rows = [row(1, "H=96 8192", 2.8, {"chunked": 1.4, "rec": 7.0}, flashkda_ms=1.4),
                row(2, "H=96 mixed", None, {"chunked": 1.39}, failed={"rec": "out: rel_l2 0.2"},
                    fla_status="timeout", flashkda_ms=1.39)]
        rows[1]["checks"]["rec"] = {"out": {"rel_l2": 0.2, "ok": False}}
        t = kda_report.time_table(rows, ["chunked", "rec"], ["fla"])
        lines = t.strip().splitlines()
        self.assertEqual(len(lines), 5)
        self.assertIn("| 1 | H=96 8192 | 2.800 [2.772, 2.828] | 1.400 [1.386, 1.414] | 2.00x | 1.00x |", lines[2])
        self.assertIn("| timeout |", lines[3])
        self.assertIn("| failed | — | — |", lines[3])
        # geomeans: chunked FLA/ours over the one scenario with FLA (marked with its count), FlashKDA/ours over both
        self.assertIn("| 2.00x (1) | 1.00x |", lines[4])
        a = kda_report.accuracy_table(rows, ["chunked", "rec"], ["fla"])
        self.assertIn("| 4.0e-03 / 1.0e-03 | 2.0e-03 / 2.0e-06 |", a)
        self.assertIn("FAIL 2.0e-01", a)
        md = kda_report.markdown_report({"gpu": "NVIDIA H200", "commit": "abc"}, rows, ["chunked", "rec"], ["fla"],
                                        ["a note"])
        self.assertIn("- gpu: NVIDIA H200", md)
        self.assertIn("- a note", md)
        s = kda_report.short_table(rows, ["chunked", "rec"])
        self.assertIn("2.00x", s)
        self.assertIn("failed", s)
        self.assertEqual(len(s.strip().splitlines()), 4)

    def test_flashkda_only_from_the_same_run(self):
        r = row(1, "H=96 8192", 2.8, {"chunked": 1.4})
        r["providers"]["flashkda"] = {"median": 2.1, "ci_low": 2.0, "ci_high": 2.2}
        r["ratios"]["chunked"]["flashkda_over_ours"] = {"ratio": 1.5, "ci_low": 1.4, "ci_high": 1.6}
        t = kda_report.time_table([r], ["chunked"], ["fla"])
        self.assertIn("| 2.00x | 1.50x |", t)
        s = kda_report.short_table([r], ["chunked"])
        self.assertIn(" 1.50x", s.splitlines()[1])
        # Without FlashKDA in the run there is no FlashKDA ratio: no earlier numbers stand in.
        del r["ratios"]["chunked"]["flashkda_over_ours"]
        self.assertIn("| 2.00x | — |", kda_report.time_table([r], ["chunked"], ["fla"]))
        self.assertRegex(kda_report.short_table([r], ["chunked"]).splitlines()[1], r"2\.00x +—$")

    def test_empty(self):
        self.assertEqual(len(kda_report.time_table([], ["a"], ["fla"]).strip().splitlines()), 2)
        kda_report.short_table([], ["a"])


# ---------------------------------------------------------------- derive_spec.py

class DeriveSpecTest(unittest.TestCase):
    def test_the_main_spec(self):
        spec = os.path.join(REPO, "kernels", "kda", "kda_fwd.spec")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "sub", "chunked.spec")
            self.assertEqual(derive_spec.main([spec, "kda_fwd_chunked_seed", out]), 0)
            with open(out) as f:
                text = f.read()
            with open(spec) as f:
                orig = f.read()
        changed = [(a, b) for a, b in zip(orig.splitlines(), text.splitlines()) if a != b]
        self.assertEqual(len(orig.splitlines()), len(text.splitlines()))
        self.assertEqual(changed[0], ('baseline = "kda_fwd_recurrent_seed"', 'baseline = "kda_fwd_chunked_seed"'))
        self.assertEqual([b for _, b in changed[1:]],
                         [f'source = "{REPO}/kernels/kda/kda_fwd.cu"',
                          f'source = "{REPO}/kernels/kda/kda_fwd_chunked.cu"'])

    def test_edge_cases(self):
        text = '[[seed]]\nname = "a"\nsource = "a.cu"  # c\nentry = "a"\n[[seed]]\nname = "b"\nsource = "/x/b.cu"\n'
        out = derive_spec.derive(text, "b", "/repo/k")
        self.assertIn('source = "/repo/k/a.cu"  # c', out)
        self.assertIn('source = "/x/b.cu"', out)
        self.assertTrue(out.endswith('[objective]\nbaseline = "b"\n'))
        out = derive_spec.derive('[objective]\nmetric = "x"\n[[seed]]\nsource = "s.cu"\n', "z", "/r")
        self.assertIn('[objective]\nmetric = "x"\nbaseline = "z"\n[[seed]]', out)
        with self.assertRaises(derive_spec.SpecError):
            derive_spec.derive("[objective]\n", "z", "/r")
        with tempfile.TemporaryDirectory() as d:
            spec = os.path.join(d, "s.spec")
            with open(spec, "w") as f:
                f.write('[[seed]]\nname = "a"\nsource = "missing.cu"\n')
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                rc = derive_spec.main([spec, "a", os.path.join(d, "o.spec")])
            self.assertEqual(rc, 1 if derive_spec.tomllib else 0)


# ---------------------------------------------------------------- torch on the CPU

class ReferenceTest(unittest.TestCase):
    def setUp(self):
        self.saved = fla_bench.DEVICE
        fla_bench.DEVICE = "cpu"

    def tearDown(self):
        fla_bench.DEVICE = self.saved

    @staticmethod
    def loop_reference(inp, B, T, H, N, opts):
        """docs/kda.md 1.3's pseudo-code, literally: one sequence, head and token at a time."""
        f = torch.float64
        out = torch.zeros(B, T, H, 128, dtype=f).reshape(B * T, H, 128)
        fin = torch.zeros(N, H, 128, 128, dtype=f)
        q, k, v, g = (inp[n].reshape(B * T, H, 128).to(f) for n in ("q", "k", "v", "g"))
        beta = inp["beta"].reshape(B * T, H).to(f)
        for n, (s, L) in enumerate(core.sequences(B, T, N)):
            for h in range(H):
                S = inp["initial_state"][n, h].to(f).T.clone()
                for t in range(s, s + L):
                    qh = q[t, h] / torch.sqrt((q[t, h] ** 2).sum() + 1e-6)
                    kh = k[t, h] / torch.sqrt((k[t, h] ** 2).sum() + 1e-6)
                    x = g[t, h] + inp["dt_bias"][h].to(f)
                    A = math.exp(float(inp["A_log"][h]))
                    if opts["gate"] == "lower_bound":
                        a = opts["lower_bound"] / (1 + torch.exp(-A * x))
                    else:
                        a = -A * torch.where(x > 20, x, torch.log1p(torch.exp(x)))
                    b = 1 / (1 + math.exp(-float(beta[t, h])))
                    S = S * torch.exp(a)[:, None]
                    r = v[t, h] - kh @ S
                    S = S + b * torch.outer(kh, r)
                    out[t, h] = opts["scale"] * (qh @ S)
                fin[n, h] = S.T
        return out.reshape(B, T, H, 128), fin

    def test_matches_the_per_token_loop(self):
        for gate in ("lower_bound", "softplus"):
            for (B, T, H, N) in [(1, 40, 2, 4), (2, 17, 1, 2), (1, 2, 3, 2), (1, 70, 2, 1)]:
                doc = kda_doc(shapes=((B, T, H, N),), gate=gate)
                if gate == "softplus":
                    del doc["config"]["lower_bound"]
                b = build(doc=doc)
                opts = core.kda_options(b)
                shape = b.shapes[0]
                inp = fla_bench.make_inputs(shape, opts, 5, fla_bench.cu_tensor(shape))
                inp["g"] = (inp["g"].float() * 4).to(torch.bfloat16)  # reach the softplus threshold
                ref = fla_bench.kda_reference(inp, shape, opts)
                out, fin = self.loop_reference(inp, B, T, H, N, opts)
                self.assertLess(float((ref["out"] - out).abs().max()), 1e-12, (gate, B, T, H, N))
                self.assertLess(float((ref["final_state"] - fin).abs().max()), 1e-12)
                part = fla_bench.kda_reference(inp, shape, opts, heads=1)
                self.assertTrue(torch.allclose(part["out"], ref["out"][:, :, :1], rtol=0, atol=1e-13))

    def test_inputs_follow_kda_md(self):
        b = build(doc=kda_doc(shapes=((1, 115, 4, 3),)))
        opts = core.kda_options(b)
        shape = b.shapes[0]
        cu = fla_bench.cu_tensor(shape)
        a = fla_bench.make_inputs(shape, opts, 1, cu)
        self.assertEqual(cu.tolist(), [0, 17, 50, 115])
        self.assertIs(a["cu_seqlens"], cu)
        self.assertTrue(torch.allclose(a["q"].float().norm(dim=-1), torch.ones(1, 115, 4), atol=1e-2))
        self.assertEqual((a["v"].dtype, a["A_log"].dtype, a["initial_state"].shape),
                         (torch.bfloat16, torch.float32, (3, 4, 128, 128)))
        self.assertTrue(bool((a["dt_bias"] >= 0).all() and (a["dt_bias"] < 1).all()))
        for t in shape.tensors:
            if t.role == "in":
                self.assertEqual(list(a[t.name].shape), t.shape, t.name)
        self.assertTrue(torch.equal(fla_bench.make_inputs(shape, opts, 1, cu)["g"], a["g"]))
        self.assertFalse(torch.equal(fla_bench.make_inputs(shape, opts, 2, cu)["g"], a["g"]))
        outs = fla_bench.poisoned_outputs(shape)
        self.assertTrue(bool(torch.isnan(outs["out"].float()).all()))
        self.assertEqual(fla_bench.nonfinite(outs), outs["out"].numel() + outs["final_state"].numel())


class FakeEvent:
    def __init__(self, enable_timing=True):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


class CpuShims:
    """torch.cuda, the driver API and FLA replaced by CPU stand-ins, so that fla_bench.main runs
    on a machine without a GPU. A candidate's "kernel" computes the fp64 reference into the
    buffers its launch plan names (labels starting with "wrong" scale out by 1.1, "mutate" also
    changes an input, "crash" raises like a faulting launch); FLA computes the reference too (or
    does not import: fla=False)."""

    def __init__(self, fla=True):
        self.tensors = {}  # data_ptr -> tensor
        self.fla = fla
        self.fla_calls = []

    @staticmethod
    def reference_of(t):
        B, T, H = t["q"].shape[:3]
        N = t["initial_state"].shape[0]
        b = build(doc=kda_doc(shapes=((B, T, H, N),)))
        return fla_bench.kda_reference(t, b.shapes[0], core.kda_options(b))

    def kernel(self, label, k, pointers):
        t = {name: self.tensors[p] for name, p in pointers.items()}

        def run(stream):
            import cuda_ctypes
            if label.startswith("crash"):
                raise cuda_ctypes.CudaError("launch of kda_fwd_chunked: CUDA_ERROR_ILLEGAL_ADDRESS (stand-in)")
            ref = self.reference_of(t)
            if label.startswith("wrong"):
                ref["out"] = ref["out"] * 1.1
            t["out"].copy_(ref["out"].to(torch.bfloat16))
            t["final_state"].copy_(ref["final_state"].float())
            if label.startswith("mutate"):
                t["v"][0, 0, 0, 0] += 1
        return run

    def fla_class(self):
        shims = self

        class FakeFla(fla_bench.Fla):
            def load(self):
                if not shims.fla:
                    self.error = "ModuleNotFoundError: No module named 'fla'"
                    return False
                self.fn, self.version, self.params = object(), "0.5.2-fake", FlaArgumentsTest.PARAMS_052
                return True

            def call(self, inp, kw):
                shims.fla_calls.append(kw)
                ref = shims.reference_of(inp)
                return ref["out"].to(torch.bfloat16), ref["final_state"].float()
        return FakeFla

    def __enter__(self):
        import cuda_ctypes
        shims = self
        orig_inputs, orig_outputs = fla_bench.make_inputs, fla_bench.poisoned_outputs

        def track(fn):
            def wrapped(*a, **k):
                r = fn(*a, **k)
                for v in r.values():
                    shims.tensors[v.data_ptr()] = v
                return r
            return wrapped

        class Module:
            def __init__(self, drv, image, name):
                self.label = os.path.basename(os.path.dirname(name))

        def prepare_plan(module, kernels, pointers):
            return [shims.kernel(module.label, k, pointers) for k in kernels]

        def run_plan(plan, stream):
            for launch in plan:
                launch(stream)

        props = types.SimpleNamespace(name="CPU stand-in", multi_processor_count=1, L2_cache_size=1 << 20,
                                      total_memory=1 << 34)
        self.saved_device = fla_bench.DEVICE
        fla_bench.DEVICE = "cpu"
        self.stack = contextlib.ExitStack()
        for p in [
            mock.patch.object(torch.cuda, "is_available", lambda: True),
            mock.patch.object(torch.cuda, "synchronize", lambda *a: None),
            mock.patch.object(torch.cuda, "empty_cache", lambda: None),
            mock.patch.object(torch.cuda, "mem_get_info", lambda *a: (1 << 33, 1 << 34)),
            mock.patch.object(torch.cuda, "current_stream", lambda *a: types.SimpleNamespace(cuda_stream=0)),
            mock.patch.object(torch.cuda, "Event", FakeEvent),
            mock.patch.object(torch.cuda, "get_device_properties", lambda *a: props),
            mock.patch.object(cuda_ctypes, "Driver", lambda: types.SimpleNamespace(version=lambda: 13000)),
            mock.patch.object(cuda_ctypes, "Module", Module),
            mock.patch.object(cuda_ctypes, "prepare_plan", prepare_plan),
            mock.patch.object(cuda_ctypes, "run_plan", run_plan),
            mock.patch.object(fla_bench, "make_inputs", track(orig_inputs)),
            mock.patch.object(fla_bench, "poisoned_outputs", track(orig_outputs)),
            mock.patch.object(fla_bench, "Fla", self.fla_class()),
        ]:
            self.stack.enter_context(p)
        return self

    def __exit__(self, *exc):
        self.stack.close()
        fla_bench.DEVICE = self.saved_device
        return False


def child_with_shims(argv_json, fla):
    """The preflight process of CpuEndToEndTest: fla_bench's child under CpuShims."""
    with CpuShims(fla=fla):
        return fla_bench.main(json.loads(argv_json))


class CpuEndToEndTest(unittest.TestCase):
    """main() on the CPU under CpuShims, with and without the preflight process."""

    SHAPES = ((1, 115, 2, 3), (1, 48, 2, 1))

    def run_main(self, labels, extra=(), fla=True, preflight=False):
        with tempfile.TemporaryDirectory() as d:
            cands = []
            for l in labels:
                write_build_dir(os.path.join(d, l), kda_doc(shapes=self.SHAPES))
                cands += ["--candidate", f"{l}={os.path.join(d, l)}"]

            def command(argv, plan):
                child_argv = list(argv) + ["--preflight-child", json.dumps(plan)]
                code = (f"import sys; sys.path.insert(0, {HERE!r}); import test_fla_bench as t; "
                        f"sys.exit(t.child_with_shims({json.dumps(child_argv)!r}, {fla!r}))")
                return [sys.executable, "-c", code]

            out = os.path.join(d, "out")
            buf = io.StringIO()
            args = cands + ["--out", out, "--commit", "abc1234", "--samples", "20", "--target-batch-ms", "0.5",
                            "--warmup", "1"] + ([] if preflight else ["--no-preflight"]) + list(extra)
            with CpuShims(fla=fla) as shims, contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf), \
                    mock.patch.object(fla_bench, "child_command", command), \
                    mock.patch.object(fla_bench.signal, "signal", lambda *a: None):
                rc = fla_bench.main(args)
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)
            with open(os.path.join(out, "results.md")) as f:
                md = f.read()
            with open(os.path.join(out, "summary.txt")) as f:
                summary = f.read()
        self.fla_calls = shims.fla_calls
        return rc, res, md + summary, buf.getvalue()

    def test_good_and_wrong_candidates(self):
        rc, res, md, log = self.run_main(["good", "wrong", "mutate"])
        self.assertEqual(rc, 1, log)  # "wrong" fails its check, "mutate" changes its inputs
        self.assertEqual(res["environment"]["commit"], "abc1234")
        self.assertEqual(res["environment"]["fla"], "0.5.2-fake")
        self.assertEqual(len(res["shapes"]), 2)
        for r in res["shapes"]:
            self.assertEqual(sorted(r["providers"]), ["fla", "good"], r["failed"])
            self.assertIn("wrong", r["failed"])
            self.assertIn("rel_l2", r["failed"]["wrong"])
            self.assertIn("modified its inputs ['v']", r["failed"]["mutate"])
            self.assertTrue(r["checks"]["mutate"]["out"]["ok"])
            self.assertLess(r["checks"]["good"]["out"]["rel_l2"], 5e-3)
            self.assertLess(r["checks"]["good"]["final_state"]["rel_l2"], 1e-6)
            self.assertLess(r["vs_fla"]["good"]["out"], 1e-6)
            self.assertEqual(r["providers"]["good"]["n"], 20)
            self.assertEqual(r["fla"]["fla"]["status"], "timed")
            self.assertIn("fla_over_ours", r["ratios"]["good"])
            self.assertNotIn("flashkda_over_ours", r["ratios"]["good"])  # FlashKDA did not run
            self.assertGreaterEqual(r["pool_sets"], 2)
        self.assertTrue(all(kw["state_v_first"] and kw["lower_bound"] == -5.0 for kw in self.fla_calls))
        self.assertIn("## Time", md)
        self.assertIn("wrong failed", md)
        self.assertIn("geomean", log)

    def test_fla_unavailable(self):
        rc, res, md, log = self.run_main(["good"], ["--shapes", "B=1,H=2,N=1,T=48"], fla=False)
        self.assertEqual(rc, 3, log)
        self.assertEqual(len(res["shapes"]), 1)
        self.assertEqual(sorted(res["shapes"][0]["providers"]), ["good"])
        self.assertIn("flash-linear-attention is not available", md)
        self.assertIn("No module named 'fla'", log)

    def test_with_the_preflight_process(self):
        rc, res, md, log = self.run_main(["good", "crash", "wrong"], preflight=True)
        self.assertEqual(rc, 1, log)
        pf = res["preflight"]
        self.assertEqual({c: s["status"] for c, s in pf["candidates"].items()},
                         {"good": "ok", "crash": "failed", "wrong": "ok"}, log)
        self.assertIn("ILLEGAL_ADDRESS", pf["candidates"]["crash"]["message"])
        self.assertEqual({s["status"] for s in pf["fla"].values()}, {"ok"})
        self.assertEqual(pf["fla_import"], {"ok": True, "version": "0.5.2-fake"})
        for r in res["shapes"]:
            self.assertEqual(sorted(r["providers"]), ["fla", "good"])
            self.assertNotIn("crash", r["checks"])
        self.assertIn("crash: left out by the preflight: failed", md)
        self.assertIn("| excluded | — | — |", md)

    def test_preflight_without_fla(self):
        rc, res, md, log = self.run_main(["good"], ["--max-shapes", "1"], fla=False, preflight=True)
        self.assertEqual(rc, 3, log)
        self.assertFalse(res["preflight"]["fla_import"]["ok"])
        self.assertEqual(res["preflight"]["processes"], 1)
        self.assertEqual(sorted(res["shapes"][0]["providers"]), ["good"])
        self.assertIn("unavailable", md)


class PhaseTimesTableTest(unittest.TestCase):
    def test_rows_and_sum(self):
        md = phase_times.table([{"label": "H=96 8192", "candidate": "c", "plan_ms": 2.0,
                                 "kernels": [{"entry": "kda_fwd_prepare", "ms": 1.25},
                                             {"entry": "kda_fwd_recurrence", "ms": 0.75}]},
                                {"label": "x", "candidate": "d", "plan_ms": 1.0,
                                 "kernels": [{"entry": "k", "ms": 1.0}]}])
        self.assertIn("| H=96 8192 | c | kda_fwd_prepare 1.250, kda_fwd_recurrence 0.750 | 2.000 | 2.000 |", md)
        self.assertIn("| x | d | k 1.000 | 1.000 | 1.000 |", md)
        self.assertNotIn("CUTLASS", md)

    def test_arguments(self):
        with contextlib.redirect_stderr(io.StringIO()):
            with self.assertRaises(SystemExit):
                phase_times.parse_args(["--candidate", "a=b", "--reps", "0"])
        self.assertEqual(phase_times.parse_args(["--candidate", "a=b", "--shapes", "1", "6"]).shapes, ["1", "6"])


class SassSummaryTest(unittest.TestCase):
    CSV = textwrap.dedent("""\
        "Kernel Name","k",
        "Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_wait","stall_selected"
        "0x0","HMMA.16816.F32.BF16 R0, R4, R8, R0","30","200","20","10"
        "0x10","@!P0 BRA 0x40","10","100","0","10"
        "0x20","LDS.64 R2, [R3]","60","300","50","10"
        """)

    def test_counts_per_unit_and_shares(self):
        text = sass_summary.summarise(sass_summary.parse(self.CSV.splitlines(True)), 100.0, 10)
        self.assertIn("instructions executed: 6.0 per unit", text)
        self.assertIn("| LDS | 3.0 | 60.0% |", text)
        self.assertIn("| BRA | 1.0 | 10.0% |", text)  # a predicated instruction counts under its opcode
        self.assertIn("| stall_wait | 70.0% |", text)

    def test_not_an_ncu_file(self):
        with self.assertRaises(ValueError):
            sass_summary.parse(["a,b\n", "1,2\n"])


if __name__ == "__main__":
    unittest.main()
