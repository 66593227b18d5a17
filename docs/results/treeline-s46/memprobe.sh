#!/bin/bash
# Samples the bench's memory cgroups' rss (anon) and cache every half second.
# usage: memprobe.sh BIN T NAME
BIN=$1; T=$2; NAME=$3
DATA=/work/tgt/s45-data/mp-$NAME; rm -rf $DATA; mkdir -p $DATA
cd /work/tgt/s46
$BIN bench --dir $DATA --memory-limit 700000000 --keys sparse --threads $T --dist zipfian \
  --engine treeline:cache_bytes=272053589 --workload a --value-size 56 --records 10000000 --ops 500000 \
  --json mp-$NAME.json > mp-$NAME.txt 2>&1 &
PID=$!
MAX=0
while kill -0 $PID 2>/dev/null; do
  for d in $(find /sys/fs/cgroup/memory -maxdepth 3 -name "sylva-bench-$PID-*" -type d 2>/dev/null); do
    R=$(awk '$1=="rss"{print $2}' $d/memory.stat 2>/dev/null)
    [ -n "$R" ] && [ "$R" -gt "$MAX" ] && MAX=$R && echo "$(date +%T) rss $R" >> mp-$NAME.rss
  done
  sleep 0.5
done
echo "max rss $MAX" >> mp-$NAME.rss
rm -rf $DATA
