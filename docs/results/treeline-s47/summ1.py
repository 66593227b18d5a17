#!/usr/bin/env python3
"""Each phase's ops/s (with its finishing checkpoint), CPU µs an operation and the cgroup's
peak and anonymous MB, for the one-thread A/B."""
import json, sys
for n in sys.argv[1:]:
    rs = json.load(open(n))['runs']
    cells = []
    for r in rs:
        cpu = (r['cpu_user_seconds'] + r['cpu_system_seconds']) / r['ops'] * 1e6
        cells.append(f"{r['phase'][0]}{r['workload'][0] if r['phase']=='run' else ''} "
                     f"{r['ops_per_sec']/1e3:.1f}K ({r['ops_per_sec_with_finish']/1e3:.1f}K) {cpu:.1f}µs")
    peak = max(r['memory_peak'] for r in rs) / 1e6
    anon = max(r['memory_anon'] for r in rs) / 1e6
    print(f"{n:18}", " | ".join(cells), f"| peak {peak:.1f} anon {anon:.1f} MB")
