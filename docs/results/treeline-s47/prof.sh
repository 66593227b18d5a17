#!/bin/bash
# usage: prof.sh BIN T NAME — a 3M-record 64 B load (90 MB cache) and 300K of A, perf flat profile
BIN=$1; T=$2; NAME=$3
DATA=/work/tgt/s45-data/pf-$NAME; rm -rf $DATA; mkdir -p $DATA
cd ${OUT:-/work/tgt/s47}
perf record -F 999 -o pf-$NAME.data -- /usr/bin/time -f "%e s %U user %S sys" $BIN bench --dir $DATA --keys sparse --threads $T --dist zipfian \
  --engine treeline:cache_bytes=90000000 --workload a --value-size 56 --records 3000000 --ops 300000 \
  --json pf-$NAME.json > pf-$NAME.txt 2>&1
rm -rf $DATA
perf report -i pf-$NAME.data --no-children --sort symbol --percent-limit 0.7 --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -45 > pf-$NAME.top
