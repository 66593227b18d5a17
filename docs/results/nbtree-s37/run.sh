#!/bin/bash
# Issue 22's run 1 (and run 2 with RECORDS=30000000/75000000), one engine per bench process,
# back to back, ORDER given, each between two 5 s fio probes (4 KiB random reads, depth 2).
# Outputs R-ENGINE-ROUND.{out,json}.
cd "$(dirname "$0")"
BIN=${BIN:-/work/tgt/sylva-5fda1d1}
R=${RECORDS:-10000000}
LIMIT=${LIMIT:-335544320}
O=cache_bytes=268435456,sync=${SYNC:-never}
probe() { fio --name=rr2 --filename=/work/tmp/fio/f --size=2G --rw=randread --bs=4k --direct=1 --ioengine=psync --numjobs=2 --group_reporting --runtime=5 --time_based 2>&1 | grep IOPS; }
for spec in ${ORDER:-nbtree:1 rocksdb:1 fjall:1 fjall:2 rocksdb:2 nbtree:2}; do
  e=${spec%%:*}; r=${spec##*:}
  n=${TAG:-run1}-$e-$r
  date -u > $n.out; probe >> $n.out
  rm -rf DATA; mkdir DATA
  $BIN bench --engine $e:$O --keys sparse --value-size 128 --workload c --dist uniform \
    --records $R --ops 1000000 --memory-limit $LIMIT --dir DATA --json $n.json >> $n.out 2>&1
  date -u >> $n.out; probe >> $n.out
done
rm -rf DATA
