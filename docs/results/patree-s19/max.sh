for rep in 1 2; do
for b in before after; do
  rm -rf d; ./sylva-$b bench --engine patree:cache_bytes=4125000 --inflight 64 --keys sparse --records 300000 --ops 300000 --workload c --dist uniform --dir ./d --json max-$b-$rep.json > max-$b-$rep.out 2>&1
done; done
rm -rf d
