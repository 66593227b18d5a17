#!/bin/bash
# Table 5.3 at 1024 B: TreeLine with neither the record cache nor grouping, without grouping, and
# whole; the 1024 B set (1M records), memory as in run1k.sh.
# usage: abl.sh BIN NAME WORKLOAD [EXTRA...]
BIN=$1; NAME=$2; W=$3; shift 3
R=1000000
B=$((R*1024/3)); L=$((B + 64*1048576)); C=$((L - 16*1048576))  # L - 16 MiB: see run1k.sh
rm -rf /work/tgt/tl36-data/$NAME; mkdir -p /work/tgt/tl36-data/$NAME
cd /work/tgt/tl36
echo "$(date -u +%H:%M:%S) start $NAME"
fio --name=r --filename=/work/tgt/tl36-data/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}'
$BIN bench --dir /work/tgt/tl36-data/$NAME --memory-limit $L --keys sparse --dist zipfian \
  --engine treeline:cache_bytes=$C,goal=2,epsilon=1,record_cache=false,grouping=false \
  --engine treeline:cache_bytes=$C,goal=2,epsilon=1,grouping=false \
  --engine treeline:cache_bytes=$C,goal=2,epsilon=1 \
  --workload $W --value-size 1016 --records $R --ops ${OPS:-500000} "$@" \
  --json $NAME.json > $NAME.txt 2> $NAME.err
echo "rc $?"
fio --name=r --filename=/work/tgt/tl36-data/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}'
echo "$(date -u +%H:%M:%S) end $NAME"
rm -rf /work/tgt/tl36-data/$NAME
