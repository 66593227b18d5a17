#!/bin/bash
# Session 41's runs of the record cache with a table without tombstones (05d6ee6), one after
# another (each probes fio before and after), with session 38's runner.
HERE=$(cd "$(dirname "$0")" && pwd)
export DATA=${DATA:-/work/tgt/s41-data} OUT=${OUT:-/work/tgt/s41}
B=${B:-/work/tgt/sylva-peers-05d6ee6}
# Target 7: uniform, 64 B, TreeLine against db, one thread.
W=c,b,a,f OPS=500000 bash "$HERE/../treeline-s38/run.sh" $B 1 uniform t7 treeline:cache_bytes=272053589 db:cache_bytes=263664981
# Targets 1-3: the issue's 64 B command at one thread, zipfian, beside the peers (E left out).
W=c,b,a,f,d OPS=500000 bash "$HERE/../treeline-s38/run.sh" $B 1 zipfian z1
