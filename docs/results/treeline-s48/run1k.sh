#!/bin/bash
# Issue 21's 1024 B benchmark at its full size (1M records of 1 KiB, memory a third of the data,
# L = B + 64 MiB) with the four engines. Caches: TreeLine L - 8 MiB (the issue's); db L - 40 MiB
# (at L - 16 MiB it was killed in its load: its vmcache pool's page tables and state words grow with
# the file, which holds each 1,016-byte value in a 4 KiB page of its own); RocksDB B - 32 MiB (at B
# killed in session 36); LMDB B.
# usage: run1k.sh BIN T DIST NAME [ENGINES...]  (OPS default 500000, W default c,b,a,f,d,e)
BIN=$1; T=$2; D=$3; NAME=$4; shift 4
R=1000000; OPS=${OPS:-500000}
DATA=${DATA:-/work/tgt/s45-data}; OUT=${OUT:-/work/tgt/s48}
B=$((R*1024/3)); L=$((B + 64*1048576))
ENG=("$@")
if [ ${#ENG[@]} -eq 0 ]; then
  ENG=(treeline:cache_bytes=$((L - 8*1048576)),goal=2,epsilon=1 db:cache_bytes=$((L - 40*1048576))
       rocksdb:cache_bytes=$((B - 32*1048576)) lmdb:cache_bytes=$B)
fi
ARGS=(); for e in "${ENG[@]}"; do ARGS+=(--engine "$e"); done
rm -rf $DATA/$NAME; mkdir -p $DATA/$NAME; cd $OUT
fiorun() { fio --name=r --filename=$DATA/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}'; }
echo "$(date -u +%T) start $NAME"; fiorun
$BIN bench --dir $DATA/$NAME --memory-limit $L --keys sparse --threads $T --dist $D \
  "${ARGS[@]}" --workload ${W:-c,b,a,f,d,e} --value-size 1016 --records $R --ops $OPS \
  --json $NAME.json > $NAME.txt 2> $NAME.err
echo "rc $?"; fiorun; echo "$(date -u +%T) end $NAME"
rm -rf $DATA/$NAME
