#!/usr/bin/env bash
# Issue 23, session 25: values of 256 KiB written once (unlogged, by the log's next sync)
# against the same binary logging them (logged_value_max=1048576, the behaviour before) and the
# peers; ~2 GiB of data (8,000 records), cached (cache_bytes 4 GiB), one thread.
set -u
B=${B:-/work/tgt/sylva-25A}
D=${D:-/work/tgt/me-data/s25/dir}
C=4294967296
rm -rf $D; mkdir -p $D
uptime
$B bench --engine db:cache_bytes=$C --engine db:logged_value_max=1048576,cache_bytes=$C \
  --engine lmdb:cache_bytes=$C --engine rocksdb:cache_bytes=$C --engine fjall:cache_bytes=$C \
  --engine redb:cache_bytes=$C --keys sparse --value-size 262144 --records 8000 --ops 8000 \
  --workload c,a --repeat 2 --dir $D --json 256k.json > 256k.out 2>&1
uptime
