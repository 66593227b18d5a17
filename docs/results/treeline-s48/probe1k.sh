#!/bin/bash
# One engine alone at the 1024 B set's limit L (1M x 1 KiB, zipfian), the bench's memory cgroup's
# anonymous memory (rss) sampled every half second.
# usage: probe1k.sh BIN ENGINE NAME [W] [OPS]
BIN=$1; ENG=$2; NAME=$3; W=${4:-c,a}; OPS=${5:-50000}
R=1000000; B=$((R*1024/3)); L=$((B + 64*1048576))
DATA=/work/tgt/s45-data/P-$NAME; rm -rf $DATA; mkdir -p $DATA
cd ${OUT:-/work/tgt/s48}
echo "$(date -u +%T) start $NAME $ENG" > P-$NAME.rss
$BIN bench --dir $DATA --memory-limit $L --keys sparse --threads 1 --dist zipfian \
  --engine $ENG --workload $W --value-size 1016 --records $R --ops $OPS \
  --json P-$NAME.json > P-$NAME.txt 2> P-$NAME.err &
PID=$!
MAX=0
while kill -0 $PID 2>/dev/null; do
  for d in $(find /sys/fs/cgroup/memory -maxdepth 3 -name "sylva-bench-$PID-*" -type d 2>/dev/null); do
    RS=$(awk '$1=="rss"{print $2}' $d/memory.stat 2>/dev/null); awk '$1=="rss"||$1=="cache"||$1=="dirty"||$1=="writeback"||$1=="mapped_file"{printf "%s %s ", $1, $2} END{print ""}' $d/memory.stat > P-$NAME.last
    [ -n "$RS" ] && [ "$RS" -gt "$MAX" ] && MAX=$RS && echo "$(date -u +%T) rss $RS" >> P-$NAME.rss
  done
  [ -f P-$NAME.last ] && cat P-$NAME.last >> P-$NAME.all
  sleep 0.5
done
wait $PID; echo "rc $?" >> P-$NAME.rss
echo "max rss $MAX (L $L)" >> P-$NAME.rss
echo "$(date -u +%T) end $NAME" >> P-$NAME.rss
rm -rf $DATA
