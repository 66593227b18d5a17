#!/bin/bash
# fill_floor: a second 10M load of each of forecast=false and fill_floor=10, then 1M loads
# (where the forecast, 10M inserts, is 10x the load) at the default floor and at 10.
BIN=$1; NAME=$2
R=10000000
B=$((R*64/3)); L=$((B + 64*1048576)); C=$((L - 8*1048576))
rm -rf /work/tgt/tl38-data/$NAME; mkdir -p /work/tgt/tl38-data/$NAME
cd /work/tgt/tl38
echo "$(date -u +%H:%M:%S) start $NAME"
fio --name=r --filename=/work/tgt/tl38-data/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}'
$BIN bench --dir /work/tgt/tl38-data/$NAME --memory-limit $L --keys sparse \
  --engine treeline:cache_bytes=$C,fill_floor=10 --engine treeline:cache_bytes=$C,forecast=false \
  --workload c --value-size 56 --records $R --ops 1000 \
  --json $NAME.json > $NAME.txt 2> $NAME.err
echo "rc $?"
R=1000000; B=$((R*64/3)); L=$((B + 64*1048576)); C=$((L - 8*1048576))
$BIN bench --dir /work/tgt/tl38-data/$NAME --memory-limit $L --keys sparse \
  --engine treeline:cache_bytes=$C,forecast=false --engine treeline:cache_bytes=$C \
  --engine treeline:cache_bytes=$C,fill_floor=10 \
  --workload c --value-size 56 --records $R --ops 1000 \
  --json $NAME-1m.json > $NAME-1m.txt 2> $NAME-1m.err
echo "rc $?"
echo "$(date -u +%H:%M:%S) end $NAME"
rm -rf /work/tgt/tl38-data/$NAME
