#!/bin/bash
# E (scans <= 100) and y (range maps <= 10,000) with 32 in flight on patree (one thread, its
# session's worker) beside db at one thread; the shape of ../e/run.sh (1M sparse keys, 8-byte
# values, cache_bytes 4 MiB, uniform). Binary 21a10fe.
set -e
for W in "e 100000" "y 1000"; do
  set -- $W
  /work/tgt/sylva-peers-21a10fe bench --keys sparse --records 1000000 --ops $2 --workload $1 \
    --dist uniform --threads 1 --inflight 32 \
    --engine patree:cache_bytes=4194304 --engine db:cache_bytes=4194304 \
    --json /work/tgt/s43/p/$1.json > /work/tgt/s43/p/$1.txt 2>&1
done
