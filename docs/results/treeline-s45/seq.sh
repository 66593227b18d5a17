#!/bin/bash
# Session 45: target 5's A against the thesis's "Base" with the record cache warmed by A itself
# (four A phases of 500K operations after one load each), then target 7 at the issue's 2M
# operations a workload with --repeat 2 (engines alternated), one after another.
HERE=$(cd "$(dirname "$0")" && pwd)
export DATA=${DATA:-/work/tgt/s45-data} OUT=${OUT:-/work/tgt/s45}
B=${B:-/work/tgt/sylva-1ecc5a3}
fioprobe() {
  fio --name=r --filename=$DATA/fio.dat --size=1G --rw=randread --bs=4k --direct=1 \
    --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null \
    | awk -F';' '{print "fio QD32 read IOPS", $8}'
}
cd $OUT
# Target 5 (Table 5.3, A): 1024 B, 1M records, B = 341,333,333, L = B + 64 MiB, TreeLine L - 8 MiB.
echo "$(date -u +%H:%M:%S) start t5w"; fioprobe
rm -rf $DATA/t5w; mkdir -p $DATA/t5w
$B bench --dir $DATA/t5w --memory-limit 408442197 --keys sparse --threads 1 --dist zipfian \
  --engine treeline:cache_bytes=391664981,goal=2,epsilon=1,record_cache=false,grouping=false \
  --engine treeline:cache_bytes=391664981,goal=2,epsilon=1 \
  --workload a,a,a,a --value-size 1016 --records 1000000 --ops 500000 \
  --json t5w.json > t5w.txt 2> t5w.err
echo "rc $?"; fioprobe; echo "$(date -u +%H:%M:%S) end t5w"; rm -rf $DATA/t5w
# Target 7: uniform, 64 B, TreeLine against db, one thread, the issue's 2M operations, --repeat 2.
echo "$(date -u +%H:%M:%S) start t7r"; fioprobe
rm -rf $DATA/t7r; mkdir -p $DATA/t7r
$B bench --dir $DATA/t7r --memory-limit 280442197 --keys sparse --threads 1 --dist uniform \
  --engine treeline:cache_bytes=272053589 --engine db:cache_bytes=263664981 \
  --workload c,b,a,f --value-size 56 --records 10000000 --ops 2000000 --repeat 2 \
  --json t7r.json > t7r.txt 2> t7r.err
echo "rc $?"; fioprobe; echo "$(date -u +%H:%M:%S) end t7r"; rm -rf $DATA/t7r
