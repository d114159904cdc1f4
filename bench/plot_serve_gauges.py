#!/usr/bin/env python3
"""The worker's autoscaling gauges during serve-load, as time series.

Reads bench/results/serve-load-gauges-<device>.json (the `worker_gauges` of `onecard-bench
serve-load --json`, one entry a run: label, worker flags, samples [t_s, waiting, running,
kv usage ratio]) and draws requests waiting / running and KV usage against time, a column a
run, into the PNG of the same name. Needs matplotlib (scripts/install-matplotlib.sh); the
PNG bytes depend on the data alone (plot_results.save_png).

Usage: python3 bench/plot_serve_gauges.py [bench/results/serve-load-gauges-nvidia-h200.json]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_results  # noqa: E402  (import_pyplot, save_png)

DEFAULT = os.path.join(plot_results.REPO, "bench", "results",
                       "serve-load-gauges-nvidia-h200.json")


def main(argv):
    path = argv[1] if len(argv) > 1 else DEFAULT
    with open(path) as f:
        data = json.load(f)
    runs = data["runs"]
    plt = plot_results.import_pyplot()
    fig, axes = plt.subplots(2, len(runs), figsize=(4.2 * len(runs), 4.6), squeeze=False,
                             sharex="col")
    for col, run in enumerate(runs):
        t = [s[0] for s in run["samples"]]
        top, bottom = axes[0][col], axes[1][col]
        top.plot(t, [s[2] for s in run["samples"]], label="requests running", color="#1f77b4")
        top.plot(t, [s[1] for s in run["samples"]], label="requests waiting", color="#d62728")
        top.set_title(f"{run['label']}: {run['users']} users", fontsize=8)
        top.set_ylabel("requests")
        top.legend(loc="upper right", fontsize=7)
        bottom.plot(t, [100 * s[3] for s in run["samples"]], color="#2ca02c")
        bottom.set_ylabel("KV cache used (%)")
        bottom.set_ylim(0, 105)
        bottom.set_xlabel("seconds into the load")
    fig.tight_layout()
    out = os.path.splitext(path)[0] + ".png"
    plot_results.save_png(fig, out)
    plt.close(fig)
    print(f"plot_serve_gauges: wrote {out} ({os.path.getsize(out) // 1024} KiB)")


if __name__ == "__main__":
    main(sys.argv)
