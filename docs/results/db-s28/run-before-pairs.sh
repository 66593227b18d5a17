#!/bin/bash
# Session 27 (run again in session 28), issue 23's small-value target against *before* (the engine before the issue's
# work, built by scripts/build-before.sh): 8-byte sparse keys, 56-byte values, 1M records,
# C and A, on tmpfs, alternating before and new three times each.
# Usage: run-before-pairs.sh BEFORE NEW DIR
BEFORE=$1; NEW=$2; D=$3
i=0
for b in before new new before before new; do
  i=$((i+1))
  if [ $b = before ]; then B=$BEFORE; else B=$NEW; fi
  rm -rf $D; mkdir -p $D
  $B bench --engine db --keys sparse --value-size 56 --records 1000000 --workload c,a --dir $D \
    --json small-$b-$i.json > small-$b-$i.txt 2>&1
done
