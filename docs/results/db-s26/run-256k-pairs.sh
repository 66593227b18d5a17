#!/bin/bash
# Session 26, issue 23: 256 KiB values (~2 GiB), one thread, cached. Main at a9841c7 ("base")
# against this session's build ("new"), alternating, one repetition each, `db` beside LMDB and
# redb (the best peers of session 25 on load/A and on C) in every run.
# Usage: run-256k-pairs.sh BASE_BINARY NEW_BINARY DIR
BASE=$1; NEW=$2; D=$3; C=4294967296
i=0; for B in base new new base; do
  i=$((i+1)); if [ $B = base ]; then BIN=$BASE; else BIN=$NEW; fi
  $BIN bench --engine db:cache_bytes=$C --engine lmdb:cache_bytes=$C --engine redb:cache_bytes=$C \
    --keys sparse --value-size 262144 --records 8000 --ops 8000 --workload c,a --repeat 1 \
    --dir $D --json 256k-$B-$i.json > 256k-$B-$i.txt 2>&1
done
