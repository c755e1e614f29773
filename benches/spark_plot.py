"""Draw docs/perf/spark_scan.svg from the Spark benchmark's timings (docs/perf/spark_scan_<n>M.json).

    python benches/spark_plot.py

A plain SVG written by hand, so it needs no plotting library: one panel per record count,
a group of bars per query, one bar per reader (median seconds over the rounds, local[2]) with
a whisker from the fastest to the slowest round.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

PERF = Path(__file__).resolve().parent.parent / "docs" / "perf"
READERS = (("jvm", "JVM reader", "#1f77b4"), ("python", "Python source", "#ff7f0e"), ("parquet", "parquet", "#2ca02c"))
QUERIES = (("count", "count()"), ("sum_length", "sum(length(value))"), ("full_scan", "full-row scan"))
WIDTH, LEFT, RIGHT, BAR, GAP = 720, 150, 40, 14, 12


def _ticks(top: float) -> list[float]:
    """Round axis ticks from 0 past ``top``."""
    step = 10 ** math.floor(math.log10(top / 4))
    step *= next(m for m in (1, 2, 5, 10) if top / (step * m) <= 6)
    return [i * step for i in range(math.ceil(top / step) + 1)]


def _panel(run: dict, y: float) -> tuple[list[str], float]:
    """SVG elements of one run's panel starting at ``y``, and the y below it."""
    times = run["local2"]
    ticks = _ticks(max(max(times[q][r]) for q, _ in QUERIES for r, _, _ in READERS))
    scale = (WIDTH - LEFT - RIGHT) / ticks[-1]
    out = [f'<text x="10" y="{y + 14}" font-weight="bold">{run["records"] // 1_000_000}M records x 100 B, '
           f'4 partitions, local[2]: median of {run["rounds"]} rounds (whiskers: fastest and slowest)</text>']
    top = y + 26
    height = len(QUERIES) * (len(READERS) * BAR + GAP)
    for t in ticks:
        x = LEFT + t * scale
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + height}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{top + height + 14}" text-anchor="middle" fill="#555">{t:g} s</text>')
    row = top
    for q, label in QUERIES:
        out.append(f'<text x="{LEFT - 8}" y="{row + len(READERS) * BAR / 2 + 4}" text-anchor="end">{label}</text>')
        for r, _, colour in READERS:
            ts = times[q][r]
            med = statistics.median(ts)
            out.append(f'<rect x="{LEFT}" y="{row + 1}" width="{med * scale:.1f}" height="{BAR - 2}" fill="{colour}"/>')
            lo, hi = LEFT + min(ts) * scale, LEFT + max(ts) * scale
            mid = row + BAR / 2
            out.append(f'<line x1="{lo:.1f}" y1="{mid}" x2="{hi:.1f}" y2="{mid}" stroke="#333"/>')
            out.append(f'<text x="{hi + 4:.1f}" y="{mid + 4}" font-size="10" fill="#333">{med:.2f}</text>')
            row += BAR
        row += GAP
    return out, top + height + 30


def main() -> None:
    runs = sorted((json.loads(p.read_text()) for p in PERF.glob("spark_scan_*M.json")), key=lambda r: r["records"])
    body, y = [], 10.0
    for x, (_, name, colour) in enumerate(READERS):
        body.append(f'<rect x="{LEFT + 150 * x}" y="{y}" width="12" height="12" fill="{colour}"/>'
                    f'<text x="{LEFT + 150 * x + 16}" y="{y + 10}">{name}</text>')
    y += 24
    for run in runs:
        panel, y = _panel(run, y)
        body += panel
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{y:.0f}" '
           f'font-family="sans-serif" font-size="12">', f'<rect width="{WIDTH}" height="{y:.0f}" fill="white"/>',
           *body, "</svg>"]
    (PERF / "spark_scan.svg").write_text("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
