#!/bin/bash
# Issue 21's 1024 B benchmark at full size: 1M records of 1,024 B, memory a third of the data,
# the 64 MiB and 8 MiB allowances as the issue gives them; db at L - 16 MiB (at L - 8 MiB the
# 64 B runs were killed at the limit) and page_size=8192 (1,016-byte values inline).
# usage: run1k.sh BIN T DIST NAME WORKLOADS [ENGINES...]   (OPS: operations a workload, default
# 500000; EXTRA: more bench arguments; DATA and OUT: the data and report directories)
BIN=$1; T=$2; D=$3; NAME=$4; W=$5; shift 5
R=1000000
DATA=${DATA:-/work/tgt/tl36-data}
OUT=${OUT:-/work/tgt/tl36}
B=$((R*1024/3))               # 341,333,333
L=$((B + 64*1048576))         # + 64 MiB (the allowance)
C=$((L - 8*1048576))          # O_DIRECT engines: L - 8 MiB
CT=$((L - 16*1048576))     # TreeLine: its anon memory measured at cache + 8.5 MB (p1)
CD=$((L - 24*1048576))     # db: cache + 15.8 MB (p1)
CR=$((B - 32*1048576))     # RocksDB: killed at B (dirty page cache), B - 64 MiB fits (p1)
ENG=("$@")
if [ ${#ENG[@]} -eq 0 ]; then
  ENG=(treeline:cache_bytes=$CT,goal=2,epsilon=1 db:page_size=8192,cache_bytes=$CD
       rocksdb:cache_bytes=$CR lmdb:cache_bytes=$B)
fi
ARGS=()
for e in "${ENG[@]}"; do ARGS+=(--engine "$e"); done
rm -rf $DATA/$NAME
mkdir -p $DATA/$NAME
cd $OUT
echo "$(date -u +%H:%M:%S) start $NAME"
fio --name=r --filename=$DATA/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}'
$BIN bench --dir $DATA/$NAME --memory-limit $L --keys sparse --threads $T --dist $D \
  "${ARGS[@]}" --workload $W --value-size 1016 --records $R --ops ${OPS:-500000} $EXTRA \
  --json $NAME.json > $NAME.txt 2> $NAME.err
echo "rc $?"
fio --name=r --filename=$DATA/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}'
echo "$(date -u +%H:%M:%S) end $NAME"
rm -rf $DATA/$NAME
