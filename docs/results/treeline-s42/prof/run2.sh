#!/bin/bash
# Profiles uniform C at the 64 B size, TreeLine alone: run2.sh BINARY-SUFFIX
cd /work/tgt/s42/prof
B=$1
rm -rf /work/tgt/s41-data/prof
/work/tgt/sylva-peers-$B bench --dir /work/tgt/s41-data/prof --keys sparse --dist uniform --memory-limit 280442197 \
  --engine treeline:cache_bytes=272053589 --workload c --value-size 56 \
  --records 10000000 --ops 2000000 --json c-$B.json > c-$B.txt 2> c-$B.err &
# attach once the 10M load and its checkpoint are done (about 200 s here)
sleep 215
P=$(pgrep -f "sylva-peers-$B bench" | sort -n | tail -1)
echo "$(date +%T) attach $P"
perf record -F 999 -g -p $P -o perf-$B.data -- sleep 30 2> perf.err
echo "$(date +%T) done"
pkill -f "sylva-peers-$B bench"
rm -rf /work/tgt/s41-data/prof
