#!/bin/bash
# Session 45, after seq.sh: issue 22's run 1 with `db` at 3M records (its own run, as the issue
# allows when db's 10M load would pass 30 minutes), nbtree beside it, two repetitions
# alternated; then target 5's A with checkpoints every 8 GiB of log instead of 64 MiB (none in
# the phases), against the same write-through configuration.
HERE=$(cd "$(dirname "$0")" && pwd)
export DATA=${DATA:-/work/tgt/s45-data} OUT=${OUT:-/work/tgt/s45}
B=${B:-/work/tgt/sylva-1ecc5a3}
fioprobe() {
  fio --name=r --filename=$DATA/fio.dat --size=1G --rw=randread --bs=4k --direct=1 \
    --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null \
    | awk -F';' '{print "fio QD32 read IOPS", $8}'
}
cd $OUT
echo "$(date -u +%H:%M:%S) start nb3m"; fioprobe
rm -rf $DATA/nb3m; mkdir -p $DATA/nb3m
O=cache_bytes=268435456,sync=never
$B bench --engine nbtree:$O --engine db:$O --keys sparse --value-size 128 --workload c \
  --dist uniform --records 3000000 --ops 1000000 --memory-limit 335544320 --repeat 2 \
  --dir $DATA/nb3m --json nb3m.json > nb3m.txt 2> nb3m.err
echo "rc $?"; fioprobe; echo "$(date -u +%H:%M:%S) end nb3m"; rm -rf $DATA/nb3m
echo "$(date -u +%H:%M:%S) start t5c"; fioprobe
rm -rf $DATA/t5c; mkdir -p $DATA/t5c
$B bench --dir $DATA/t5c --memory-limit 408442197 --keys sparse --threads 1 --dist zipfian \
  --engine treeline:cache_bytes=391664981,goal=2,epsilon=1,record_cache=false,grouping=false \
  --engine treeline:cache_bytes=391664981,goal=2,epsilon=1,checkpoint_bytes=8589934592 \
  --workload a,a,a,a --value-size 1016 --records 1000000 --ops 500000 \
  --json t5c.json > t5c.txt 2> t5c.err
echo "rc $?"; fioprobe; echo "$(date -u +%H:%M:%S) end t5c"; rm -rf $DATA/t5c
