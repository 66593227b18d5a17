#!/bin/bash
# Session 28, issue 23: 256 KiB with one thread again after the write-behind's serial writes
# (837ca8a in last/, the final rule in last2/): every peer, two repetitions; then `db` and LMDB
# alone, three.
# Usage: run-256k-last.sh BINARY DIR
B=$1; D=$2; C=6442450944
E="--engine db:cache_bytes=$C --engine lmdb:cache_bytes=$C --engine rocksdb:cache_bytes=$C --engine fjall:cache_bytes=$C"
$B bench $E --engine redb:cache_bytes=$C --keys sparse --value-size 262144 --records 8000 --ops 8000 \
  --workload c,a --repeat 2 --dir $D --json last-256k.json > last-256k.txt 2>&1
$B bench --engine db:cache_bytes=$C --engine lmdb:cache_bytes=$C --keys sparse --value-size 262144 \
  --records 8000 --ops 8000 --workload c,a --repeat 3 --dir $D --json last-256k-lmdb.json > last-256k-lmdb.txt 2>&1
