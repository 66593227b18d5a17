#!/bin/bash
# Session 26, issue 23: the small-value check (8-byte keys, 56-byte values), base against new,
# alternating, database files on the disk.
# Usage: run-small-pairs.sh BASE_BINARY NEW_BINARY DIR
BASE=$1; NEW=$2; D=$3
i=0; for B in base new new base base new; do
  i=$((i+1)); if [ $B = base ]; then BIN=$BASE; else BIN=$NEW; fi
  $BIN bench --engine db --keys sparse --value-size 56 --records 1000000 --workload c,a \
    --dir $D --json small-$B-$i.json > small-$B-$i.txt 2>&1
done
