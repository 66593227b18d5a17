#!/bin/bash
# Target 5's last part: A at 1024 B against record_cache=false,grouping=false (the thesis's "Base").
B=/work/tgt/sylva-peers-f1c43fc
T=treeline:cache_bytes=391664981,goal=2,epsilon=1
OPS=500000 bash run1k.sh $B 1 zipfian t5b a $T,record_cache=false,grouping=false $T
