#!/usr/bin/env bash
# Runs a command in a memory cgroup whose limit counts the page cache the command's I/O brings
# in, so an engine that caches through the OS (LMDB reads through a memory map) is held to a
# budget like the engines with caches of their own. Needs root (or a delegated cgroup).
#
#   scripts/memory-bound.sh BYTES COMMAND [ARGS...]
#
# Uses cgroup v2 when mounted at /sys/fs/cgroup (memory.max), else the cgroup v1 memory
# controller at /sys/fs/cgroup/memory (memory.limit_in_bytes). `systemd-run --scope -p
# MemoryMax=BYTES` does the same where systemd is the init system.
set -euo pipefail

if [ $# -lt 2 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 BYTES COMMAND [ARGS...]" >&2
  exit 2
fi
limit=$1
shift
name="sylva-bound-$$"

if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  dir="/sys/fs/cgroup/$name"
  mkdir "$dir"
  echo "$limit" >"$dir/memory.max"
elif [ -d /sys/fs/cgroup/memory ]; then
  dir="/sys/fs/cgroup/memory/$name"
  mkdir "$dir"
  echo "$limit" >"$dir/memory.limit_in_bytes"
else
  echo "$0: no memory cgroup controller is mounted under /sys/fs/cgroup" >&2
  exit 1
fi

# The command runs in a child shell that first moves itself into the cgroup; this shell stays
# outside and removes the cgroup afterwards.
status=0
bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' bound "$dir" "$@" || status=$?
rmdir "$dir" 2>/dev/null || true
exit "$status"
