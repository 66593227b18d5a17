# Off-CPU time of one thread by where it blocked, from a `perf sched record --call-graph dwarf`
# file turned into text with
#   perf script -i sched.perf --tid TID -F tid,time,event,trace,ip,sym > sws.txt
# usage: python3 offcpu.py sws.txt TID
# A switch-out's off-CPU time is taken up to the thread's next event (close to when it runs
# again); the stack names the wait.
import re, sys, collections
path, T = sys.argv[1], sys.argv[2]
events = []; cur = None
for l in open(path):
    m = re.match(r'\s*(\d+)\s+(\d+\.\d+):\s+(\S+):(.*)', l)
    if m and not l.startswith('\t'):
        cur = [float(m.group(2)), m.group(3), m.group(4), []]; events.append(cur); continue
    if cur is not None and l.strip():
        parts = l.split(None, 1)
        if len(parts) == 2: cur[3].append(parts[1].strip())
kinds = [('WriteBehind', 'waiting for the write-behind'), ('ReadAhead', 'waiting for the read-ahead'),
         ('lll_lock', "glibc's arena lock"), ('ext4_file_read_iter', 'pread'),
         ('ext4_file_write_iter', 'pwrite'), ('fdatasync', 'fdatasync')]
agg = collections.Counter(); cnt = collections.Counter(); total = 0
for i, e in enumerate(events):
    if e[1] == 'sched:sched_switch' and f'prev_pid={T} ' in e[2] and 'prev_state=R' not in e[2]:
        d = ((events[i + 1][0] if i + 1 < len(events) else e[0]) - e[0]) * 1000
        names = ' | '.join(e[3]); key = None
        for pat, name in kinds:
            if pat in names: key = name; break
        if key is None:
            us = [s for s in e[3] if 'sylva::' in s or 'parking_lot' in s or 'std::' in s]
            key = ' < '.join(x[:70] for x in us[:3])
        agg[key] += d; cnt[key] += 1; total += d
print(f'span {(events[-1][0] - events[0][0]) * 1000:.0f} ms, off CPU {total:.0f} ms')
for k, v in agg.most_common(12): print(f'{v:8.1f} ms {cnt[k]:6d}  {k[:200]}')
