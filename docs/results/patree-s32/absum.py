import json, glob, os, sys, statistics as st
rows={}
for f in sorted(glob.glob(sys.argv[1] + '/*.json' if len(sys.argv) > 1 else 'docs/results/patree-s32/ab/*.json')):
    bin_,probe,rep=os.path.basename(f)[:-5].split('-')
    d=json.load(open(f)); runs=d['runs'] if 'runs' in d else d
    load=[r for r in runs if r['phase']=='load'][0]; run=[r for r in runs if r['phase']=='run'][0]
    c=run['counters']; c0=load['counters']
    ops=run['ops']; cpu=run['cpu_user_seconds']+run['cpu_system_seconds']
    enters=(c['worker_enters']-c0['worker_enters'])/ops
    reads=(c['worker_reads']-c0['worker_reads'])/ops
    out=None
    if 'worker_read_ns' in c: out=(c['worker_read_ns']-c0['worker_read_ns'])/(run['seconds']*1e9)
    rows.setdefault((bin_,probe),[]).append((run['ops_per_sec'],cpu/ops*1e6,enters,reads,out))
    print(f"{bin_:6} {probe:6} {rep} ops/s {run['ops_per_sec']:8.0f} cpu/op {cpu/ops*1e6:5.2f} enters/op {enters:.3f} reads/op {reads:.3f} outstanding {out}")
for k,v in rows.items():
    print(k, 'median ops/s %.0f cpu/op %.2f enters/op %.3f'%(st.median(x[0] for x in v), st.median(x[1] for x in v), st.median(x[2] for x in v)))
