#!/usr/bin/env python3
"""The record cache's clock (§4.2.2: admit at 4, a hit adds 1 up to 7, the hand takes 1 and
evicts at 0) under the bench's zipfian, to tell the cache's hit rate from the workload's.

The bench's zipfian is YCSB's scrambled one (crates/ycsb/src/dist.rs): a zipfian (theta 0.99)
over 10^10 items, FNV-hashed onto the records. The cache starts full of random records (what a
load leaves), at random priorities 0-4. Prints the hit rate of successive phases and what a
cache that never evicts would get (a key's first access misses, every later one hits).

usage: clock_sim.py [CAPACITY] [RECORDS] [PHASES] [OPS]   (defaults: 1660000 10000000 4 500000)
Pure Python, about 10 s a phase of 500,000 operations.
"""
import random
import sys

cap = int(sys.argv[1]) if len(sys.argv) > 1 else 1_660_000
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000
phases = int(sys.argv[3]) if len(sys.argv) > 3 else 4
ops = int(sys.argv[4]) if len(sys.argv) > 4 else 500_000
THETA, ITEMS = 0.99, 10_000_000_000
ADMIT, PMAX = 4, 7

# zeta(ITEMS, THETA) by Euler-Maclaurin (the bench sums it; the two agree to 1e-6).
zetan = (ITEMS ** (1 - THETA) - 1) / (1 - THETA) + 0.5772156649 + 0.5 * ITEMS ** -THETA
zeta2 = 1 + 0.5 ** THETA
alpha = 1 / (1 - THETA)
eta = (1 - (2 / ITEMS) ** (1 - THETA)) / (1 - zeta2 / zetan)


def fnv64(v):
    h = 0xCBF29CE484222325
    for _ in range(8):
        h ^= v & 0xFF
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        v >>= 8
    return h


def sample(rng):
    u = rng.random()
    uz = u * zetan
    if uz < 1:
        r = 0
    elif uz < 1 + 0.5 ** THETA:
        r = 1
    else:
        r = int(ITEMS * (eta * u - eta + 1) ** alpha)
    return fnv64(r) % n


rng = random.Random(1)
keys = rng.sample(range(n), cap)
prio = [rng.randint(0, 4) for _ in range(cap)]
slot = {k: i for i, k in enumerate(keys)}
hand = 0
seen = bytearray(n)


def victim():
    global hand
    while True:
        i = hand
        hand = (hand + 1) % cap
        if prio[i] == 0:
            return i
        prio[i] -= 1


for ph in range(phases):
    hits = repeats = 0
    for _ in range(ops):
        k = sample(rng)
        if seen[k]:
            repeats += 1
        else:
            seen[k] = 1
        s = slot.get(k)
        if s is not None:
            hits += 1
            prio[s] = min(PMAX, prio[s] + 1)
        else:
            v = victim()
            del slot[keys[v]]
            keys[v], prio[v], slot[k] = k, ADMIT, v
    print(f"phase {ph}: clock hit rate {hits / ops:.3f}, never-evicting cache {repeats / ops:.3f}",
          flush=True)
