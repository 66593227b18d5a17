#!/bin/bash
# Polls every live sylva-bench memory cgroup: usage, rss, cache, dirty, writeback (MiB).
while true; do
  for d in $(find /sys/fs/cgroup/memory -mindepth 1 -maxdepth 5 -type d -name 'sylva-bench-*' 2>/dev/null); do
    [ -n "$(cat $d/tasks 2>/dev/null)" ] || continue
    awk -v t=$(date +%H:%M:%S.%N | cut -c1-10) -v u=$(cat $d/memory.usage_in_bytes) '
      $1=="rss"||$1=="cache"||$1=="dirty"||$1=="writeback"||$1=="mapped_file"||$1=="inactive_file"||$1=="active_file" {s=s" "$1"="int($2/1048576)}
      END {print t, "usage=" int(u/1048576), s}' $d/memory.stat
  done
  sleep 0.5
done
