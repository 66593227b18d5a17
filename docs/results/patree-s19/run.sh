set -x
for rep in 1 2; do
for b in before after; do
  rm -rf d; ./sylva-$b bench --engine patree:cache_bytes=4125000,yield=on --engine patree:cache_bytes=4125000,yield=off --inflight 64 --rate 5000 --keys sparse --records 300000 --ops 150000 --workload c --dist uniform --dir ./d --json $b-$rep.json > $b-$rep.out 2>&1
done; done
rm -rf d
