#!/bin/bash
# Session 28, issue 23: the benchmark, cached, with the session's last build: 256 KiB
# with one thread (two repetitions, every peer), then 1 KiB with two threads (C and A, one
# repetition, every peer but redb).
# Usage: run-final.sh BINARY DIR
B=$1; D=$2; C=6442450944
E="--engine db:cache_bytes=$C --engine lmdb:cache_bytes=$C --engine rocksdb:cache_bytes=$C --engine fjall:cache_bytes=$C"
$B bench $E --engine redb:cache_bytes=$C --keys sparse --value-size 262144 --records 8000 --ops 8000 \
  --workload c,a --repeat 2 --dir $D --json final-256k.json > final-256k.txt 2>&1
$B bench $E --keys sparse --value-size 1024 --records 2000000 --ops 1000000 \
  --workload c,a --threads 2 --repeat 1 --dir $D --json two-1k.json > two-1k.txt 2>&1
