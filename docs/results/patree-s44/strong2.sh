#!/bin/bash
# As strong.sh, three alternations, with the binary after the fix of the waits for the shared
# worker's own flush (efc8d95, named s44w in the outputs; built from the tree that commit holds)
# against 6e60d3c (the caller's group commit). Outputs in strong2/.
set -e
OUT=${OUT:-/work/tgt/s44/strong2}
for round in 1 2 3; do
  for bin in 6e60d3c s44w; do
    /work/tgt/sylva-$bin bench --keys sparse --records 300000 --ops 100000 --workload a \
      --dist uniform --threads 8 --inflight 1 \
      --engine patree:cache_bytes=4194304,persist=strong \
      --engine db:cache_bytes=4194304,sync=always \
      --json $OUT/$bin.$round.json > $OUT/$bin.$round.txt 2>&1
  done
done
