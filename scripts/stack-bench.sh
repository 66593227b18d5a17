#!/usr/bin/env bash
# The storage-stack issue's before/after benchmark: two `sylva` binaries alternated on `db`.
#
#   scripts/stack-bench.sh OLD_SYLVA NEW_SYLVA OUT_DIR [REPETITIONS] [RECORDS] [OPS]
#
# Per repetition, for 1 and 2 threads and a pool larger than the data (1 GiB) and a quarter of
# it, each binary loads RECORDS records (8-byte sparse keys, 56-byte values) and runs YCSB C, A
# and E on them; then each runs C with the pool an eighth of the data and 32 threads. The order
# of the two binaries alternates between repetitions. Every run writes its JSON to OUT_DIR;
# `scripts/stack-bench-table.py OUT_DIR` gives the medians and the ratios. Defaults: 3
# repetitions, 5M records, 2M operations per phase. The environment may narrow the set:
# POOLS (default "big quarter"), THREADS (default "1 2"), EIGHTH=0 skips the 32-thread run (its
# loads into a pool an eighth of the data take minutes each); POOLS= (empty) runs only that one;
# FIRST=K starts at repetition K (to add repetitions to an earlier OUT_DIR: the order of the
# binaries follows the repetition's number).
# OLD_SYLVA for the issue: `scripts/build-before.sh DIR` builds it (57a347f's engine under the
# harness of e8cda02, so both binaries checkpoint between phases).
set -euo pipefail
old=$1 new=$2 out=$3 reps=${4:-3} records=${5:-5000000} ops=${6:-2000000}
mkdir -p "$out"
# The data is about 110 bytes a record in the page file.
data=$((records * 110))
big=$((1 << 30))
quarter=$((data / 4))
eighth=$((data / 8))
common=(--keys sparse --value-size 56 --records "$records" --ops "$ops")
run() { # NAME BIN POOL THREADS WORKLOAD
  local name=$1 bin=$2 pool=$3 threads=$4 workload=$5
  echo "$(date +%T) $name" >&2
  "$bin" bench --engine "db:cache_bytes=$pool" "${common[@]}" --threads "$threads" \
    --workload "$workload" --json "$out/$name.json" >"$out/$name.txt"
}
for rep in $(seq "${FIRST:-1}" "$reps"); do
  if ((rep % 2)); then order=(old new); else order=(new old); fi
  for threads in ${THREADS-1 2}; do
    for pool in ${POOLS-big quarter}; do
      for which in "${order[@]}"; do
        run "$which-$pool-t$threads-r$rep" "${!which}" "${!pool}" "$threads" c,a,e
      done
    done
  done
  if [ "${EIGHTH:-1}" != 0 ]; then
    for which in "${order[@]}"; do
      run "$which-eighth-t32-r$rep" "${!which}" "$eighth" 32 c
    done
  fi
done
