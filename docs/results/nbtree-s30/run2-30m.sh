#!/bin/bash
# Issue 22's run 2 at 30M records, one engine per bench process, back to back (nbtree, fjall, rocksdb).
cd /work/tgt/nb30
O=cache_bytes=268435456,sync=never
for e in nbtree fjall rocksdb; do
  date -u > run2-30m-$e.out
  fio --name=rr2 --filename=/work/tgt/bk/src4k --size=1G --rw=randread --bs=4k --direct=1 --ioengine=psync --numjobs=2 --group_reporting --runtime=5 --time_based 2>&1 | grep IOPS >> run2-30m-$e.out
  rm -rf DATA; mkdir DATA
  ./sylva-a931599 bench --engine $e:$O --keys sparse --value-size 128 --workload c --dist uniform \
    --records 30000000 --ops 1000000 --memory-limit 335544320 --dir DATA --json run2-30m-$e.json >> run2-30m-$e.out 2>&1
  date -u >> run2-30m-$e.out
done
rm -rf DATA
