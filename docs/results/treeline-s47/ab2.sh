#!/bin/bash
# A/B at two threads, TreeLine alone at target 7's limit, the 10M x 64 B load then 100K of C:
# s47a (Phase IV's upgrades tried under the state lock first) against its parent (ef6eb61,
# the upgrades always with the state lock let go) and the parent of the locks (s45).
HERE=/work/main/docs/results
export DATA=/work/tgt/s45-data OUT=/work/tgt/s47
C=272053589
for b in "s47a 1" "s45 3" "s47a 2" "ef6eb61 1"; do
  set -- $b
  W=c OPS=100000 bash $HERE/treeline-s38/run.sh /work/tgt/sylva-$1 2 zipfian ab-$1-$2 treeline:cache_bytes=$C
done
