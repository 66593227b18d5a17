#!/bin/bash
# Short scans before and after bf48907: YCSB E (zipfian) on 2M records of 64 B, a third in the
# record cache, TreeLine alone, the two binaries alternating.
cd /work/tgt/tl35
for rep in 1 2; do
  for b in 2e6e294 scan; do
    rm -rf /work/tgt/tl35-data/e; mkdir -p /work/tgt/tl35-data/e
    /work/tgt/sylva-$b bench --dir /work/tgt/tl35-data/e --keys sparse --dist zipfian \
      --engine treeline:cache_bytes=42666666 --workload e --value-size 56 --records 2000000 \
      --ops 200000 --json e-$b-$rep.json > e-$b-$rep.txt 2> e-$b-$rep.err
    echo "$(date -u +%H:%M:%S) $b $rep rc $?"
  done
done
rm -rf /work/tgt/tl35-data/e
