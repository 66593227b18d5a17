#!/bin/bash
# Session 42: target 7 and targets 1-3 with the distance-keeping hash table and the leaner read
# miss (9216aff), one after another (each probes fio before and after), with session 38's runner.
HERE=$(cd "$(dirname "$0")" && pwd)
export DATA=${DATA:-/work/tgt/s41-data} OUT=${OUT:-/work/tgt/s42/r5}
B=${B:-/work/tgt/sylva-peers-9216aff}
# Target 7: uniform, 64 B, TreeLine against db, one thread.
W=c,b,a,f OPS=500000 bash "$HERE/../treeline-s38/run.sh" $B 1 uniform t7 treeline:cache_bytes=272053589 db:cache_bytes=263664981
# Targets 1-3: the issue's 64 B command at one thread, zipfian, beside the peers (E left out), at the
# issue's 2M operations a workload (sessions 35-41 ran 500K: TreeLine's record cache, 2.9M entries,
# had turned over by less than a tenth at the end of C, db's pool of 64K pages more than three times).
W=c,b,a,f,d OPS=2000000 bash "$HERE/../treeline-s38/run.sh" $B 1 zipfian z1
