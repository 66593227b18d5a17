#!/bin/bash
# Session 45: TreeLine alone at target 7's settings (the 64 B set, 10M records, L and L - 8 MiB),
# B and A of 2M operations each after the load (the phases that leave dirty entries for their
# finishing checkpoint), to see the cgroup's peak with the checkpoint's list made room for.
# Memory only: tests were compiling beside it, so its speeds are not comparable.
export DATA=${DATA:-/work/tgt/s45-data} OUT=${OUT:-/work/tgt/s45}
B=${B:-/work/tgt/sylva-s45}
cd $OUT
rm -rf $DATA/mem; mkdir -p $DATA/mem
echo "$(date -u +%H:%M:%S) start mem"
$B bench --dir $DATA/mem --memory-limit 280442197 --keys sparse --threads 1 --dist uniform \
  --engine treeline:cache_bytes=272053589 --workload b,a --value-size 56 --records 10000000 \
  --ops 2000000 --json mem.json > mem.txt 2> mem.err
echo "rc $?"; echo "$(date -u +%H:%M:%S) end mem"; rm -rf $DATA/mem
