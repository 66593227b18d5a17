#!/bin/bash
# Session 27, issue 23: 1 KiB values (2M records, ~2 GiB), C, cached, two threads and one:
# the run cache's mutex (BASE) against its reader-writer lock (NEW), alternating, LMDB beside
# `db` in each run.
# Usage: run-1k-c-pairs.sh BASE NEW DIR
BASE=$1; NEW=$2; D=$3; C=6442450944
i=0
for b in base new new base; do
  i=$((i+1))
  if [ $b = base ]; then B=$BASE; else B=$NEW; fi
  $B bench --engine db:cache_bytes=$C --engine lmdb:cache_bytes=$C --keys sparse --value-size 1024 \
    --records 2000000 --ops 2000000 --workload c --threads 2 --repeat 1 --dir $D \
    --json 1k-c2-$b-$i.json > 1k-c2-$b-$i.txt 2>&1
  $B bench --engine db:cache_bytes=$C --keys sparse --value-size 16384 \
    --records 131072 --ops 262144 --workload c --threads 1 --repeat 1 --dir $D \
    --json 16k-c1-$b-$i.json > 16k-c1-$b-$i.txt 2>&1
done
