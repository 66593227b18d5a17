import json, sys
d = json.load(open(sys.argv[1]))['runs']
for x in d:
    if x['phase'] != 'load': continue
    c = x['counters']
    print(x['engine'][26:] or 'default', 'rep', x['repeat'], 'ops/s', round(x['ops_per_sec']), '+fin', round(x['ops_per_sec_with_finish']),
          'reorgs', c.get('reorganizations'), 'file MB', round(x['file_bytes']/1e6), 'W MB', round(x['io_write_bytes']/1e6), 'R MB', round(x['io_read_bytes']/1e6),
          'max ms', round(x['latency_ns']['max']/1e6) if isinstance(x['latency_ns'], dict) and 'max' in x['latency_ns'] else '', 'anon', x.get('memory_anon'))
