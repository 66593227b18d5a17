#!/bin/bash
# Session 40's runs of the record cache with a hash table (74e0dce), one after another (each
# probes fio before and after), with the runners of earlier sessions.
HERE=$(cd "$(dirname "$0")" && pwd)
export DATA=/work/tgt/s40-data OUT=/work/tgt/s40
B=${B:-/work/tgt/sylva-peers-74e0dce}
# Target 7: uniform, 64 B, TreeLine against db, one thread.
W=c,b,a,f OPS=500000 bash "$HERE/../treeline-s38/run.sh" $B 1 uniform t7 treeline:cache_bytes=272053589 db:cache_bytes=263664981
# Targets 1-3: the issue's 64 B command at one thread, zipfian, beside the peers (E left out).
W=c,b,a,f,d OPS=500000 bash "$HERE/../treeline-s38/run.sh" $B 1 zipfian z1
