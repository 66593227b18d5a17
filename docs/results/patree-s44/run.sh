#!/bin/bash
# YCSB A with 32 in flight on patree (one thread, its session's worker), weak and strong, beside
# db at one thread (sync=batch); 1M sparse keys, 8-byte values, cache_bytes 4 MiB, uniform.
# The binaries before (0ee8580) and after (468fca5: puts and deletes resume after a miss; a task
# finding the write gate closed waits as a held task) alternate, two runs each.
set -e
OUT=${OUT:-/work/tgt/s44/a}
for round in 1 2; do
  for bin in 0ee8580 468fca5; do
    /work/tgt/sylva-$bin bench --keys sparse --records 1000000 --ops 300000 --workload a \
      --dist uniform --threads 1 --inflight 32 \
      --engine patree:cache_bytes=4194304,persist=weak \
      --engine patree:cache_bytes=4194304,persist=strong \
      --engine db:cache_bytes=4194304,sync=batch \
      --json $OUT/$bin.$round.json > $OUT/$bin.$round.txt 2>&1
  done
done
