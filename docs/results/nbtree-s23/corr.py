import sys,bisect
marks=[];slow=[]
for line in open(sys.argv[1]):
    p=line.split()
    if not p: continue
    if p[0]=='M': marks.append((int(p[1]),p[2]))
    elif p[0]=='S':
        d=dict(x.split('=') for x in p[2:]); slow.append((int(p[1]),int(d['total'])))
ts=[m[0] for m in marks]
slow.sort(key=lambda s:-s[1])
for t0,tot in slow[:int(sys.argv[2])]:
    i=bisect.bisect_right(ts,t0)
    before=marks[i-1] if i>0 else None
    during=[]
    j=i
    while j<len(marks) and marks[j][0]<=t0+tot:
        during.append(f"{marks[j][1]}@+{(marks[j][0]-t0)//1000}ms"); j+=1
    print(f"{tot/1000:.1f}ms at {t0/1e6:.2f}s; before: {before[1]}(-{(t0-before[0])//1000}ms) during: {' '.join(during[:12])}{' ...' if len(during)>12 else ''}")
