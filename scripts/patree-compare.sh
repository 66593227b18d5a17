#!/usr/bin/env bash
# The PA-Tree issue's first side-by-side measurement on YCSB C, the pool an eighth of the data
# (RECORDS records of 8-byte sparse keys and 8-byte values, about 32 bytes each in the file
# with `db`'s adaptive leaves; `sylva bench --suite patree` measures it instead):
# `db` at 1 and 32 threads, `patree` with one thread keeping 32 and 64 operations in flight,
# and fio 4 KiB random reads (io_uring, O_DIRECT) at QD1 and QD32 before and after on the same
# disk. Prints one line per run: ops/s, p50/p99, CPU µs per op, cores, context switches and
# page reads per op, REPS times (default 1). BASELINES=1 adds the paper's synchronous baselines
# at 32 threads (`patree:mode=dedicated` and `mode=shared`: `db` reading through io_uring).
# Usage: [BIN=...] [RECORDS=N] [OPS=N] [REPS=N] [BASELINES=1] scripts/patree-compare.sh OUT_DIR
set -u
BIN=${BIN:-target/release/sylva}; OUT=${1:?usage: scripts/patree-compare.sh OUT_DIR}; RECORDS=${RECORDS:-1000000}; OPS=${OPS:-500000}
BIN=$(realpath "$BIN"); mkdir -p "$OUT"; cd "$OUT"
POOL=$((RECORDS * 32 / 8))
fiorun() { fio --name=r --filename=$OUT/fio.dat --size=128M --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=$1 --runtime=6 --time_based --output-format=terse 2>/dev/null | awk -F';' -v q=$1 '{printf "fio QD%s %d IOPS mean %.0f us\n", q, $8, $40}'; }
common="--keys sparse --value-size 8 --records $RECORDS --ops $OPS --workload c"
for rep in $(seq "${REPS:-1}"); do
echo "== repetition $rep"
fiorun 1; fiorun 32
for e in "db:cache_bytes=$POOL --threads 1" "db:cache_bytes=$POOL --threads 32" ${BASELINES:+"patree:cache_bytes=$POOL,mode=dedicated --threads 32" "patree:cache_bytes=$POOL,mode=shared --threads 32"} "patree:cache_bytes=$POOL,probe=every --threads 1 --inflight 32" "patree:cache_bytes=$POOL,probe=every --threads 1 --inflight 64" "patree:cache_bytes=$POOL,probe=avg --threads 1 --inflight 64"; do
  set -- $e; name=$(echo "$e" | tr ' :=,' '____')-r$rep
  $BIN bench --engine $e $common --json $name.json >/dev/null 2>&1
  python3 - "$name.json" "$e" <<'PY'
import json,sys
d=json.load(open(sys.argv[1])); d=d['runs'] if isinstance(d,dict) else d
b=d[-1]
cpu=b['cpu_user_seconds']+b['cpu_system_seconds']
print('%-58s %8.0f ops/s  p50 %7.1f us p99 %7.1f us  cpu/op %5.1f us  cores %.2f  ctx/op %.3f  reads/op %.2f other %.1f'%(sys.argv[2], b['ops_per_sec'], b['latency_ns']['p50']/1e3, b['latency_ns']['p99']/1e3, cpu/b['ops']*1e6, cpu/b['seconds'], b['context_switches']/b['ops'], b['io_read_bytes']/4096/b['ops'], b['other_load']))
PY
done
fiorun 1; fiorun 32
done
