#!/bin/bash
# usage: probe2.sh BIN ENGINE NAME [W] [OPS]: as probe1k.sh, logging the cgroup's usage, kmem, rss, cache every 0.2 s
BIN=$1; ENG=$2; NAME=$3; W=${4:-c,a}; OPS=${5:-50000}
R=1000000; B=$((R*1024/3)); L=$((B + 64*1048576))
DATA=/work/tgt/s45-data/P-$NAME; rm -rf $DATA; mkdir -p $DATA
cd ${OUT:-/work/tgt/s48}
$BIN bench --dir $DATA --memory-limit $L --keys sparse --threads 1 --dist zipfian \
  --engine $ENG --workload $W --value-size 1016 --records $R --ops $OPS \
  --json Q-$NAME.json > Q-$NAME.txt 2> Q-$NAME.err &
PID=$!
: > Q-$NAME.all
while kill -0 $PID 2>/dev/null; do
  for d in $(find /sys/fs/cgroup/memory -maxdepth 3 -name "sylva-bench-$PID-*" -type d 2>/dev/null); do
    echo "$(date -u +%T.%N | cut -c1-11) use $(cat $d/memory.usage_in_bytes) kmem $(cat $d/memory.kmem.usage_in_bytes 2>/dev/null) $(awk '$1=="rss"||$1=="cache"||$1=="dirty"||$1=="writeback"||$1=="shmem"{printf "%s %s ", $1, $2}' $d/memory.stat)" >> Q-$NAME.all
  done
  sleep 0.2
done
wait $PID; echo "rc $?" >> Q-$NAME.all
rm -rf $DATA
