"""Tests of bwd_bench.py's parts that run without a GPU (torch on the CPU):

    /usr/bin/python3 bench/kda/test_bwd_bench.py

The fp64 gradients that both our backward and FLA's are measured against are checked against
central differences of fla_bench.py's fp64 forward, along random directions, on fixed-length and
packed shapes with both gates; the error measure against a known perturbation.
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "rmsnorm"))

import torch  # noqa: E402  CPU is enough (Debian's python3-torch, scripts/setup.sh)

import bwd_bench  # noqa: E402
import fla_bench  # noqa: E402
from launch_json import ShapeSpec  # noqa: E402

SCALE = 0.0883883461356163


def shape(B, T, H, N):
    return ShapeSpec(cls="benchmark", dims={"B": B, "T": T, "H": H, "N": N}, tensors=[], kernels=[], bytes=0.0, flops=0.0)


class ReferenceGradientsTest(unittest.TestCase):
    def setUp(self):
        self.saved = (bwd_bench.DEVICE, fla_bench.DEVICE)
        bwd_bench.DEVICE = fla_bench.DEVICE = "cpu"

    def tearDown(self):
        bwd_bench.DEVICE, fla_bench.DEVICE = self.saved

    def inputs(self, s, opts, seed):
        x = bwd_bench.make_inputs(s, opts, seed)
        # fp64 copies, so the central differences see the same values the gradients are taken at
        return {k: (v.to(torch.float64) if v.is_floating_point() else v) for k, v in x.items()}

    def loss(self, x, s, opts):
        ref = fla_bench.kda_reference(x, s, opts)
        out = (ref["out"] * x["d_out"]).sum()
        if opts["final_state"]:
            out = out + (ref["final_state"] * x["d_final_state"]).sum()
        return float(out)

    def check(self, s, opts, seed):
        x = self.inputs(s, opts, seed)
        grads = bwd_bench.reference_grads(x, s, opts, heads=s.dims["H"])
        gen = torch.Generator().manual_seed(seed + 7)
        for leaf, grad_name in zip(bwd_bench.LEAVES, bwd_bench.GRADS):
            if leaf not in x:
                self.assertNotIn(grad_name, grads)
                continue
            u = torch.randn(x[leaf].shape, generator=gen, dtype=torch.float64)
            eps = 1e-6
            xp, xm = dict(x), dict(x)
            xp[leaf], xm[leaf] = x[leaf] + eps * u, x[leaf] - eps * u
            fd = (self.loss(xp, s, opts) - self.loss(xm, s, opts)) / (2 * eps)
            an = float((grads[grad_name] * u).sum())
            self.assertAlmostEqual(an, fd, delta=1e-6 * max(1.0, abs(fd)), msg=f"{grad_name} {s.dims} {opts['gate']}")

    def opts(self, gate="lower_bound", initial=True, final=True):
        return {"gate": gate, "lower_bound": -5.0 if gate == "lower_bound" else None, "scale": SCALE,
                "initial_state": initial, "final_state": final}

    def test_fixed_length_rows_lower_bound_gate(self):
        self.check(shape(2, 9, 2, 2), self.opts(), 1)

    def test_packed_sequences_softplus_gate_no_states(self):
        self.check(shape(1, 115, 1, 3), self.opts("softplus", initial=False, final=False), 2)

    def test_packed_single_tokens_with_states(self):
        self.check(shape(1, 2, 2, 2), self.opts(), 3)

    def test_gradients_of_the_first_heads_only_match_all_heads(self):
        s, o = shape(1, 7, 3, 1), self.opts()
        x = self.inputs(s, o, 4)
        every = bwd_bench.reference_grads(x, s, o, heads=3)
        first = bwd_bench.reference_grads(x, s, o, heads=2)
        for name, g in first.items():
            torch.testing.assert_close(g, bwd_bench.head_cut(name, every[name], 2), rtol=1e-12, atol=1e-12)


class ErrorsTest(unittest.TestCase):
    def test_a_known_perturbation_and_a_missing_gradient(self):
        ref = {"dq": torch.ones(1, 4, 2, 128, dtype=torch.float64), "dA_log": torch.ones(2, dtype=torch.float64)}
        ours = {"dq": torch.ones(1, 4, 3, 128) * 1.01}
        e = bwd_bench.errors(ours, ref)
        self.assertAlmostEqual(e["dq"]["rel_l2"], 0.01, delta=1e-6)
        self.assertEqual(e["dq"]["nonfinite"], 0)
        self.assertIsNone(e["dA_log"]["rel_l2"])
        ours["dq"][0, 0, 0, 0] = float("nan")
        self.assertEqual(bwd_bench.errors(ours, ref)["dq"]["nonfinite"], 1)


class TableTest(unittest.TestCase):
    def test_ratios_geomeans_export_and_autograd_lines(self):
        med = lambda m: {"median": m}  # noqa: E731  (summarize)
        rat = lambda m: {"ratio": m}  # noqa: E731  (paired_ratio)
        rows = [{"scenario": n, "label": f"s{n}", "providers": {"seed": med(10.0), "fla": med(5.0), "chunked+seed": med(11.0),
                                                               "fla_fwd+fla": med(7.0), "prep": med(6.5)},
                 "ratios": {"fla_bwd_over_ours": rat(r), "fla_step_over_ours": rat(r * 1.1), "build_over_export": rat(1.0),
                            "fla_step_over_autograd": rat(0.6), "first_over_prep": rat(1.5)},
                 "errors": {"seed": {"dq": {"rel_l2": 1e-6}}, "fla": {"dq": {"rel_l2": 3e-3}}, "prep": {"dq": {"rel_l2": 2e-6}},
                            "autograd": {"dq": {"rel_l2": 2e-6}, "dk": {"rel_l2": 4e-6}}},
                 "export_bit_equal": {"dq": True, "dk": False}} for n, r in ((1, 0.5), (4, 0.125))]
        t = bwd_bench.table(rows, "seed")
        self.assertIn("| 1 | s1 | 10.000 | 5.000 | 0.50 | 11.000 | 7.000 | 0.55 | 1.00e-06 | 3.00e-03 |", t)
        self.assertIn("Geomean FLA/ours, backward: 0.250 over 2 shapes", t)
        self.assertIn("s4: export bwd() bit-equal to the build on 1/2 gradients; build/export time 1.000", t)
        self.assertIn("s1: autograd (exported fwd + bwd) worst rel_l2 4.00e-06; FLA step / autograd step 0.60", t)
        self.assertIn("s4: prep 6.500 ms, seed / prep 1.500, worst rel_l2 2.00e-06", t)

    def test_kernel_by_kernel_lines(self):
        rows = [{"scenario": 6, "label": "s6", "providers": {}, "ratios": {}, "errors": {},
                 "kernels": {"chunk": [{"entry": "kda_bwd_chunk_slices", "median": 3.0},
                                       {"entry": "kda_bwd_reduce", "median": 1.0}]}}]
        t = bwd_bench.table(rows, "chunk")
        self.assertIn("s6: chunk kernel by kernel (median ms, share of their sum): kda_bwd_chunk_slices 3.000 (75%), "
                      "kda_bwd_reduce 1.000 (25%)", t)


if __name__ == "__main__":
    unittest.main()
