#!/bin/bash
# Target 5's A at 500K operations, grouping=false against the default, in both orders.
B=/work/tgt/sylva-peers-f1c43fc
T=treeline:cache_bytes=391664981,goal=2,epsilon=1
OPS=500000 bash run1k.sh $B 1 zipfian t5a1 a $T $T,grouping=false
OPS=500000 bash run1k.sh $B 1 zipfian t5a2 a $T,grouping=false $T
