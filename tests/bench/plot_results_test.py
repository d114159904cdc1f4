#!/usr/bin/env python3
"""Tests of bench/results_page.py and of bench/plot_results.py --table-only (no matplotlib) on
tests/bench/data/results.jsonl: which record is current, which metrics the table shows, the
figures planned, and that the page is written, complete and the same on a second run.
ctest label unit; runs from the source root or anywhere (paths are from this file)."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in bench/

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURE = os.path.join(HERE, "data", "results.jsonl")
sys.path.insert(0, os.path.join(REPO, "bench"))
import results_page as rp  # noqa: E402

GPU = "NVIDIA X (1 SM)"
CPU = "CPU Y (2 cores)"


class CurrentFiguresTest(unittest.TestCase):
    def setUp(self):
        self.current = rp.current_figures(rp.load_records(FIXTURE))

    def test_newest_record_is_current_and_settings_are_left_out(self):
        c = self.current[(GPU, "decode-8b-bf16", "batch1", "decode_tok_per_s")]
        self.assertEqual(c.record.value, 250.0)  # not aaaaaaa's, not the A/B arm's 260
        self.assertEqual(c.record.commit, "bbbbbbb")
        self.assertEqual(c.records_at_commit, 1)

    def test_same_date_the_later_line_wins_and_counts_the_commits_records(self):
        c = self.current[(CPU, "cpu-decode", "m-batch1", "decode_tokens_per_second")]
        self.assertEqual(c.record.value, 18.0)
        self.assertEqual(c.records_at_commit, 2)
        self.assertEqual(rp.command_of(c.record), "onecard-bench cpu-decode --threads 1")

    def test_serving_on_the_gpu_names_the_cluster_script(self):
        record = rp.Record("stability", "requests1000", "ttft_p99", 1.0, "s", None, "abc",
                           GPU, "2026-12-03", None, 1)
        self.assertEqual(rp.command_of(record), "scripts/device/cluster.sh (its parts)")

    def test_devices_are_kept_apart(self):
        c = self.current[(CPU, "decode-8b-bf16", "batch1", "decode_tok_per_s")]
        self.assertEqual(c.record.value, 100.0)

    def test_headline_metrics(self):
        rows = {(d, s, c): [f.record.metric for f in fs]
                for d, s, c, fs in rp.headline_figures(self.current)}
        self.assertEqual(rows[(GPU, "decode-8b-bf16", "batch1")], ["decode_tok_per_s"])
        # Not listed: those with a floor, else all.
        self.assertEqual(rows[(GPU, "kernels-8b", "gemv_qkv")], ["ours_bandwidth"])
        self.assertEqual(rows[(GPU, "kernels-8b", "gemm_m8_layer")], ["time"])
        self.assertEqual(rows[(CPU, "serve-priority", "fifo-short")], ["ttft_p50", "ttft_p95"])

    def test_rows_sorted_by_scenario_device_and_natural_case(self):
        keys = [(s, d, c) for d, s, c, _ in rp.headline_figures(self.current)]
        self.assertEqual(keys, sorted(keys, key=lambda k: (k[0], k[1], rp.natural_key(k[2]))))
        decode = [c for s, d, c in keys if s == "decode-8b-bf16" and d == GPU]
        self.assertEqual(decode, ["batch1", "batch8"])
        self.assertLess(rp.natural_key("batch8"), rp.natural_key("batch16"))

    def test_figure_plan(self):
        self.assertEqual(rp.figure_plan(self.current), [
            ("decode-batch-cpu-y.png", CPU, "decode-batch"),
            ("decode-batch-nvidia-x.png", GPU, "decode-batch"),
            ("floor-kernels-nvidia-x.png", GPU, "floor-kernels"),
            ("floor-nvidia-x.png", GPU, "floor"),
            ("serving-cpu-y.png", CPU, "serving"),
        ])

    def test_format_value(self):
        self.assertEqual(rp.format_value(26.00148), "26.00")
        self.assertEqual(rp.format_value(1448161280.0), "1,448,161,280")
        self.assertEqual(rp.format_value(4235.4), "4,235")
        self.assertEqual(rp.format_value(0.012345), "0.01235")

    def test_pages_naming_a_scenario_in_code(self):
        pages = {"a.md": "the load average\n\n    onecard-bench-cuda load\n",
                 "b.md": "`decode-70b-int4-48g` and the load\n",
                 "c.md": "```\nrun.sh bench decode-70b-int4\n```\n"}
        self.assertEqual(rp.pages_naming("load", pages), ["a.md"])
        self.assertEqual(rp.pages_naming("decode-70b-int4", pages), ["c.md"])
        self.assertEqual(rp.pages_naming("decode-70b-int4-48g", pages), ["b.md"])

    def test_a_bad_line_is_named(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "results.jsonl")
            with open(path, "w") as f:
                f.write('{"scenario": "x"}\n')
            with self.assertRaisesRegex(ValueError, r"results.jsonl:1: not a benchmark record"):
                rp.load_records(path)


class TableOnlyRunTest(unittest.TestCase):
    def run_script(self, out_dir):
        subprocess.run([sys.executable, os.path.join(REPO, "bench", "plot_results.py"),
                        "--results", os.path.join(out_dir, "results.jsonl"), "--table-only"],
                       check=True, capture_output=True)
        with open(os.path.join(out_dir, "README.md"), encoding="utf-8") as f:
            return f.read()

    def test_writes_the_page_and_nothing_else(self):
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(FIXTURE, d)
            with open(os.path.join(d, "gpu-x.md"), "w") as f:
                f.write("# GPU X\n\nRan `decode-8b-bf16`; kernels-8b in prose is not a link.\n")
            page = self.run_script(d)
            self.assertEqual(sorted(os.listdir(d)), ["README.md", "gpu-x.md", "results.jsonl"])
            self.assertEqual(self.run_script(d), page)  # same data, same page
        self.assertTrue(page.startswith(rp.GENERATED_LINE + "\n"))
        self.assertIn("[floor-nvidia-x.png](floor-nvidia-x.png)", page)
        self.assertIn("| **decode-8b-bf16** | NVIDIA X (1 SM) | batch1 | decode_tok_per_s | 250 "
                      "| tok/s | 89.3 % | bbbbbbb | 2026-01-02 | 1 "
                      "| `scripts/device/run.sh bench decode-8b-bf16` | [gpu-x.md](gpu-x.md) |",
                      page)
        self.assertIn("| **decode-8b-bf16** | CPU Y (2 cores) | batch1 | decode_tok_per_s | 100 |",
                      page)
        self.assertIn("| **cpu-decode** | CPU Y (2 cores) | m-batch1 | decode_tokens_per_second "
                      "| 18 | tok/s |  | eeeeeee | 2026-01-04 | 2 "
                      "| `onecard-bench cpu-decode --threads 1` |  |", page)
        self.assertIn("| `scripts/device/run.sh bench kernels-8b` |  |", page)
        self.assertNotIn("260", page)  # the A/B arm
        self.assertNotIn("ms_per_step", page)
        table = [line for line in page.splitlines() if line.startswith("| ")]
        self.assertEqual(len(table), 1 + 9)  # header and the headline figures


if __name__ == "__main__":
    unittest.main()
