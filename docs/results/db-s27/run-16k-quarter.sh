#!/bin/bash
# Session 27, issue 23: 16 KiB values (~2 GiB) with `cache_bytes` a quarter of the data
# (512 MiB), one thread, every engine in a memory cgroup of the budget + 64 MiB (the papers
# suite's allowance), `db` also with that limit less 16 MiB as its budget (the suite's rule:
# the peers read through the page cache the allowance leaves them).
# Usage: run-16k-quarter.sh BINARY DIR
B=$1; D=$2; C=536870912; L=603979776; CDB=587202560
$B bench --memory-limit $L --engine db:cache_bytes=$C --engine db:cache_bytes=$CDB \
  --engine lmdb:cache_bytes=$C --engine rocksdb:cache_bytes=$C --engine fjall:cache_bytes=$C \
  --keys sparse --value-size 16384 --records 131072 --ops 131072 --workload c,a --repeat 1 \
  --dir $D --json quarter-16k.json > quarter-16k.txt 2>&1
