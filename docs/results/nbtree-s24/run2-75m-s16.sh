#!/bin/bash
# Issue 22 run 2 at 75M records (session 24), main at 46e4f93 with peers; nbtree with
# sigma = 16 MiB (the default cache/8 = 32 MiB was killed at the limit, run2-75m-main-killed.out).
O=cache_bytes=268435456,sync=never
/work/tgt/sylva-24A bench --engine nbtree:$O,sigma=16777216 --engine rocksdb:$O --engine fjall:$O --keys sparse \
  --value-size 128 --workload c --dist uniform --records 75000000 --ops 1000000 \
  --memory-limit 335544320 --dir /work/tgt/nb24-data --json /work/tgt/nb24-out/run2-75m-s16.json
