#!/usr/bin/env bash
# Issue 23, session 21: the run cache against the peers, values of 1 KiB and 16 KiB, cached.
set -u
B=/work/tgt/me-data/sylva-rc2
D=/work/tgt/me-data/rc/dir
rm -rf $D; mkdir -p $D
eng() { local c=$1; echo --engine db:cache_bytes=$c --engine db:run_cache=false,cache_bytes=$c --engine lmdb:cache_bytes=$c --engine rocksdb:cache_bytes=$c --engine fjall:cache_bytes=$c --engine redb:cache_bytes=$c; }
uptime
$B bench $(eng 536870912) --keys sparse --value-size 1024 --records 200000 --ops 200000 --workload c,a --repeat 2 --dir $D --json 1k-2.json > 1k-2.out 2>&1
uptime
$B bench $(eng 1073741824) --keys sparse --value-size 16384 --records 20000 --ops 50000 --workload c,a --repeat 2 --dir $D --json 16k-2.json > 16k-2.out 2>&1
uptime
$B bench $(eng 1073741824) --keys sparse --value-size 262144 --records 2000 --ops 4000 --workload c,a --repeat 2 --dir $D --json 256k-2.json > 256k-2.out 2>&1
uptime
