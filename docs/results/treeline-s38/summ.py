import json, sys, math
d = json.load(open(sys.argv[1]))['runs']
def short(e): return e.split(':')[0]
rows = {}
for x in d:
    wl = x['phase'] if x['phase'] == 'load' else x['workload']
    rows.setdefault(wl, {})[short(x['engine'])] = x
engines = []
for x in d:
    if short(x['engine']) not in engines: engines.append(short(x['engine']))
print('| phase | ' + ' | '.join(f'{e} ops/s (+finish)' for e in engines) + ' | ' + ' | '.join(f'treeline/{e}' for e in engines if e != 'treeline') + ' |')
print('|---' * (1 + 2 * len(engines) - 1) + '|')
geo = {e: [] for e in engines}; geof = {e: [] for e in engines}
for wl, r in rows.items():
    cells = []
    for e in engines:
        x = r.get(e)
        cells.append('—' if x is None else f"{x['ops_per_sec']/1e3:.1f}K ({x['ops_per_sec_with_finish']/1e3:.1f}K)")
    rat = []
    t = r.get('treeline')
    for e in engines:
        if e == 'treeline': continue
        x = r.get(e)
        if x is None or t is None: rat.append('—'); continue
        a = t['ops_per_sec'] / x['ops_per_sec']; b = t['ops_per_sec_with_finish'] / x['ops_per_sec_with_finish']
        rat.append(f'{a:.2f}× ({b:.2f}×)')
        if wl[:1] in ('c', 'b', 'a', 'f', 'd') and wl != 'load': geo[e].append(a); geof[e].append(b)
    print(f'| {wl} | ' + ' | '.join(cells) + ' | ' + ' | '.join(rat) + ' |')
for e in engines:
    if geo[e]:
        g = math.exp(sum(map(math.log, geo[e])) / len(geo[e])); gf = math.exp(sum(map(math.log, geof[e])) / len(geof[e]))
        print(f'geomean C,B,A,F,D treeline/{e}: {g:.2f}× (with finish {gf:.2f}×) over {len(geo[e])} workloads')
print()
print('| phase | ' + ' | '.join(f'{e} MB read / written (finish incl.)' for e in engines) + ' |')
for wl, r in rows.items():
    cells = []
    for e in engines:
        x = r.get(e)
        cells.append('—' if x is None else f"{(x['io_read_bytes'])/1e6:.0f} / {(x['io_write_bytes'])/1e6:.0f} (+{x['finish_io_write_bytes']/1e6:.0f})")
    print(f'| {wl} | ' + ' | '.join(cells) + ' |')
print()
for wl, r in rows.items():
    print(wl, ' '.join(f"{e}: p50 {r[e]['latency_ns']['p50']/1e3:.1f}us max {r[e]['latency_ns']['max']/1e6:.1f}ms peak {r[e]['memory_peak']/1e6:.0f}MB other {r[e]['other_load']:.1f}" for e in engines if e in r and isinstance(r[e].get('latency_ns'), dict)))
