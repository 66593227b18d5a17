#!/usr/bin/env python3
"""Medians and after/before ratios of scripts/stack-bench.sh's runs (a Markdown table)."""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

runs = defaultdict(list)  # (which, pool, threads, phase) -> [(ops/s, CPU µs per op, ops/s with finish)]
for path in sorted(Path(sys.argv[1]).glob("*.json")):
    which, pool, threads, _rep = path.stem.split("-")
    for r in json.loads(path.read_text())["runs"]:
        # A run phase of `--workload c,a,e` is labelled "c (1/3 of c,a,e)".
        phase = "load" if r["phase"] == "load" else r["workload"].split(" ")[0].upper()
        cpu = (r["cpu_user_seconds"] or 0) + (r["cpu_system_seconds"] or 0)
        with_finish = r.get("ops_per_sec_with_finish") or r["ops_per_sec"]
        runs[(which, pool, threads, phase)].append((r["ops_per_sec"], cpu / r["ops"] * 1e6, with_finish))

print("| pool | threads | phase | before ops/s | after ops/s | after/before | before CPU µs/op | after CPU µs/op | ratio | after/before with finish |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (which, pool, threads, phase), before in sorted(runs.items()):
    if which != "old":
        continue
    after = runs.get(("new", pool, threads, phase), [])
    if not after:
        continue
    b, a = (statistics.median(x[0] for x in v) for v in (before, after))
    bc, ac = (statistics.median(x[1] for x in v) for v in (before, after))
    bf, af = (statistics.median(x[2] for x in v) for v in (before, after))
    print(f"| {pool} | {threads[1:]} | {phase} | {b/1e3:.1f}K | {a/1e3:.1f}K | {a/b:.2f} "
          f"| {bc:.2f} | {ac:.2f} | {ac/bc:.2f} | {af/bf:.2f} |")
