#!/usr/bin/env python3
"""Seeds each fuzz target's corpus (fuzz/corpus/TARGET/) from the stored fixtures in
crates/sylva/tests/fixtures/: the pages of every page file (split by node kind), the log files,
the payloads of their records, and the page images those records carry. Run from anywhere;
the corpora are not committed (fuzz/.gitignore).

    python3 fuzz/seed.py
"""

import hashlib
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent
FIXTURES = ROOT.parent / "crates" / "sylva" / "tests" / "fixtures"
CORPUS = ROOT / "corpus"
PAGE = 4096  # every stored fixture uses 4 KiB pages
HEADER = 32  # the common page header before a node's bytes
# Node kinds (the node's byte 0): 1 inner, 2 leaf, 3 fingerprinting leaf, 4 semi-dense, 5 dense.
NODE_TARGET = {1: "page_slotted", 2: "page_slotted", 3: "page_slotted",
               4: "page_semidense", 5: "page_dense"}
# Db log record types whose payload carries page images (docs/format.md, "Log payloads").
PAGES, PAGES_EDIT = 3, 6


def put(target, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def node(data):
    if data and data[0] in NODE_TARGET:
        put(NODE_TARGET[data[0]], data)


def log_payloads(log):
    """The payloads of the intact records of a log file (either frame version)."""
    if len(log) < 32 or log[:8] != b"sylvaWAL":
        return
    frame = 16 if struct.unpack_from("<I", log, 8)[0] == 1 else 20
    at = 32
    while at + frame <= len(log):
        (n,) = struct.unpack_from("<I", log, at)
        if at + frame + n > len(log):
            return
        yield log[at + frame:at + frame + n]
        at += frame + n


def images(payload):
    """The page images a PAGES or PAGES_EDIT payload carries, as whole nodes."""
    at = 1
    if payload[0] == PAGES:
        changed, freed = struct.unpack_from("<HH", payload, at)
        at += 4 + 8 + 8 * (changed + freed)
    else:
        (changed,) = struct.unpack_from("<H", payload, at)
        at += 2 + 8 * changed
    for _ in range(changed):
        head, tail = struct.unpack_from("<II", payload, at)
        at += 8
        yield payload[at:at + head] + bytes(PAGE - HEADER - head - tail) + \
            payload[at + head:at + head + tail]
        at += head + tail


def main():
    for f in sorted(FIXTURES.rglob("*")):
        if not f.is_file():
            continue
        data = f.read_bytes()
        if data[:4] == b"SYpg":
            put("page_file_open", data[:8 * PAGE])
            put("meta_page", data[:8 * PAGE])
            put("free_space", data[:64 * PAGE])
            for i in range(len(data) // PAGE):
                page = data[i * PAGE:(i + 1) * PAGE]
                put("page_verify", page)
                if page[6] == 2:  # a free-space page (version 1: free list)
                    put("free_space_page", page)
                if page[6] == 5:  # the first page of an out-of-line value's run
                    put("overflow_run", page)
                    # The run's value (a bucket of long keys in a state version 6 database)
                    # runs on through the next pages, which have no header of their own.
                    start = i * PAGE + HEADER + 16
                    length = struct.unpack_from("<I", page, HEADER)[0]
                    put("key_bucket", data[start:start + length])
                node(page[HEADER:])
        elif data[:8] == b"sylvaDMP":
            put("dump_stream", data[:64 * 1024])
            put("dump_stream", data[20:64 * 1024])
        elif data[:8] == b"sylvaWAL":
            put("wal_recover", data[:64 * 1024])
            for payload in log_payloads(data):
                if not payload:
                    continue
                put("db_log_payload", payload)
                if payload[0] in (PAGES, PAGES_EDIT):
                    try:
                        for image in images(payload):
                            node(image)
                    except struct.error:
                        pass  # not a Db payload (the bare log fixtures carry text)
    for d in sorted(CORPUS.iterdir()):
        files = list(d.iterdir())
        print(f"{d.name}: {len(files)} seeds, {sum(p.stat().st_size for p in files)} bytes")


if __name__ == "__main__":
    main()
