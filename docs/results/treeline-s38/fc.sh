#!/bin/bash
# Forecasting (issue 21 target 6): the 64 B load at the full size (10M records), TreeLine
# with forecast=false and with its default, alternating (--repeat 2); a short C so the bench has
# a run phase. Memory as the 64 B set: B = 213,333,333, L = B + 64 MiB, L - 8 MiB.
BIN=$1; NAME=$2
R=10000000
B=$((R*64/3)); L=$((B + 64*1048576)); C=$((L - 8*1048576))
rm -rf /work/tgt/tl38-data/$NAME; mkdir -p /work/tgt/tl38-data/$NAME
cd /work/tgt/tl38
echo "$(date -u +%H:%M:%S) start $NAME"
fio --name=r --filename=/work/tgt/tl38-data/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}'
$BIN bench --dir /work/tgt/tl38-data/$NAME --memory-limit $L --keys sparse \
  --engine treeline:cache_bytes=$C,forecast=false --engine treeline:cache_bytes=$C \
  --workload c --value-size 56 --records $R --ops 1000 --repeat 2 \
  --json $NAME.json > $NAME.txt 2> $NAME.err
echo "rc $?"
echo "$(date -u +%H:%M:%S) end $NAME"
rm -rf /work/tgt/tl38-data/$NAME
