#!/bin/bash
# Session 27, issue 23: 1 KiB values at the size (2M records, ~2 GiB), base and new
# binaries alternating (base, new, new, base), `db` and fjall in each run, load then A.
# Usage: run-1k-pairs.sh BASE NEW DIR
BASE=$1; NEW=$2; D=$3; C=6442450944
i=0
for b in base new new base; do
  i=$((i+1))
  if [ $b = base ]; then B=$BASE; else B=$NEW; fi
  $B bench --engine db:cache_bytes=$C --engine fjall:cache_bytes=$C --keys sparse --value-size 1024 \
    --records 2000000 --ops 1000000 --workload a --repeat 1 --dir $D --json 1k-$b-$i.json > 1k-$b-$i.txt 2>&1
done
