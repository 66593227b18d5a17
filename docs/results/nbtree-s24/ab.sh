#!/bin/bash
# Session 24 A/B/C: main (A), main + packed records + the job's own bound (B), B paced by W (C).
# Each: issue 22's run-1 command with nbtree alone and 100K lookups; order A B C A B C.
O=cache_bytes=268435456,sync=never
cd /work/tgt/nb24-ab
for rep in 1 2; do
  for v in A B C; do
    /work/tgt/sylva-24$v bench --engine nbtree:$O --keys sparse --value-size 128 --workload c \
      --dist uniform --records 10000000 --ops 100000 --memory-limit 335544320 \
      --dir /work/tgt/nb24-data --json ab-$v-$rep.json > ab-$v-$rep.out 2>&1
  done
done
