#!/bin/bash
# Issue 21's 64 B benchmark at its full size: 10M records of 64 B, memory a third of the data,
# the 64 MiB and 8 MiB allowances as the issue gives them (db at L - 16 MiB: killed at L - 8 MiB
# in session 35, its memory outside the pool being more than 8 MiB).
# usage: run.sh BIN T DIST NAME [ENGINES...]   (OPS: operations a workload, default 500000;
# W: the workloads, default c,b,a,f,d,e; DATA and OUT: the data and report directories)
BIN=$1; T=$2; D=$3; NAME=$4; shift 4
R=10000000
OPS=${OPS:-500000}
DATA=${DATA:-/work/tgt/tl38-data}
OUT=${OUT:-/work/tgt/tl38}
B=$((R*64/3))                 # 213,333,333
L=$((B + 64*1048576))         # + 64 MiB (the allowance)
C=$((L - 8*1048576))          # O_DIRECT engines: L - 8 MiB
CDB=$((L - 16*1048576))
ENG=("$@")
if [ ${#ENG[@]} -eq 0 ]; then
  ENG=(treeline:cache_bytes=$C db:cache_bytes=$CDB rocksdb:cache_bytes=$B lmdb:cache_bytes=$B)
fi
ARGS=()
for e in "${ENG[@]}"; do ARGS+=(--engine "$e"); done
rm -rf $DATA/$NAME
mkdir -p $DATA/$NAME
cd $OUT
echo "$(date -u +%H:%M:%S) start $NAME"
fio --name=r --filename=$DATA/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}'
$BIN bench --dir $DATA/$NAME --memory-limit $L --keys sparse --threads $T --dist $D \
  "${ARGS[@]}" --workload ${W:-c,b,a,f,d,e} --value-size 56 --records $R --ops $OPS \
  --json $NAME.json > $NAME.txt 2> $NAME.err
echo "rc $?"
fio --name=r --filename=$DATA/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}'
echo "$(date -u +%H:%M:%S) end $NAME"
rm -rf $DATA/$NAME
