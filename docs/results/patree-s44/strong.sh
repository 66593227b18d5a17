#!/bin/bash
# YCSB A under persist=strong through single calls (--inflight 1: each of 8 benchmark threads
# calls put/get on the PaDb, served by its shared worker thread) beside db:sync=always at 8
# threads; 300K sparse keys, 8-byte values, cache_bytes 4 MiB, uniform. Before (6e60d3c: the
# caller's group commit makes a put durable after the worker applied it) and after (e5cf568:
# the worker's own log flush, through its ring) alternate, two runs each.
set -e
OUT=${OUT:-/work/tgt/s44/strong}
for round in 1 2; do
  for bin in 6e60d3c e5cf568; do
    /work/tgt/sylva-$bin bench --keys sparse --records 300000 --ops 100000 --workload a \
      --dist uniform --threads 8 --inflight 1 \
      --engine patree:cache_bytes=4194304,persist=strong \
      --engine db:cache_bytes=4194304,sync=always \
      --json $OUT/$bin.$round.json > $OUT/$bin.$round.txt 2>&1
  done
done
