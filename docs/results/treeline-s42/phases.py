"""Per phase of a bench JSON: ops/s, KB read an operation, CPU an operation and, for TreeLine,
the record cache's hit rate in the phase (its counters are cumulative over the process)."""
import json, sys

for f in sys.argv[1:]:
    prev = {}
    for x in json.load(open(f))['runs']:
        e = x['engine'].split(':')[0]
        wl = 'load' if x['phase'] == 'load' else x['workload'][:1]
        c = x['counters']
        h, m = c.get('cache_hits', 0), c.get('cache_misses', 0)
        ph, pm = prev.get(e, (0, 0))
        prev[e] = (h, m)
        hit = ''
        if e == 'treeline' and wl != 'load':
            hit = f" hit {100 * (h - ph) / max(1, (h - ph) + (m - pm)):.1f}% entries {c.get('cache_entries')}"
        n = x['ops']
        print(f"{e:9} {wl:4} {x['ops_per_sec'] / 1e3:7.1f}K  KB read/op {x['io_read_bytes'] / n / 1e3:5.2f}"
              f"  user {x['cpu_user_seconds'] / n * 1e6:5.2f} sys {x['cpu_system_seconds'] / n * 1e6:5.2f} us/op{hit}")
