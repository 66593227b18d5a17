#!/usr/bin/env bash
# Issue 23, session 25: values of 256 KiB under sync=always, written once (the log's sync writes
# the run and fsyncs the page file, then fsyncs the log: two fsyncs a commit) against the same
# binary logging them (one fsync a commit, the value written twice). One thread, cached.
set -u
B=${B:-/work/tgt/sylva-25A}
D=${D:-/work/tgt/me-data/s25/dir-always}
C=1073741824
rm -rf $D; mkdir -p $D
uptime
$B bench --engine db:sync=always,cache_bytes=$C --engine db:sync=always,logged_value_max=1048576,cache_bytes=$C \
  --engine lmdb:sync=always,cache_bytes=$C --engine rocksdb:sync=always,cache_bytes=$C \
  --keys sparse --value-size 262144 --records 1000 --ops 2000 \
  --workload a --repeat 2 --dir $D --json 256k-always.json > 256k-always.out 2>&1
uptime
