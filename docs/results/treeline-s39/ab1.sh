#!/bin/bash
# A/B: eviction reading its victim's page unlocked (666ce48) against f1c43fc, T=2, alternating.
C=272053589
for i in 1 2; do
  for b in f1c43fc 666ce48; do
    W=c,a,f,d OPS=500000 bash run.sh /work/tgt/sylva-$b 2 zipfian ab1-$b-$i treeline:cache_bytes=$C
  done
done
