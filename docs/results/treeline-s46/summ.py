import json, glob
# Each phase: ops/s, CPU µs an operation (user + system), the cgroup's peak and anonymous MB.
for f in sorted(glob.glob('ab-*.json')):
    d = json.load(open(f))
    cells = []
    for r in d['runs']:
        w = 'load' if r['phase'] == 'load' else r['workload'].split(' ')[0]
        cpu = (r['cpu_user_seconds'] + r['cpu_system_seconds']) / r['ops'] * 1e6
        peak = (r.get('memory_peak') or 0) / 1e6
        anon = (r.get('memory_anon') or 0) / 1e6
        cells.append(f"{w} {r['ops_per_sec']/1000:.1f}K/{cpu:.1f}us/{peak:.1f}/{anon:.1f}")
    print(f[:-5].ljust(18), ' | '.join(cells))
