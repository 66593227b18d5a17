#!/bin/bash
# Target 5 again, the order reversed (the default first), after seq1.sh.
# The runners of earlier sessions, with this session's directories.
HERE=$(cd "$(dirname "$0")" && pwd)
export DATA=/work/tgt/tl39-data OUT=/work/tgt/tl39
while pgrep -f seq1.sh > /dev/null; do sleep 5; done
B=/work/tgt/sylva-peers-f1c43fc
EXTRA="--max-scan 100" OPS=100000 bash "$HERE/../treeline-s36/run1k.sh" $B 1 zipfian t5r x,a treeline:cache_bytes=391664981,goal=2,epsilon=1 treeline:cache_bytes=391664981,goal=2,epsilon=1,grouping=false
