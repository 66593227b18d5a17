#!/usr/bin/env python3
"""Prints ops/s, finish seconds, ops/s with the finish, and bytes written (phase + finish)
for every run in the JSON files named on the command line."""
import json, sys
print("| file | engine | phase | ops/s | finish s | ops/s +finish | MB written (+ finish) | other_load |")
print("|---|---|---|---|---|---|---|---|")
for f in sys.argv[1:]:
    for r in json.load(open(f))["runs"]:
        print(f"| {f} | {r['engine'].split(':')[0]} | {r['phase']}{'' if r['phase']=='load' else ' '+r['workload']} | "
              f"{r['ops_per_sec']/1e3:.1f}K | {r['finish_seconds'] or 0:.2f} | "
              f"{(r['ops_per_sec_with_finish'] or r['ops_per_sec'])/1e3:.1f}K | "
              f"{r['io_write_bytes']/1e6:.0f} (+{(r['finish_io_write_bytes'] or 0)/1e6:.0f}) | {r['other_load']:.2f} |")
