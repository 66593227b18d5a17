#!/bin/bash
# Session 39's target runs, one after another (each script probes fio before and after).
# The runners of earlier sessions, with this session's directories.
HERE=$(cd "$(dirname "$0")" && pwd)
export DATA=/work/tgt/tl39-data OUT=/work/tgt/tl39
B=/work/tgt/sylva-peers-f1c43fc
# Target 7: uniform, 64 B, TreeLine against db, one thread.
W=c,b,a,f OPS=500000 bash "$HERE/../treeline-s38/run.sh" $B 1 uniform t7 treeline:cache_bytes=272053589 db:cache_bytes=263664981
# Target 5: Table 5.3 at 1024 B, x (max-scan 100) then A: grouping off against the default.
EXTRA="--max-scan 100" OPS=100000 bash "$HERE/../treeline-s36/run1k.sh" $B 1 zipfian t5 x,a treeline:cache_bytes=391664981,goal=2,epsilon=1,grouping=false treeline:cache_bytes=391664981,goal=2,epsilon=1
# Target 4: uniform E at 1024 B against RocksDB and db.
OPS=100000 bash "$HERE/../treeline-s36/run1k.sh" $B 1 uniform t4 e treeline:cache_bytes=391664981,goal=2,epsilon=1 db:page_size=8192,cache_bytes=383276373 rocksdb:cache_bytes=307778901
