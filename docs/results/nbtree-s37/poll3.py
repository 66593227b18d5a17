# Samples each thread's state and syscall of the bench child every 5 ms; aggregates by thread name.
import os, sys, time, collections
pid = None
while pid is None:
    for p in os.listdir('/proc'):
        if p.isdigit():
            try: cmd = open(f'/proc/{p}/cmdline','rb').read().split(b'\0')
            except Exception: continue
            if b'bench' in cmd and any(b'child.json' in c for c in cmd): pid = p
    time.sleep(0.05)
c = collections.Counter(); samples = 0; j = collections.Counter()
t0 = time.time()
while os.path.exists(f'/proc/{pid}') and time.time() - t0 < float(sys.argv[1]):
    try: tids = os.listdir(f'/proc/{pid}/task')
    except Exception: break
    samples += 1; snap = {}
    for t in tids:
        try:
            st = open(f'/proc/{pid}/task/{t}/stat').read()
            name = st[st.index('(')+1:st.rindex(')')]; state = st[st.rindex(')')+2]
            sc = open(f'/proc/{pid}/task/{t}/syscall').read().split()[0]
        except Exception: continue
        if t == pid: continue
        name = 'insert' if not name.startswith('sylva-') else name
        c[(name, state + ' ' + sc)] += 1
        if name in ('insert', 'sylva-checkpoin'): snap[name] = state + sc
    j[(snap.get('insert'), snap.get('sylva-checkpoin'))] += 1
    time.sleep(0.005)
for (n, s), k in sorted(c.items(), key=lambda x: (x[0][0], -x[1])):
    if k / samples > 0.02: print(f'{n:18} {s:12} {100*k/samples:5.1f}% of samples')
for k, n in j.most_common(8): print('insert/merger', k, f'{100*n/samples:.1f}%')
