#!/usr/bin/env bash
# Issue 23, session 25: is a direct-I/O write that extends a file (a load's runs, allocated at
# the page file's end) slower than one over written blocks, or than buffered writes? 1 MiB
# writes, 1 GiB, on the same file system as the benchmarks' data (ext4 on the VM's disk).
set -u
D=${D:-/work/tgt/me-data/s25/fio}
mkdir -p $D
common="--name=w --bs=1M --size=1G --rw=write --fallocate=none --end_fsync=1 --group_reporting"
run() { echo "== $1"; shift; fio $common "$@" --output-format=terse | awk -F';' '{printf "write %.0f MiB/s, %.0f IOPS, %d ms\n", $48/1024, $49, $50}'; }
for round in 1 2; do
  rm -f $D/f; run "direct, appending (QD 1)" --filename=$D/f --direct=1 --ioengine=psync
  run "direct, over the blocks just written (QD 1)" --filename=$D/f --direct=1 --ioengine=psync
  rm -f $D/f; run "direct, appending (QD 8, libaio)" --filename=$D/f --direct=1 --ioengine=libaio --iodepth=8
  run "direct, over written blocks (QD 8, libaio)" --filename=$D/f --direct=1 --ioengine=libaio --iodepth=8
  rm -f $D/f; run "buffered, appending, fsync at the end" --filename=$D/f --direct=0 --ioengine=psync
done
rm -f $D/f
