#!/bin/bash
# TreeLine alone at target 7's limit L (10M x 64 B, zipfian, c,b,a,f, 500K ops), the bench's
# memory cgroup's anonymous memory (rss) sampled every half second.
# usage: atL.sh BIN T NAME
BIN=$1; T=$2; NAME=$3
R=10000000; B=$((R*64/3)); L=$((B + 64*1048576)); C=$((L - 8*1048576))
DATA=/work/tgt/s45-data/L-$NAME; rm -rf $DATA; mkdir -p $DATA
cd ${OUT:-/work/tgt/s47}
echo "$(date -u +%T) start $NAME" > L-$NAME.rss
fio --name=r --filename=/work/tgt/s45-data/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}' >> L-$NAME.rss
$BIN bench --dir $DATA --memory-limit $L --keys sparse --threads $T --dist zipfian \
  --engine treeline:cache_bytes=$C --workload c,b,a,f --value-size 56 --records $R --ops 500000 \
  --json L-$NAME.json > L-$NAME.txt 2> L-$NAME.err &
PID=$!
MAX=0
while kill -0 $PID 2>/dev/null; do
  for d in $(find /sys/fs/cgroup/memory -maxdepth 3 -name "sylva-bench-$PID-*" -type d 2>/dev/null); do
    RS=$(awk '$1=="rss"{print $2}' $d/memory.stat 2>/dev/null)
    [ -n "$RS" ] && [ "$RS" -gt "$MAX" ] && MAX=$RS && echo "$(date -u +%T) rss $RS" >> L-$NAME.rss
  done
  sleep 0.5
done
wait $PID; echo "rc $?" >> L-$NAME.rss
echo "max rss $MAX (L $L, cache_bytes $C)" >> L-$NAME.rss
fio --name=r --filename=/work/tgt/s45-data/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}' >> L-$NAME.rss
echo "$(date -u +%T) end $NAME" >> L-$NAME.rss
rm -rf $DATA
