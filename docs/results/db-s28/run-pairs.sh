#!/bin/bash
# Session 28, issue 23: one change at a time against the build before it, alternating binaries
# on the same data sizes, one process per run.
#   run-pairs.sh c2 BIN...     1 KiB values, 300K records, C with two threads, tmpfs
#   run-pairs.sh a256 BIN...   256 KiB values, 8,000 records, A with one thread, on DIR's disk
# Usage: run-pairs.sh WHAT DIR BIN...
W=$1; D=$2; shift 2; C=6442450944
for rep in 1 2 3; do
  for b in "$@"; do
    rm -rf $D; mkdir -p $D
    n=$(basename $b)
    case $W in
      c2) $b bench --engine db:cache_bytes=$C --keys sparse --value-size 1024 --records 300000 \
            --ops 3000000 --workload c --threads 2 --repeat 1 --dir $D --json $W-$n-$rep.json > /dev/null 2>&1 ;;
      k1) $b bench --engine db:cache_bytes=$C --keys sparse --value-size 1024 --records 500000 \
            --ops 500000 --workload a --repeat 1 --dir $D --json $W-$n-$rep.json > /dev/null 2>&1 ;;
      a256) $b bench --engine db:cache_bytes=$C --keys sparse --value-size 262144 --records 8000 \
            --ops 8000 --workload a --repeat 1 --dir $D --json $W-$n-$rep.json > /dev/null 2>&1 ;;
    esac
  done
done
rm -rf $D
# (session 28, later) `k1`: 1 KiB values, 500K records, load and A with one thread, on DIR's disk:
# the write-backs' threads at the size they were added for.
