#!/bin/bash
# Logs the anonymous memory of every running sylva-24* bench process every 0.1 s.
while true; do
  for p in $(pgrep -f 'sylva-24'); do
    a=$(awk '/RssAnon/{print $2}' /proc/$p/status 2>/dev/null)
    [ -n "$a" ] && echo "$(date +%s.%N | cut -c1-14) $p $(tr '\0' ' ' < /proc/$p/cmdline | cut -c1-40) $a"
  done
  sleep 1
done
