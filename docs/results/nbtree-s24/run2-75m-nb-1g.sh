#!/bin/bash
# nbtree alone at 75M with the settings under a 1 GiB limit, to see what it needs there.
O=cache_bytes=268435456,sync=never
/work/tgt/sylva-24A bench --engine nbtree:$O --keys sparse \
  --value-size 128 --workload c --dist uniform --records 75000000 --ops 1000000 \
  --memory-limit 1073741824 --dir /work/tgt/nb24-data --json /work/tgt/nb24-out/run2-75m-nb-1g.json
