#!/bin/bash
# Session 26, issue 23: the benchmark at 256 KiB and 16 KiB (~2 GiB each), one thread,
# cached, every peer, this session's build, two repetitions alternating engines.
# Usage: run-peers.sh BINARY DIR
B=$1; D=$2; C=4294967296
E="--engine db:cache_bytes=$C --engine lmdb:cache_bytes=$C --engine rocksdb:cache_bytes=$C --engine fjall:cache_bytes=$C --engine redb:cache_bytes=$C"
$B bench $E --keys sparse --value-size 262144 --records 8000 --ops 8000 --workload c,a --repeat 2 \
  --dir $D --json peers-256k.json > peers-256k.txt 2>&1
$B bench $E --keys sparse --value-size 16384 --records 131072 --ops 131072 --workload c,a --repeat 2 \
  --dir $D --json peers-16k.json > peers-16k.txt 2>&1
