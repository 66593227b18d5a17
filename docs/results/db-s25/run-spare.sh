#!/usr/bin/env bash
# Issue 23, session 25: the parallel write-back's buffers kept between write-backs (25B) against
# allocated per write-back (25A, ae62915); db alone, 256 KiB values, ~2 GiB, binaries alternated.
set -u
C=4294967296
D=${D:-/work/tgt/me-data/s25/dirs}
for pair in 1 2 3; do
  for b in A B; do
    rm -rf $D; mkdir -p $D
    /work/tgt/sylva-25$b bench --engine db:cache_bytes=$C --keys sparse --value-size 262144 \
      --records 8000 --ops 4000 --workload a --dir $D --json spare-$b-$pair.json > spare-$b-$pair.out 2>&1
  done
done
rm -rf $D
