#!/usr/bin/env bash
# Issue 23, session 22: session 21's run5.sh again on a quiet machine (16 KiB values, one thread,
# cache a quarter of the data, every engine held to the same memory by --memory-limit).
set -u
B=${B:-/work/tgt/sylva-s22}
D=${D:-/work/tgt/me-data/s22/q/dir}
rm -rf $D; mkdir -p $D
eng() { local c=$1; echo --engine db:cache_bytes=$c --engine db:run_cache=false,cache_bytes=$c --engine lmdb:cache_bytes=$c --engine rocksdb:cache_bytes=$c --engine fjall:cache_bytes=$c --engine redb:cache_bytes=$c; }
uptime
$B bench $(eng 83886080) --memory-limit 125829120 --keys sparse --value-size 16384 --records 20000 --ops 50000 --workload c,a --repeat 2 --dir $D --json 16k-qm-s22.json > 16k-qm-s22.out 2>&1
uptime
