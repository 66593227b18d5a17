#!/bin/bash
# Session 27, issue 23: the benchmark with two threads, cached (~2 GiB of values at
# 1 KiB, 16 KiB and 256 KiB), one repetition each, every peer the targets name (redb too at
# 256 KiB, where the target is the best peer).
# Usage: run-two-threads.sh BINARY DIR
B=$1; D=$2; C=6442450944
E="--engine db:cache_bytes=$C --engine lmdb:cache_bytes=$C --engine rocksdb:cache_bytes=$C --engine fjall:cache_bytes=$C"
$B bench $E --engine redb:cache_bytes=$C --keys sparse --value-size 262144 --records 8000 --ops 16000 \
  --workload c,a --threads 2 --repeat 1 --dir $D --json two-256k.json > two-256k.txt 2>&1
$B bench $E --keys sparse --value-size 16384 --records 131072 --ops 262144 \
  --workload c,a --threads 2 --repeat 1 --dir $D --json two-16k.json > two-16k.txt 2>&1
$B bench $E --keys sparse --value-size 1024 --records 2000000 --ops 1000000 \
  --workload c,a --threads 2 --repeat 1 --dir $D --json two-1k.json > two-1k.txt 2>&1
