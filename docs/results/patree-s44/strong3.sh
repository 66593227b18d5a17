#!/bin/bash
# As strong2.sh with the data in memory (cache_bytes 64 MiB), two alternations; then one run
# of each binary with patree at yield=off and at backend=inline (the two engines in one
# process, no db). Outputs in strong3/ (*.y.* the last two).
set -e
OUT=${OUT:-/work/tgt/s44/strong3}
for round in 1 2; do
  for bin in 6e60d3c s44w; do
    /work/tgt/sylva-$bin bench --keys sparse --records 300000 --ops 100000 --workload a \
      --dist uniform --threads 8 --inflight 1 \
      --engine patree:cache_bytes=67108864,persist=strong \
      --engine db:cache_bytes=67108864,sync=always \
      --json $OUT/$bin.$round.json > $OUT/$bin.$round.txt 2>&1
  done
done
for bin in s44w 6e60d3c; do
  /work/tgt/sylva-$bin bench --keys sparse --records 300000 --ops 100000 --workload a \
    --dist uniform --threads 8 --inflight 1 \
    --engine patree:cache_bytes=67108864,persist=strong,yield=off \
    --engine patree:cache_bytes=67108864,persist=strong,backend=inline \
    --json $OUT/$bin.y.json > $OUT/$bin.y.txt 2>&1
done
