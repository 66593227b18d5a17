#!/bin/bash
# Issue 22's run 2 at 75M records, one engine per bench process, back to back (ENGINES, by
# default nbtree, fjall, rocksdb), every engine under one memory limit of 512 MiB (at 320 MiB
# nbtree and RocksDB were killed at 75M, session 24). Outputs run2-75m-ENGINE[SUFFIX].{out,json}.
cd /work/tgt/nb31
BIN=${BIN:-./sylva-final}
O=cache_bytes=268435456,sync=never
for e in ${ENGINES:-nbtree fjall rocksdb}; do
  n=run2-75m-$e$SUFFIX
  date -u > $n.out
  fio --name=rr2 --filename=/work/tgt/bk/src4k --size=1G --rw=randread --bs=4k --direct=1 --ioengine=psync --numjobs=2 --group_reporting --runtime=5 --time_based 2>&1 | grep IOPS >> $n.out
  rm -rf DATA; mkdir DATA
  $BIN bench --engine $e:$O --keys sparse --value-size 128 --workload c --dist uniform \
    --records 75000000 --ops 1000000 --memory-limit 536870912 --dir DATA --json $n.json >> $n.out 2>&1
  date -u >> $n.out
  fio --name=rr2 --filename=/work/tgt/bk/src4k --size=1G --rw=randread --bs=4k --direct=1 --ioengine=psync --numjobs=2 --group_reporting --runtime=5 --time_based 2>&1 | grep IOPS >> $n.out
done
rm -rf DATA
