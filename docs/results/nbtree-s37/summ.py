# Summarizes run JSONs: python3 summ.py FILE.json...
import json, sys
for f in sys.argv[1:]:
    try: d = json.load(open(f))['runs']
    except Exception as e: print(f, 'unreadable', e); continue
    l = d[0]; c = l.get('counters', {}); ru = d[1] if len(d) > 1 else None
    lat = l['latency_ns']
    s = (f"{f:28} load {l['ops_per_sec_with_finish']/1e3:6.1f}K (no finish {l['ops_per_sec']/1e3:6.1f}K, finish {l['finish_seconds']:.1f}s) "
         f"p50 {lat['p50']/1e3:.1f}us p99.9 {lat['p999']/1e6:.2f}ms p99.99 {lat['p9999']/1e6:.2f}ms max {lat['max']/1e6:.1f}ms "
         f"file {l['file_bytes']/1e6:.0f}MB wr {l['io_write_bytes']/1e9:.1f}GB rd {l['io_read_bytes']/1e9:.1f}GB cpu/op {(l['cpu_user_seconds']+l['cpu_system_seconds'])/l['ops']*1e6:.1f}us peak {l['memory_peak']/1e6:.0f}MB")
    if c: s += f" stalls {c.get('stalls')} inline {c.get('inline_steps')} height {c.get('height')} maxcascade {c.get('max_cascade_bytes',0)/1e6:.0f}MB"
    print(s)
    if ru:
        rl = ru['latency_ns']; rc = ru.get('counters', {})
        s = (f"{'':28} lookups {ru['ops_per_sec']/1e3:.2f}K p50 {rl['p50']/1e3:.1f}us p99.9 {rl['p999']/1e6:.2f}ms max {rl['max']/1e6:.1f}ms "
             f"KB read/op {ru['io_read_bytes']/ru['ops']/1e3:.2f} cpu/op {(ru['cpu_user_seconds']+ru['cpu_system_seconds'])/ru['ops']*1e6:.1f}us checksum {ru['checksum']}")
        if rc.get('lookups'): s += f" leaf visits/lookup {rc.get('leaf_reads',0)/rc['lookups']:.3f} misses/lookup {rc.get('leaf_misses',0)/rc['lookups']:.3f}"
        print(s)
