"""Session 39: one line a bench JSON (ops/s of each phase) and the reread counters."""
import json
import sys

for f in sys.argv[1:]:
    d = json.load(open(f))
    out = []
    c = {}
    for r in d['runs']:
        c = r['counters']
        w = 'load' if r['phase'] == 'load' else r['workload'].split()[0]
        out.append(f"{w}:{r['ops_per_sec'] / 1000:.1f}K")
    print(f, ' '.join(out), 'flush_rereads', c.get('flush_rereads'),
          'miss_rereads', c.get('miss_rereads'))
