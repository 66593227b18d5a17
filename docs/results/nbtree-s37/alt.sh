#!/bin/bash
# usage: alt.sh TAG ROUNDS BIN1 BIN2 ...   (nbtree alone, run 1's shape, 10M)
tag=$1; rounds=$2; shift 2
O=cache_bytes=268435456,sync=never
for r in $(seq 1 $rounds); do
  for b in "$@"; do
    n=$(basename $b)
    iops=$(cd /work/tmp/fio && fio --name=r --filename=f --size=2G --rw=randread --bs=4k --iodepth=2 --ioengine=io_uring --direct=1 --runtime=5 --time_based --output-format=terse | awk -F';' '{print $8}')
    rm -rf data; mkdir data
    $b bench --engine nbtree:$O --keys sparse --value-size 128 --workload c --dist uniform --records ${RECORDS:-10000000} --ops ${OPS:-100000} --memory-limit ${LIMIT:-335544320} --dir data --json $tag-$n-$r.json > $tag-$n-$r.out 2>&1
    python3 - $tag-$n-$r.json $iops $n $r <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))['runs']
l=d[0]; c=l['counters']; ru=d[1]
print(f"{sys.argv[3]:>14} r{sys.argv[4]} fio {sys.argv[2]:>6}  load {l['ops_per_sec_with_finish']/1e3:6.1f}K  p99.9 {l['latency_ns']['p999']/1e6:6.2f}ms p99.99 {l['latency_ns']['p9999']/1e6:6.2f}ms max {l['latency_ns']['max']/1e6:7.1f}ms  inline {c['inline_steps']} stalls {c['stalls']} backlog {c['max_backlog']/2**20:.1f}MiB cpu {l['cpu_worker_seconds']:.1f}+{l['cpu_other_seconds']:.1f}s  lookups {ru['ops_per_sec']/1e3:.2f}K", flush=True)
PY
  done
done
