#!/bin/bash
# A/B at two threads, TreeLine alone at target 7's limit, the 10M x 64 B load then 100K of C:
# evictions' page reads with the state lock let go (the default since 7d9a218) or kept
# (SYLVA_TL_EVICT_LOCKED, a debug build's switch), beside the parent of the locks (s45).
HERE=/work/main/docs/results
export DATA=/work/tgt/s45-data OUT=/work/tgt/s47
C=272053589
for p in 1 2; do
  W=c OPS=100000 bash $HERE/treeline-s38/run.sh /work/tgt/sylva-dbg47b 2 zipfian ab-unl-$p treeline:cache_bytes=$C
  SYLVA_TL_EVICT_LOCKED=1 W=c OPS=100000 bash $HERE/treeline-s38/run.sh /work/tgt/sylva-dbg47b 2 zipfian ab-lck-$p treeline:cache_bytes=$C
  W=c OPS=100000 bash $HERE/treeline-s38/run.sh /work/tgt/sylva-s45 2 zipfian ab-s45-$p treeline:cache_bytes=$C
done
