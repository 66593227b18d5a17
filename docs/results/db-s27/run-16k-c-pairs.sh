#!/bin/bash
# Session 27, issue 23: 16 KiB values (~2 GiB), two threads, C, cached: the run cache's mutex
# (BASE) against its reader-writer lock (NEW), alternating, LMDB beside `db` in each run.
# Usage: run-16k-c-pairs.sh BASE NEW DIR
BASE=$1; NEW=$2; D=$3; C=6442450944
i=0
for b in base new new base; do
  i=$((i+1))
  if [ $b = base ]; then B=$BASE; else B=$NEW; fi
  $B bench --engine db:cache_bytes=$C --engine lmdb:cache_bytes=$C --keys sparse --value-size 16384 \
    --records 131072 --ops 524288 --workload c --threads 2 --repeat 1 --dir $D \
    --json 16k-c-$b-$i.json > 16k-c-$b-$i.txt 2>&1
done
