#!/bin/bash
# Target 5 again, the order reversed (the default first), after seq1.sh.
while pgrep -f seq1.sh > /dev/null; do sleep 5; done
B=/work/tgt/sylva-peers-f1c43fc
EXTRA="--max-scan 100" OPS=100000 bash run1k.sh $B 1 zipfian t5r x,a treeline:cache_bytes=391664981,goal=2,epsilon=1 treeline:cache_bytes=391664981,goal=2,epsilon=1,grouping=false
