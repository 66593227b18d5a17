#!/bin/bash
# Session 28, issue 23: the two columns at the target's edge again, `db` against the best peer
# (LMDB) alone: 256 KiB with one thread (load, C, A; three repetitions), and 1 KiB C with two
# threads (two repetitions).
# Usage: run-lmdb-again.sh BINARY DIR
B=$1; D=$2; C=6442450944
E="--engine db:cache_bytes=$C --engine lmdb:cache_bytes=$C"
$B bench $E --keys sparse --value-size 262144 --records 8000 --ops 8000 \
  --workload c,a --repeat 3 --dir $D --json again-256k.json > again-256k.txt 2>&1
$B bench $E --keys sparse --value-size 1024 --records 2000000 --ops 2000000 \
  --workload c --threads 2 --repeat 2 --dir $D --json again-1k-c2.json > again-1k-c2.txt 2>&1
