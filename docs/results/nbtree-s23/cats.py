import bisect,sys
marks=[];slow=[]
for line in open(sys.argv[1]):
    p=line.split()
    if not p: continue
    if p[0]=='M': marks.append((int(p[1]),p[2]))
    elif p[0]=='S':
        d=dict(x.split('=') for x in p[2:]); slow.append((int(p[1]),int(d['total'])))
ts=[m[0] for m in marks]
cats={}
for t0,tot in slow:
    if tot<20000: continue
    i=bisect.bisect_right(ts,t0)
    during=[]
    j=i
    while j<len(marks) and marks[j][0]<=t0+tot:
        during.append(marks[j][1]); j+=1
    before=marks[i-1][1] if i>0 else ''
    if ('pf:synced1' in during) : c='page file fsync (commit point)'
    elif 'ci:end' in during and ('ci:begin' in during or before=='ci:begin'): c='commit point fsyncs'
    elif 'dist:dropped' in during or 'c:droppedrest' in during: c='freeing moved records'
    elif 'ck:gate' in during or before=='ck:presync': c='log fsync before rotation'
    elif 'c:mergedmem-done' in during: c='merging frozen roots in memory'
    else: c='other:'+before+'/'+','.join(during[:3])
    cats.setdefault(c,[]).append(tot)
for c,v in sorted(cats.items(), key=lambda x:-max(x[1])):
    print(f"  {c}: {len(v)} inserts, longest {max(v)/1000:.1f} ms")
print('  total >20ms', sum(len(v) for v in cats.values()))
