#!/bin/bash
# usage: ck.sh BIN T NAME  — a 3M-record 64 B load (a third in memory), then 300K ops of A
BIN=$1; T=$2; NAME=$3
DATA=/work/tgt/s45-data/ck-$NAME; rm -rf $DATA; mkdir -p $DATA
cd /work/tgt/s46
/usr/bin/time -f "%e s %U user %S sys" $BIN bench --dir $DATA --keys sparse --threads $T --dist zipfian \
  --engine treeline:cache_bytes=90000000 --workload a --value-size 56 --records 3000000 --ops 300000 \
  --json ck-$NAME.json > ck-$NAME.txt 2>&1
python3 - <<PY
import json
d=json.load(open('ck-$NAME.json'))
for i,r in enumerate(d['runs']):
    c=r['counters']
    print('$NAME',i,r.get('ops_per_sec', ''),{k:c.get(k) for k in ['checkpoints','reorganizations','file_pages','free_pages','page_images']})
PY
grep -E "treeline:" ck-$NAME.txt | awk '{print "   ", \$2}'
tail -1 ck-$NAME.txt
rm -rf $DATA
