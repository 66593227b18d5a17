import json, sys, math
runs = sys.argv[1:]
data = {}
for r in runs:
    d = json.load(open(f'/work/tgt/tl35/{r}.json'))['runs']
    t = {}
    for x in d:
        wl = 'load' if x['phase'] == 'load' else x['workload'][:1]
        t.setdefault(wl, {})[x['engine'].split(':')[0]] = x
    data[r] = t
wls = ['load', 'c', 'b', 'a', 'f', 'd', 'e']
print('| workload | ' + ' | '.join(f'{r}: treeline ops/s; ×rocksdb, ×db, ×lmdb' for r in runs) + ' |')
print('|---' * (len(runs) + 1) + '|')
geo = {r: {} for r in runs}
for wl in wls:
    cells = []
    for r in runs:
        t = data[r].get(wl, {})
        tl = t.get('treeline')
        if not tl: cells.append('—'); continue
        parts = []
        for e in ['rocksdb', 'db', 'lmdb']:
            x = t.get(e)
            if x is None: parts.append('—'); continue
            a = tl['ops_per_sec'] / x['ops_per_sec']
            parts.append(f'{a:.2f}')
            if wl in 'cbafd' and wl != 'load': geo[r].setdefault(e, []).append(a)
        cells.append(f"{tl['ops_per_sec']/1e3:.1f}K; " + ', '.join(parts))
    print(f'| {wl.upper() if wl != "load" else "load"} | ' + ' | '.join(cells) + ' |')
cells = []
for r in runs:
    parts = []
    for e in ['rocksdb', 'db', 'lmdb']:
        v = geo[r].get(e)
        parts.append('—' if not v else f'{math.exp(sum(map(math.log, v))/len(v)):.2f}')
    cells.append('; ' + ', '.join(parts))
print('| geo. mean C, B, A, F, D | ' + ' | '.join(cells) + ' |')
