#!/usr/bin/env python3
"""Tests of ncu_table.py on a small CSV shaped as `ncu --csv` writes it (no GPU)."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_table  # noqa: E402

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type",'
        '"Rule Description","Estimated Speedup Type","Estimated Speedup"')


def row(kernel, section, metric, unit, value, rule="", desc=""):
    return (f'"0","1","python3","h","{kernel}","1","7","(128, 1, 1)","(4, 1, 1)","0","9.0","{section}",'
            f'"{metric}","{unit}","{value}","{rule}","","{desc}","",""')


class NcuTableTest(unittest.TestCase):
    def write(self, lines):
        f = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
        f.write("\n".join(lines) + "\n")
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_starts_at_the_header_after_the_programs_output(self):
        path = self.write([
            '| # | shape | ours | a, b, c, d, e, f, g, h, i, j, k |',  # the program's own lines come first
            '{"date": "x", "a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "i": 9, "j": 10}',
            HEAD,
            row("kda_bwd_chunk_slices", "GPU Speed Of Light Throughput", "Duration", "ns", "16,865,568"),
            row("kda_bwd_chunk_slices", "Occupancy", "Achieved Occupancy", "%", "12.40"),
            row("kda_bwd_chunk_slices", "GPU Speed Of Light Throughput", "SM Frequency", "hz", "1.8e9"),
            row("kda_bwd_chunk_slices", "WarpStateStats", "", "", "", "CPIStall",
                "each warp of this workload spends 2.9 cycles being stalled waiting for L1TEX"),
            row("kda_bwd_chunk_slices", "Occupancy", "", "", "", "TheoreticalOccupancy",
                "occupancy (12.5%) is limited by the required amount of shared memory"),
            row("kda_bwd_chunk_slices", "Occupancy", "", "", "", "Other", "nothing about limits here"),
        ])
        out = ncu_table.table(path)
        self.assertEqual(len(out), 4)
        self.assertIn("Duration", out[0])
        self.assertIn("16,865,568", out[0])
        self.assertIn("12.40", out[1])
        self.assertIn("CPIStall", out[2])
        self.assertIn("limited by", out[3])
        self.assertTrue(all(l.startswith("0:kda_bwd_chunk_slices") for l in out))

    def test_no_ncu_rows_is_an_error_naming_the_file(self):
        path = self.write(["the program failed before any kernel ran"])
        with self.assertRaises(SystemExit) as e:
            ncu_table.table(path)
        self.assertIn(path, str(e.exception))


if __name__ == "__main__":
    unittest.main()
