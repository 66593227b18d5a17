import json, sys
for f in sys.argv[1:]:
    for x in json.load(open(f))['runs']:
        if x['phase'] == 'load': continue
        n = x['ops']
        print(f"{f} {x['engine'][:40]} {x['workload']} {x['ops_per_sec']/1e3:.1f}K/s user {x['cpu_user_seconds']/n*1e6:.2f}us sys {x['cpu_system_seconds']/n*1e6:.2f}us read {x['io_read_bytes']/1e6:.0f}MB hits {x['counters'].get('cache_hits')} miss {x['counters'].get('cache_misses')}")
