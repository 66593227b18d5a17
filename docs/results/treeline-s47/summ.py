#!/usr/bin/env python3
"""Summarizes the A/B's load phases: ops/s (with the finishing checkpoint), CPU an insert,
the cgroup's peak and anonymous memory, page writes, reorganizations, dirty evictions."""
import json, sys
for n in sys.argv[1:]:
    r = json.load(open(n))['runs'][0]
    c = r['counters']
    print(f"{n:18} {r['ops_per_sec']/1e3:5.1f}K ({r['ops_per_sec_with_finish']/1e3:5.1f}K) "
          f"user {r['cpu_user_seconds']/r['ops']*1e6:5.2f} sys {r['cpu_system_seconds']/r['ops']*1e6:5.2f} µs "
          f"peak {r['memory_peak']/1e6:6.1f} anon {r['memory_anon']/1e6:6.1f} MB "
          f"writes {c['page_writes']} reorgs {c['reorganizations']} ckpts {c['checkpoints']} "
          f"dirty-evictions {c.get('dbg11', '-')}")
