#!/bin/bash
# A/B of two binaries on uniform C at the 64 B size, TreeLine alone, alternating.
cd /work/tgt/s42/ab
D=/work/tgt/s41-data/ab
for i in 1 2; do for b in $@; do
  rm -rf $D
  fio --name=r --filename=/work/tgt/s41-data/fio.dat --size=1G --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=5 --time_based --output-format=terse 2>/dev/null | awk -F';' '{print "fio QD32 read IOPS", $8}'
  /work/tgt/sylva-peers-$b bench --dir $D --keys sparse --dist uniform --memory-limit 280442197 \
    --engine treeline:cache_bytes=272053589 --workload c --value-size 56 \
    --records 10000000 --ops 1000000 --json $b-$i.json > $b-$i.txt 2> $b-$i.err
  echo "$(date +%T) rc $? $b-$i"
done; done
rm -rf $D
