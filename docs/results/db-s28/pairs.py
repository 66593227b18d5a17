#!/usr/bin/env python3
"""Ratios new/before per phase from run-before-pairs.sh outputs (pairs in run order)."""
import json, sys, glob, statistics
d = sys.argv[1] if len(sys.argv) > 1 else '.'
runs = {}
for f in glob.glob(f'{d}/small-*.json'):
    tag, i = f.rsplit('/', 1)[1][:-5].split('-')[1:]
    for r in json.load(open(f))['runs']:
        key = 'load' if r['phase'] == 'load' else r['workload'][0].upper()
        if key:
            runs[(int(i), key)] = (tag, r['ops_per_sec'], r.get('cpu_worker_seconds', 0) / r['ops'] * 1e9, r['other_load'])
pairs = [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12)]
for ph in ['load', 'C', 'A']:
    rs = []
    for a, b in pairs:
        if (a, ph) not in runs: continue
        x, y = runs[(a, ph)], runs[(b, ph)]
        new, old = (x, y) if x[0] == 'new' else (y, x)
        rs.append(new[1] / old[1])
        print(ph, a, b, f'new {new[1]:.0f} before {old[1]:.0f} ratio {new[1]/old[1]:.2f} cpu ns/op {old[2]:.0f}->{new[2]:.0f} other {old[3]:.1f}/{new[3]:.1f}')
    print(ph, 'median', round(statistics.median(rs), 2), [round(r, 2) for r in rs])
