#!/bin/bash
# Forecasting's fill floor at the full 64 B load (10M records, L - 8 MiB): forecast=false,
# the default (fill_floor=50), fill_floor=25 and 10, one load each, in one bench process.
BIN=$1; NAME=$2
R=10000000
B=$((R*64/3)); L=$((B + 64*1048576)); C=$((L - 8*1048576))
rm -rf /work/tgt/tl38-data/$NAME; mkdir -p /work/tgt/tl38-data/$NAME
cd /work/tgt/tl38
echo "$(date -u +%H:%M:%S) start $NAME"
fio --name=r --filename=/work/tgt/tl38-data/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}'
$BIN bench --dir /work/tgt/tl38-data/$NAME --memory-limit $L --keys sparse \
  --engine treeline:cache_bytes=$C,forecast=false --engine treeline:cache_bytes=$C \
  --engine treeline:cache_bytes=$C,fill_floor=25 --engine treeline:cache_bytes=$C,fill_floor=10 \
  --workload c --value-size 56 --records $R --ops 1000 \
  --json $NAME.json > $NAME.txt 2> $NAME.err
echo "rc $?"
fio --name=r --filename=/work/tgt/tl38-data/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}'
echo "$(date -u +%H:%M:%S) end $NAME"
rm -rf /work/tgt/tl38-data/$NAME
