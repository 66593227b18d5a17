#!/bin/bash
# The 1024 B set's load with grouping=false (killed at the limit in session 36), then 100K of A.
BIN=$1; NAME=$2; EXTRA=$3
L=408442197; C=$((L - 16*1048576))
rm -rf /work/tgt/tl39-data/$NAME; mkdir -p /work/tgt/tl39-data/$NAME
echo "$(date -u +%H:%M:%S) start $NAME"
bash "$(dirname "$0")/../treeline-s36/poll.sh" > $NAME.poll &
P=$!
$BIN bench --dir /work/tgt/tl39-data/$NAME --memory-limit $L --keys sparse --dist zipfian \
  --engine treeline:cache_bytes=$C,goal=2,epsilon=1$EXTRA --workload a --value-size 1016 \
  --records 1000000 --ops 100000 --json $NAME.json > $NAME.txt 2> $NAME.err
echo "rc $?"
kill $P
echo "$(date -u +%H:%M:%S) end $NAME"
rm -rf /work/tgt/tl39-data/$NAME
