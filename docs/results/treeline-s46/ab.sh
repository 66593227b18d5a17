#!/bin/bash
# A/B of the segment and page locks (99e0f4b; 7d9a218 and 43458e1 were killed at the limit in
# their two-thread loads) against their parent's code (s45 = f5389e1's TreeLine), TreeLine
# alone, the 64 B set at its full size (10M records), zipfian, 500K operations of C, B, A, F
# after each load; two threads alternating, then one thread of each.
# Uses session 38's runner (its directories from the environment).
HERE=$(cd "$(dirname "$0")" && pwd)
export DATA=/work/tgt/s45-data OUT=/work/tgt/s46
C=272053589
for run in "99e0f4b 2 1" "s45 2 1" "99e0f4b 2 2" "s45 2 2" "99e0f4b 1 1" "s45 1 1"; do
  set -- $run
  W=c,b,a,f OPS=500000 bash "$HERE/../treeline-s38/run.sh" /work/tgt/sylva-$1 $2 zipfian ab-$1-t$2-$3 treeline:cache_bytes=$C
done
