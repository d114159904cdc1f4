#!/usr/bin/env python3
"""Draws bench/results' figures from results.jsonl and rewrites bench/results/README.md, the
page of every scenario's current figure (bench/results_page.py). One set a device:

  floor-<device>.png          % of floor of each case's headline metrics, end-to-end scenarios
  floor-kernels-<device>.png  the same for the kernels-* scenarios, a panel each
  decode-batch-<device>.png   decode tok/s and % of floor against batch, a line a scenario
                              (and model, where the case names one)
  serving-<device>.png        TTFT and TPOT percentiles (P50/P95/P99) of the serving scenarios

A figure with nothing to draw is not written, and an older file of that name is removed.
Same data, same files: fixed styles and order, no time stamps in the PNGs.

  bash scripts/install-matplotlib.sh      # once: matplotlib from PyPI into .deps/plot
  python3 bench/plot_results.py           # [--results PATH] [--out-dir DIR] [--table-only]

--table-only writes the page alone and needs no matplotlib; tests/tools/bench/
plot_results_test.py runs it on a fixture (ctest, label unit). The figures are checked by eye.
"""

import argparse
import collections
import io
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # run from the tree: no __pycache__ in bench/
sys.path.insert(0, HERE)
import results_page as rp  # noqa: E402

REPO = os.path.dirname(HERE)
# Fixed colours, assigned in sorted order (matplotlib's tab10).
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]
DPI = 80
PNG_COLOURS = 128


def colour(i):
    return COLOURS[i % len(COLOURS)]


# Comparison cases of a kernel scenario (kernels-int4's `_stream`, `_t64`, ...: one kernel
# or tile height forced): in the table, not in the plot, which shows what the runner launches.
COMPARISON_CASE_RE = re.compile(r"_(stream|t\d+)$")


def floor_bars(current, device, kernels):
    """[(scenario, label, pct)] of the device's headline metrics that have a floor."""
    bars = []
    for dev, scenario, case, figures in rp.headline_figures(current):
        if dev != device or rp.is_kernel_scenario(scenario) != kernels:
            continue
        if kernels and COMPARISON_CASE_RE.search(case):
            continue
        with_floor = [c.record for c in figures if c.record.pct_of_floor is not None]
        for r in with_floor:
            label = case if len(with_floor) == 1 else f"{case} ({r.metric})"
            bars.append((scenario, label, r.pct_of_floor))
    return bars


def draw_bars(ax, bars, with_scenario, rows):
    """Horizontal bars from the top, `rows` slots high (panels of one figure share it)."""
    scenarios = sorted({b[0] for b in bars})
    y = [rows - 1 - i for i in range(len(bars))]
    ax.barh(y, [b[2] for b in bars], color=[colour(scenarios.index(b[0])) for b in bars])
    ax.set_yticks(y, [f"{b[0]}  {b[1]}" if with_scenario else b[1] for b in bars], fontsize=7)
    for yi, b in zip(y, bars):
        ax.text(b[2] + 1, yi, f"{b[2]:.0f}", va="center", fontsize=6)
    ax.axvline(100, color="black", linewidth=0.8, linestyle="--")
    ax.set_xlim(0, max(110, max(b[2] for b in bars) + 12))
    ax.set_ylim(-0.7, rows - 0.3)
    ax.set_xlabel("% of floor")
    ax.grid(axis="x", linewidth=0.3)


def plot_floor(plt, current, device):
    bars = floor_bars(current, device, kernels=False)
    fig, ax = plt.subplots(figsize=(8, 1.0 + 0.17 * len(bars)))
    draw_bars(ax, bars, with_scenario=True, rows=len(bars))
    ax.set_title(f"% of floor, current figures: {device}", fontsize=9)
    return fig


def plot_floor_kernels(plt, current, device):
    bars = floor_bars(current, device, kernels=True)
    scenarios = sorted({b[0] for b in bars})
    rows = max(sum(b[0] == s for b in bars) for s in scenarios)
    fig, axes = plt.subplots(1, len(scenarios), figsize=(5.5 * len(scenarios), 1.0 + 0.13 * rows),
                             squeeze=False)
    for ax, s in zip(axes[0], scenarios):
        draw_bars(ax, [b for b in bars if b[0] == s], with_scenario=False, rows=rows)
        ax.set_title(f"{s}: {device}", fontsize=9)
    return fig


def decode_series(current, device):
    """{series label: [(batch, tok/s, pct or None)]}, batch-sorted; a label names the series'
    commits (a case renamed since leaves an old series behind)."""
    series = collections.defaultdict(list)
    commits = collections.defaultdict(set)
    for (dev, scenario, case, metric), c in current.items():
        m = rp.BATCH_RE.search(case)
        if dev != device or metric not in rp.DECODE_RATE_METRICS or not m:
            continue
        rest = (case[:m.start()] + case[m.end():]).strip("-")
        label = f"{scenario} {rest}" if rest else scenario
        series[label].append((int(m.group(2)), c.record.value, c.record.pct_of_floor))
        commits[label].add(c.record.commit)
    return {f"{k} ({', '.join(sorted(commits[k]))})": sorted(v)
            for k, v in sorted(series.items())}


