#!/bin/bash
# A/B: eviction reading its victim's page unlocked (666ce48) against f1c43fc, T=2, alternating.
# The runners of earlier sessions, with this session's directories.
HERE=$(cd "$(dirname "$0")" && pwd)
export DATA=/work/tgt/tl39-data OUT=/work/tgt/tl39
C=272053589
for i in 1 2; do
  for b in f1c43fc 666ce48; do
    W=c,a,f,d OPS=500000 bash "$HERE/../treeline-s38/run.sh" /work/tgt/sylva-$b 2 zipfian ab1-$b-$i treeline:cache_bytes=$C
  done
done
