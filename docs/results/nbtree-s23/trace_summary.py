"""Summarises a stderr of the session-23 tracer (`tracer-and-experiments.patch`).

Lines `M <µs> <phase>` mark the merger's phases; lines `S <µs> total=<µs> ...` are inserts that
took over 5 ms. Prints the inserts over 20 ms grouped by what the merger was doing while they
waited, then the N slowest with the phase marks during each wait.

    python3 trace_summary.py TRACE.err N
"""
import bisect
import sys


def read(path):
    marks, slow = [], []
    for line in open(path):
        p = line.split()
        if not p:
            continue
        if p[0] == "M":
            marks.append((int(p[1]), p[2]))
        elif p[0] == "S":
            d = dict(x.split("=") for x in p[2:])
            slow.append((int(p[1]), int(d["total"])))
    return marks, slow


def during(marks, times, t0, total):
    """The mark before the wait, and the marks within it (as (µs, phase))."""
    i = bisect.bisect_right(times, t0)
    before = marks[i - 1] if i > 0 else None
    inside = []
    while i < len(marks) and marks[i][0] <= t0 + total:
        inside.append(marks[i])
        i += 1
    return before, inside


def cause(before, inside):
    names = [m[1] for m in inside]
    first = before[1] if before else ""
    if "pf:synced1" in names:
        return "page file fsync (commit point)"
    if "ci:end" in names and ("ci:begin" in names or first == "ci:begin"):
        return "commit point fsyncs"
    if "dist:dropped" in names or "c:droppedrest" in names:
        return "freeing moved records"
    if "ck:gate" in names or first == "ck:presync":
        return "log fsync before rotation"
    if "c:mergedmem-done" in names:
        return "merging frozen roots in memory"
    return "other:" + first + "/" + ",".join(names[:3])


def main():
    marks, slow = read(sys.argv[1])
    n = int(sys.argv[2])
    times = [m[0] for m in marks]
    print("## inserts over 20 ms by the merger's phase")
    causes = {}
    for t0, total in slow:
        if total >= 20000:
            causes.setdefault(cause(*during(marks, times, t0, total)), []).append(total)
    for c, v in sorted(causes.items(), key=lambda x: -max(x[1])):
        print(f"  {c}: {len(v)} inserts, longest {max(v) / 1000:.1f} ms")
    print("  total >20ms", sum(len(v) for v in causes.values()))
    print(f"## the {n} slowest inserts (start, and the merger's phase marks during the wait)")
    for t0, total in sorted(slow, key=lambda s: -s[1])[:n]:
        before, inside = during(marks, times, t0, total)
        marks_txt = " ".join(f"{p}@+{(t - t0) // 1000}ms" for t, p in inside[:12])
        more = " ..." if len(inside) > 12 else ""
        head = f"{before[1]}(-{(t0 - before[0]) // 1000}ms)" if before else "-"
        print(f"{total / 1000:.1f}ms at {t0 / 1e6:.2f}s; before: {head} during: {marks_txt}{more}")


main()
