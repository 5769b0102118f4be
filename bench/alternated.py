#!/usr/bin/env python3
"""Summarises bench/alternate.sh's runs: DIR holds BUILD-ROUND.txt, the output of one
bench/crawl.sh run each. Prints every run's figures in the order they were taken, then each
build's median and range (the least and the most) of every figure."""
import re
import statistics
import sys
from pathlib import Path

# The figures a run prints, as (column, pattern of its line).
FIGURES = [
    ("pages/s", r"^pages per second\s+([\d.]+)"),
    ("CPU ms/page", r"^CPU per page\s+([\d.]+) ms"),
    ("peak MB", r"^peak RSS\s+([\d.]+) MB"),
]


def figures(text: str) -> dict:
    """A run's figures by column; the stages' and the threads' under their own names."""
    found = {}
    for column, pattern in FIGURES:
        m = re.search(pattern, text, re.M)
        if m:
            found[column] = float(m.group(1))
    for section in ("CPU per page by stage (ms)\n", "CPU per page by thread (ms)\n"):
        parts = text.split(section, 1)
        if len(parts) < 2:
            continue
        for line in parts[1].splitlines():
            m = re.match(r"^  (\w+)\s+(-?[\d.]+)", line)
            if not m:
                break
            found[m.group(1)] = float(m.group(2))
    return found


def main() -> None:
    out = Path(sys.argv[1])
    builds = sys.argv[2:]
    runs = []  # (build, round, figures), in the order taken
    rounds = sorted({int(p.stem.rsplit("-", 1)[1]) for p in out.glob("*.txt")})
    for r in rounds:
        for b in builds:
            path = out / f"{b}-{r}.txt"
            if path.exists():
                runs.append((b, r, figures(path.read_text())))
    columns = []
    for _, _, f in runs:
        columns += [c for c in f if c not in columns]
    table = [["run"] + columns]
    for b, r, f in runs:
        table.append([f"{b} {r}"] + [f"{f[c]:.2f}" if c in f else "-" for c in columns])
    for b in builds:
        values = [[f[c] for bb, _, f in runs if bb == b and c in f] for c in columns]
        table.append([f"{b} median"] + [f"{statistics.median(v):.2f}" if v else "-" for v in values])
        table.append([f"{b} range"] + [f"{min(v):.2f}-{max(v):.2f}" if v else "-" for v in values])
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    for line in table:
        cells = [line[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(line[1:], widths[1:])]
        print("  ".join(cells))


if __name__ == "__main__":
    main()
