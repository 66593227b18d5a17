#!/bin/bash
# before/after: base (main a9841c7) and 26a (+ mappings recycled and faulted ahead), alternating
D=/work/tgt/bench-dir; mkdir -p $D; C=4294967296
i=0; for B in 26base 26a 26base 26a; do
i=$((i+1)); /work/tgt/sylva-$B bench --engine db:cache_bytes=$C --engine lmdb:cache_bytes=$C --engine db:cache_bytes=$C,sync=never \
  --keys sparse --value-size 262144 --records 4000 --ops 4000 --workload a --repeat 1 --dir $D --json e2-$B-$i.json > e2-$B-$i.out 2>&1
done
