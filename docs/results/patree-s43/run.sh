#!/bin/bash
# E and then y (long range maps) on patree before (9216aff: scans through Db on the caller)
# and after (29a8d9d: scans on the worker), db beside, alternated; 1M sparse keys, 8-byte
# values, pool ~1/8 of the tree, one thread.
set -e
for B in 9216aff 29a8d9d 9216aff 29a8d9d; do
  for W in "e 100000" "y 1000"; do
    set -- $W
    /work/tgt/sylva-peers-$B bench --keys sparse --records 1000000 \
      --ops $2 --workload $1 --dist uniform --threads 1 \
      --engine patree:cache_bytes=4194304 --engine db:cache_bytes=4194304 \
      --json /work/tgt/s43/e/$B.$1.$(date +%H%M%S).json > /work/tgt/s43/e/$B.$1.$(date +%H%M%S).txt 2>&1
  done
done