def plot_decode_batch(plt, current, device):
    series = decode_series(current, device)
    has_floor = any(p is not None for points in series.values() for _, _, p in points)
    fig, axes = plt.subplots(1, 2 if has_floor else 1, figsize=(11 if has_floor else 6.5, 4.2),
                             squeeze=False)
    for i, (label, points) in enumerate(series.items()):
        style = dict(color=colour(i), marker="o", markersize=3, linewidth=1.2, label=label)
        axes[0][0].plot([p[0] for p in points], [p[1] for p in points], **style)
        with_pct = [p for p in points if p[2] is not None]
        if has_floor and with_pct:
            axes[0][1].plot([p[0] for p in with_pct], [p[2] for p in with_pct], **style)
    axes[0][0].set_yscale("log")
    axes[0][0].set_ylabel("tok/s (all requests)")
    axes[0][0].legend(fontsize=7)
    if has_floor:
        axes[0][1].set_ylabel("% of floor")
        axes[0][1].set_ylim(0, 105)
    batches = sorted({p[0] for points in series.values() for p in points})
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches, [str(b) for b in batches])
        ax.minorticks_off()
        ax.set_xlabel("batch")
        ax.grid(linewidth=0.3)
    fig.suptitle(f"Decode against batch, current figures: {device}", fontsize=9)
    return fig


def latency_series(current, device):
    """{'ttft'|'tpot': {series label: {percentile: ms}}}, sorted."""
    out = {"ttft": {}, "tpot": {}}
    for (dev, scenario, case, metric), c in sorted(current.items()):
        m = rp.LATENCY_RE.match(metric)
        if dev != device or not m or c.record.unit not in rp.LATENCY_UNIT_MS:
            continue
        who, what, pct = m.groups()
        label = f"{scenario} {case}" + (f" {who}" if who else "")
        ms = c.record.value * rp.LATENCY_UNIT_MS[c.record.unit]
        out[what].setdefault(label, {})[int(pct)] = ms
    return out


def plot_serving(plt, current, device):
    data = {k: v for k, v in latency_series(current, device).items() if v}
    fig, axes = plt.subplots(1, len(data), figsize=(6 * len(data), 1.2 + 0.3 * max(
        len(v) for v in data.values())), squeeze=False)
    for ax, (what, series) in zip(axes[0], data.items()):
        percentiles = sorted({p for v in series.values() for p in v})
        labels = list(series)
        height = 0.8 / len(percentiles)
        for j, p in enumerate(percentiles):
            ys = [len(labels) - 1 - i - (j - (len(percentiles) - 1) / 2) * height
                  for i, label in enumerate(labels) if p in series[label]]
            xs = [series[label][p] for label in labels if p in series[label]]
            ax.barh(ys, xs, height=height, color=colour(j), label=f"P{p}")
        ax.set_yticks(range(len(labels))[::-1], labels, fontsize=7)
        values = [v for s in series.values() for v in s.values()]
        if min(values) > 0 and max(values) > 20 * min(values):
            ax.set_xscale("log")
        ax.set_xlabel(f"{what.upper()} (ms)")
        ax.grid(axis="x", linewidth=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Serving latency percentiles, current figures: {device}", fontsize=9)
    return fig


PLOTTERS = {"floor": plot_floor, "floor-kernels": plot_floor_kernels,
            "decode-batch": plot_decode_batch, "serving": plot_serving}
OUR_PREFIXES = tuple(f"{kind}-" for kind in PLOTTERS)


def import_pyplot():
    sys.path.insert(0, os.path.join(REPO, ".deps", "plot"))
    try:
        import matplotlib
    except ImportError:
        sys.exit("plot_results: no matplotlib: run scripts/install-matplotlib.sh "
                 "(or pass --table-only)")
    matplotlib.use("Agg")
    matplotlib.rcParams.update({"font.family": "DejaVu Sans", "font.size": 8,
                                "savefig.dpi": DPI, "path.simplify": False})
    import matplotlib.pyplot as plt
    return plt


def save_png(fig, path):
    """A 128-colour palette PNG (a quarter of the RGBA one's bytes) with no text chunks: no
    Software key or time, so the bytes depend on the data alone."""
    from PIL import Image  # matplotlib's own dependency
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    image = Image.open(buffer).convert("RGB")
    image.quantize(colors=PNG_COLOURS, method=Image.Quantize.MEDIANCUT).save(
        path, format="PNG", optimize=True)


def draw_figures(current, figures, out_dir):
    plt = import_pyplot()
    for name, device, kind in figures:
        path = os.path.join(out_dir, name)
        fig = PLOTTERS[kind](plt, current, device)
        fig.tight_layout()
        save_png(fig, path)
        plt.close(fig)
        print(f"plot_results: wrote {path} ({os.path.getsize(path) // 1024} KiB)")


def remove_stale(out_dir, figures):
    keep = {name for name, _, _ in figures}
    for name in sorted(os.listdir(out_dir)):
        if name.endswith(".png") and name.startswith(OUR_PREFIXES) and name not in keep:
            os.remove(os.path.join(out_dir, name))
            print(f"plot_results: removed {name} (nothing to draw now)")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=os.path.join(HERE, "results", "results.jsonl"))
    parser.add_argument("--out-dir", default=None,
                        help="where the page and PNGs go (default: the results file's folder)")
    parser.add_argument("--table-only", action="store_true",
                        help="write the page only (no matplotlib needed)")
    args = parser.parse_args(argv)
    out_dir = args.out_dir or os.path.dirname(os.path.abspath(args.results))
    try:
        current = rp.current_figures(rp.load_records(args.results))
    except (OSError, ValueError) as e:
        sys.exit(f"plot_results: {e}")
    figures = rp.figure_plan(current)
    if not args.table_only:
        remove_stale(out_dir, figures)
        draw_figures(current, figures, out_dir)
    page = rp.render_page(current, figures, rp.family_pages(out_dir))
    page_path = os.path.join(out_dir, "README.md")
    with open(page_path, "w", encoding="utf-8") as f:
        f.write(page)
    print(f"plot_results: wrote {page_path} ({len(current)} current metrics)")


if __name__ == "__main__":
    main(sys.argv[1:])
