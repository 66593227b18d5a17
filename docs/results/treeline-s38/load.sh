#!/bin/bash
# The 64 B set's load at the full size, TreeLine at L - 8 MiB; polls the cgroup.
BIN=$1; NAME=$2; EXTRA=$3
R=${R:-10000000}
B=$((R*64/3)); L=$((B + 64*1048576)); C=$((L - ${SLACK_MIB:-8}*1048576))
rm -rf /work/tgt/tl38-data/$NAME; mkdir -p /work/tgt/tl38-data/$NAME
echo "$(date -u +%H:%M:%S) start $NAME C=$C L=$L"
bash poll.sh > $NAME.poll &   # poll.sh: ../treeline-s36/poll.sh
P=$!
$BIN bench --dir /work/tgt/tl38-data/$NAME --memory-limit ${LIMIT:-$L} --keys sparse \
  --engine treeline:cache_bytes=$C$EXTRA \
  --workload c --value-size 56 --records $R --ops 1000 \
  --json $NAME.json > $NAME.txt 2> $NAME.err
echo "rc $?"
kill $P
echo "$(date -u +%H:%M:%S) end $NAME"
rm -rf /work/tgt/tl38-data/$NAME
