#!/bin/bash
# Session 41's third run: target 7 with the floor search in place (6954b46); as seq1.sh.
HERE=$(cd "$(dirname "$0")" && pwd)
export DATA=${DATA:-/work/tgt/s41-data} OUT=${OUT:-/work/tgt/s41/r3}
B=${B:-/work/tgt/sylva-peers-6954b46}
W=c,b,a,f OPS=500000 bash "$HERE/../treeline-s38/run.sh" $B 1 uniform t7 treeline:cache_bytes=272053589 db:cache_bytes=263664981
