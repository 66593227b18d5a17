#!/bin/bash
# nbtree alone at run 1's shape (10M records), binaries alternated within each round, each
# bench after a 5 s fio probe. Usage: alt-10m.sh PREFIX "ROUNDS" BINARY... (binaries are
# ./sylva-BINARY; outputs PREFIX-BINARY-ROUND.{out,json}). The invocations: README.md.
cd /work/tgt/nb31
prefix=$1 rounds=$2
shift 2
O=cache_bytes=268435456,sync=never
for round in $rounds; do
  for b in "$@"; do
    n=$prefix-$b-$round
    date -u > $n.out
    fio --name=rr2 --filename=/work/tgt/bk/src4k --size=1G --rw=randread --bs=4k --direct=1 --ioengine=psync --numjobs=2 --group_reporting --runtime=5 --time_based 2>&1 | grep IOPS >> $n.out
    rm -rf DATA; mkdir DATA
    ./sylva-$b bench --engine nbtree:$O --keys sparse --value-size 128 --workload c --dist uniform \
      --records 10000000 --ops 1000000 --memory-limit 335544320 --dir DATA --json $n.json >> $n.out 2>&1
    date -u >> $n.out
  done
done
rm -rf DATA
