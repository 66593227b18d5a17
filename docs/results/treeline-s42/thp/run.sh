#!/bin/bash
# user CPU of uniform C at 10M records, data in the page cache, THP madvise vs always
# usage: run.sh BIN NAME THP [direct_io]
BIN=$1; NAME=$2; THP=$3; DIO=${4:-false}
echo $THP > /sys/kernel/mm/transparent_hugepage/enabled
D=/work/tgt/s41-data/thp; rm -rf $D
cd /work/tgt/s42/thp
$BIN bench --dir $D --keys sparse --dist uniform \
  --engine treeline:cache_bytes=272053589,direct_io=$DIO --workload c --value-size 56 \
  --records 10000000 --ops 1000000 --json $NAME.json > $NAME.txt 2> $NAME.err
echo "rc $? $NAME $(grep AnonHugePages /proc/meminfo)"
echo madvise > /sys/kernel/mm/transparent_hugepage/enabled
rm -rf $D
