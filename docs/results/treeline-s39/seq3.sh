#!/bin/bash
# Target 5's A at 500K operations, grouping=false against the default, in both orders.
# The runners of earlier sessions, with this session's directories.
HERE=$(cd "$(dirname "$0")" && pwd)
export DATA=/work/tgt/tl39-data OUT=/work/tgt/tl39
B=/work/tgt/sylva-peers-f1c43fc
T=treeline:cache_bytes=391664981,goal=2,epsilon=1
OPS=500000 bash "$HERE/../treeline-s36/run1k.sh" $B 1 zipfian t5a1 a $T $T,grouping=false
OPS=500000 bash "$HERE/../treeline-s36/run1k.sh" $B 1 zipfian t5a2 a $T,grouping=false $T
