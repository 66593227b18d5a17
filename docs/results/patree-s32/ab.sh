#!/bin/bash
# Session 32's A/B of the worker's submission batching on YCSB C, the pool an eighth of the
# tree (9.5 MB for 300K records): BEFORE and AFTER are two `sylva` binaries, alternated three
# times with `probe=every` and `probe=avg`; JSON to OUT (default ./ab), summed up by absum.py.
# Usage: BEFORE=path AFTER=path [DATA=dir] [OUT=dir] docs/results/patree-s32/ab.sh
set -u
DATA=${DATA:-./abdata}; OUT=${OUT:-./ab}; mkdir -p "$OUT"
for rep in 1 2 3; do for bin in before after; do for probe in every avg; do
  B=$BEFORE; [ $bin = after ] && B=$AFTER
  rm -rf "$DATA"; mkdir -p "$DATA"
  "$B" bench --engine patree:cache_bytes=1187328,probe=$probe --threads 1 --inflight 64 --keys sparse \
    --value-size 8 --records 300000 --ops 600000 --workload c --dir "$DATA" \
    --json "$OUT/$bin-$probe-$rep.json" > /dev/null 2>&1
done; done; done
rm -rf "$DATA"
