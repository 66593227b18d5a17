#!/bin/bash
# Session 41's second runs: slots packed and compacted, the table to seven eighths, the index
# charged its pages (7827b50); as seq1.sh otherwise.
HERE=$(cd "$(dirname "$0")" && pwd)
export DATA=${DATA:-/work/tgt/s41-data} OUT=${OUT:-/work/tgt/s41/r2}
B=${B:-/work/tgt/sylva-peers-7827b50}
W=c,b,a,f OPS=500000 bash "$HERE/../treeline-s38/run.sh" $B 1 uniform t7 treeline:cache_bytes=272053589 db:cache_bytes=263664981
W=c,b,a,f,d OPS=500000 bash "$HERE/../treeline-s38/run.sh" $B 1 zipfian z1
