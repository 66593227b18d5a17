#!/bin/bash
# Session 24: main (A) against E (records packed, the root's flush reading only its first σ).
O=cache_bytes=268435456,sync=never
cd /work/tgt/nb24-ab
for v in E-1 A-3 E-2; do
  /work/tgt/sylva-24${v%-*} bench --engine nbtree:$O --keys sparse --value-size 128 --workload c \
    --dist uniform --records 10000000 --ops 100000 --memory-limit 335544320 \
    --dir /work/tgt/nb24-data --json ae-$v.json > ae-$v.out 2>&1
done
