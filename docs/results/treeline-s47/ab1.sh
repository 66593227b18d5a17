#!/bin/bash
# A/B at one thread at target 7's limit (the pair session 46 cut short when 99e0f4b was
# killed): TreeLine alone, the 10M x 64 B load then 500K operations each of C, B, A, F;
# s47a (8f8f762) against the parent of the locks (s45), alternated.
HERE=/work/main/docs/results
export DATA=/work/tgt/s45-data OUT=/work/tgt/s47
C=272053589
for b in "s47a 1" "s45 1" "s47a 2" "s45 2"; do
  set -- $b
  W=c,b,a,f OPS=500000 bash $HERE/treeline-s38/run.sh /work/tgt/sylva-$1 1 zipfian t1-$1-$2 treeline:cache_bytes=$C
done
