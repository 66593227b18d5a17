# An LRU cache of 911K entries under the bench's YCSB scrambled zipfian over 5M records,
# starting full of random records, four phases of 400K draws: the hit rate an LRU cache gets
# (and an unbounded one). Session 35, docs/results/treeline.md.
import random
from collections import OrderedDict
N=5_000_000; C=911_000
items=10_000_000_000; theta=0.99; zetan=26.46902820178302
zeta2=1+0.5**theta
alpha=1/(1-theta)
eta=(1-(2/items)**(1-theta))/(1-zeta2/zetan)
M=(1<<64)-1
def fnv(v):
  h=0xCBF29CE484222325
  for _ in range(8):
    h^=v&0xFF; h=(h*0x100000001B3)&M; v>>=8
  return h
def sample():
  u=random.random(); uz=u*zetan
  if uz<1: i=0
  elif uz<1+0.5**theta: i=1
  else: i=min(int(items*(eta*u-eta+1)**alpha), items-1)
  return fnv(i)%N
random.seed(1)
lru=OrderedDict((k,None) for k in random.sample(range(N),C))
inf=set(lru)
for ph in range(4):
  h=0;hi=0
  for _ in range(400_000):
    k=sample()
    if k in lru: h+=1; lru.move_to_end(k)
    else:
      lru[k]=None; lru.popitem(last=False)
    if k in inf: hi+=1
    else: inf.add(k)
  print(ph, 'lru',h/400_000,'inf',hi/400_000)
