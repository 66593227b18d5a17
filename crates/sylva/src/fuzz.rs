//! Entry points for the fuzz targets in `fuzz/` (not part of the API; hidden from the docs).
//!
//! Each function runs one decoder of on-disk bytes over arbitrary input the way the engine
//! runs it over bytes read from disk, and calls every accessor the engine calls on what the
//! decoder accepted. None may panic: a decoder answers damaged bytes with an error. The
//! functions live in the library, not in the fuzz crate, so that they follow the decoders when
//! those move and the stable test suite runs them too (`tests/fuzz_seeds.rs` over the fixtures;
//! a regression test per bug the fuzzers found sits next to the decoder it fixed).
//!
//! Inputs whose bytes a checksum covers (a whole page, the meta page) are checksummed here
//! before decoding, so a fuzzer explores what lies behind the checksum instead of stopping at
//! it. The checksum itself is covered by the `page_verify` and `wal_recover` targets.

use crate::db::log::{self, Record};
use crate::io::page_header::{seal, PageKind, PAGE_HEADER_LEN};
use crate::io::{MemIo, PageFile, FIRST_DATA_PAGE, MIN_PAGE_SIZE};
use crate::page::dense::Dense;
use crate::page::semidense::SemiDense;
use crate::page::slotted::{Slotted, HINT_COUNT};
use crate::page::{build, fingerprint, free_gap, PageId, KIND_FP_LEAF};

/// The page id every node decoded here claims to be.
const ID: PageId = 7;
/// Probe keys searched in every node beside its own keys.
const PROBES: [&[u8]; 4] = [b"", b"\0", b"m", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff"];
/// At most this many of a node's own keys (and their neighbours) are searched back.
const OWN_PROBES: usize = 32;

/// A slotted node (inner node, comparison leaf or fingerprinting leaf: node kinds 1–3), as a
/// descent, a scan, a split and a compaction read it.
pub fn slotted_node(page: &[u8]) {
    let Ok(v) = Slotted::new(ID, page) else {
        return;
    };
    let _ = (v.lower_fence(), v.upper_fence(), v.prefix());
    let _ = (
        v.free_space(),
        v.free_space_after_compaction(),
        v.op_counter(),
    );
    let _ = (
        v.sorted(),
        v.fingerprints(),
        v.fp_capacity(),
        v.upper_child(),
    );
    let _ = free_gap(ID, page);
    if v.has_hints() {
        for i in 0..HINT_COUNT {
            let _ = v.hint(i);
        }
    }
    let _ = v
        .record_fields(0..v.count())
        .map(|fields| fields.for_each(drop));
    let mut probes: Vec<Vec<u8>> = PROBES.iter().map(|p| p.to_vec()).collect();
    for i in 0..v.count() {
        let _ = (v.lens(i), v.record_offset(i), v.value(i));
        if v.has_heads() {
            let _ = v.stored_head(i);
        }
        if !v.is_leaf() {
            let _ = v.child(i);
        }
        let mut key = Vec::new();
        if v.full_key_into(i, &mut key).is_ok() && i < OWN_PROBES {
            let mut after = key.clone();
            after.push(0);
            probes.push(after);
            probes.push(key);
        }
    }
    let _ = v.child(v.count());
    for probe in &probes {
        let _ = v.lower_bound(probe);
        if v.kind() == KIND_FP_LEAF {
            let stored = probe.get(v.prefix_len()..).unwrap_or_default();
            let _ = fingerprint::find(&v, stored);
            let _ = fingerprint::find_scalar(&v, stored);
        }
    }
    let _ = build::find_separator(&v);
    let mut out = vec![0u8; page.len()];
    let _ = build::rebuild_into(&v, &mut out);
}

/// A fully-dense leaf (node kind 5), as a lookup, a scan and a split read it.
pub fn dense_leaf(page: &[u8]) {
    let Ok(d) = Dense::new(ID, page) else {
        return;
    };
    let _ = (
        d.count(),
        d.key_len(),
        d.value_len(),
        d.reference(),
        d.op_counter(),
    );
    let _ = (
        d.shape(),
        d.lower_fence(),
        d.upper_fence(),
        free_gap(ID, page),
    );
    let mut key = Vec::new();
    for i in 0..d.capacity() {
        if d.present(i) {
            let _ = d.value(i);
            key.clear();
            d.key_into(i, &mut key);
            let _ = (d.slot_of(&key), d.lower_bound(&key));
        }
    }
    let _ = d.present(d.capacity());
    for probe in PROBES {
        let _ = (d.slot_of(probe), d.lower_bound(probe));
    }
}

/// A semi-dense leaf (node kind 4), as a lookup, a scan and a split read it.
pub fn semidense_leaf(page: &[u8]) {
    let Ok(s) = SemiDense::new(ID, page) else {
        return;
    };
    let _ = (
        s.count(),
        s.key_len(),
        s.reference(),
        s.base(),
        s.op_counter(),
    );
    let _ = (
        s.heap_start(),
        s.heap_used(),
        s.fixed_start(),
        s.free_space(),
    );
    let _ = (
        s.free_space_after_compaction(),
        s.shape(),
        free_gap(ID, page),
    );
    let _ = (s.lower_fence(), s.upper_fence());
    let mut key = Vec::new();
    for i in 0..s.slots() {
        let _ = s.record_offset(i);
        if let Ok(Some(_)) = s.value(i) {
            key.clear();
            s.key_into(i, &mut key);
            let _ = (s.slot_of(&key), s.lower_bound(&key));
        }
    }
    for probe in PROBES {
        let _ = (s.slot_of(probe), s.lower_bound(probe));
    }
}

/// A `Db` log record's payload (`docs/format.md`, "Log payloads"), decoded for a database of
/// 4 KiB pages, with every page image it carries restored over a page as redo does.
pub fn db_log_payload(payload: &[u8]) {
    let image_len = crate::page::DEFAULT_PAGE_SIZE - PAGE_HEADER_LEN;
    let Ok(record) = log::decode(1, payload, image_len) else {
        return;
    };
    let mut page = vec![0u8; image_len];
    let record = match record {
        Record::Runs { inner, .. } => *inner,
        other => other,
    };
    match record {
        Record::Pages { changed, .. } | Record::PagesEdit { changed, .. } => {
            for (_, image) in changed {
                image.restore(&mut page);
            }
        }
        Record::Put { .. }
        | Record::Delete { .. }
        | Record::Batch(_)
        | Record::BatchEnd
        | Record::Runs { .. } => {}
    }
}

/// The first page of an out-of-line value's run (`docs/format.md`, "Out-of-line values"),
/// checksummed as page 7 of kind 5 as it is, then its run header decoded as a read and
/// `check` decode it.
pub fn overflow_run_header(data: &[u8]) {
    let mut page = data.to_vec();
    page.resize(MIN_PAGE_SIZE, 0);
    page.truncate(MIN_PAGE_SIZE);
    let lsn = crate::io::page_header::lsn(&page);
    seal(&mut page, PageKind::OverflowValue, ID, lsn);
    let _ = crate::db::overflow::decode_run_header(&page, ID);
}

/// A bucket of long keys (`db::buckets`, a value of a `Db` of state version 6) under a 776-byte
/// prefix, as a get, put or scan reads it: decoded, every suffix searched, and encoded back to
/// exactly its bytes (the decoder accepts only what the encoder writes).
pub fn key_bucket(data: &[u8]) {
    use crate::db::buckets::{encode, Buckets, MARKER};
    let b = Buckets::for_tree(777);
    let mut tree_key = vec![0x5A; b.prefix];
    tree_key.push(MARKER);
    let Ok(entries) = b.decode(&tree_key, data) else {
        return;
    };
    for (suffix, _) in &entries {
        let found = entries.binary_search_by(|(s, _)| s.cmp(suffix));
        assert!(found.is_ok(), "a bucket's suffix is found again");
    }
    let mut again = Vec::new();
    encode(&entries, &mut again);
    assert!(again == data, "a decoded bucket encodes back to its bytes");
}

/// A page file whose meta pages are `data`'s first two pages (at the page size `data`'s
/// bytes 32..36 name, if legal, else the smallest), each checksummed as page 0 and page 1 as
/// they are; then open reads the free list, and every data page is read, one allocated and a
/// checkpoint written, as the fuzz target `page_file_open` does over unsealed bytes.
pub fn meta_page(data: &[u8]) {
    let named = data
        .get(32..36)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let page_size =
        if named.is_power_of_two() && (MIN_PAGE_SIZE..=crate::io::MAX_PAGE_SIZE).contains(&named) {
            named
        } else {
            MIN_PAGE_SIZE
        };
    let mut file = data.to_vec();
    file.resize(file.len().max(2 * page_size), 0);
    for id in 0..2 {
        let page = &mut file[id * page_size..(id + 1) * page_size];
        let lsn = crate::io::page_header::lsn(page);
        seal(page, PageKind::Meta, id as u64, lsn);
    }
    let Ok((pages, _meta)) = PageFile::open_io(Box::new(MemIo::new(file)), false) else {
        return;
    };
    let mut buf = pages.buffer(1);
    for id in FIRST_DATA_PAGE..pages.page_count().min(64) {
        let _ = pages.read_page(id, &mut buf, PageKind::BTreeLeaf);
    }
    // A memory file is not sparse: a checkpoint of a file counting more pages than the input
    // holds would allocate them all (a real file leaves a hole, or refuses the offset).
    if pages.page_count() > (data.len() / page_size) as u64 + 64 {
        return;
    }
    let _ = pages.allocate();
    let _ = pages.checkpoint(b"fuzz");
}

/// A page file whose free space (version 2: region bitmaps and directory overflow pages, kind
/// 2) is the input: every page of kind 2 is checksummed as such, the two meta pages as in
/// [`meta_page`], so the decoder of free-space pages and the rebuilding of the free space from
/// them run on whatever lies behind the checksums; a file that opens then allocates a page and a
/// run, frees them (one deferred) and checkpoints twice.
pub fn free_space(data: &[u8]) {
    let page_size = MIN_PAGE_SIZE;
    let mut file = data.to_vec();
    file.resize(file.len().max(2 * page_size).next_multiple_of(page_size), 0);
    for (id, page) in file.chunks_exact_mut(page_size).enumerate() {
        let kind = match (id, page[6]) {
            (0 | 1, _) => PageKind::Meta,
            (_, 2) => PageKind::FreeList,
            _ => continue,
        };
        let lsn = crate::io::page_header::lsn(page);
        seal(page, kind, id as u64, lsn);
    }
    let Ok((pages, _meta)) = PageFile::open_io(Box::new(MemIo::new(file)), false) else {
        return;
    };
    // As in `meta_page`: a memory file is not sparse.
    if pages.page_count() > (data.len() / page_size) as u64 + 64 {
        return;
    }
    let one = pages.allocate();
    let run = pages.allocate_run(3);
    let _ = pages.free(one);
    let _ = pages.free_run_deferred(run, 3);
    let _ = pages.checkpoint(b"fuzz");
    let _ = pages.checkpoint(b"fuzz");
}

/// One free-space page alone, as open decodes each page the meta page's directory names (its
/// checksum is open's to verify first, so none is needed here).
pub fn free_space_page(page: &[u8]) {
    if let Ok(crate::io::FreeSpacePage::Region { runs, .. }) =
        crate::io::decode_free_space_page(page)
    {
        let _marked: u64 = runs.iter().map(|&(_, pages)| pages).sum();
    }
}

/// The NB-tree's manifest bytes (`docs/format.md`, "NB-tree directory"), decoded as recovery
/// decodes them after the head page's checksum matched; every s-node of an accepted manifest
/// is walked. Returns whether the bytes were accepted.
pub fn nbtree_manifest(bytes: &[u8]) -> bool {
    fn walk(n: &crate::nbtree::manifest::RawNode) -> usize {
        let _ = (
            &n.keys,
            &n.start,
            n.live_records,
            n.live_bytes,
            n.dtree,
            &n.pieces,
        );
        1 + n.children.iter().map(walk).sum::<usize>()
    }
    // Both state versions' manifests (version 1 has no pieces).
    let v1 = crate::nbtree::manifest::decode(ID, bytes, 1).is_ok_and(|root| walk(&root) > 0);
    match crate::nbtree::manifest::decode(ID, bytes, 2) {
        Ok(root) => walk(&root) > 0 || v1,
        Err(_) => v1,
    }
}

/// An NB-tree d-tree's Bloom filter bytes, decoded as loading a d-tree does, then probed.
pub fn nbtree_bloom(bytes: &[u8]) {
    if let Ok(f) = crate::nbtree::bloom::Bloom::decode(ID, bytes.to_vec()) {
        for probe in PROBES {
            let _ = f.may_contain(crate::nbtree::bloom::hash(probe));
        }
        for i in 0..64u64 {
            let _ = f.may_contain(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        }
    }
}

/// An NB-tree log record's payload (types 64–66), decoded as redo decodes it.
pub fn nbtree_log_payload(payload: &[u8]) {
    let _ = crate::nbtree::log::decode(1, payload);
}

/// A dump stream (`docs/format.md`, "Dump stream") read and verified to its end, as `sylva
/// load` reads one; then the same bytes with a valid header in front, so the fuzzer explores
/// the records behind it.
pub fn dump_stream(data: &[u8]) {
    let _ = crate::db::verify_dump(data);
    let mut with_header = Vec::with_capacity(data.len() + 20);
    with_header.extend_from_slice(crate::db::dump::DUMP_MAGIC);
    with_header.extend_from_slice(&crate::db::dump::DUMP_VERSION.to_le_bytes());
    with_header.extend_from_slice(&[0u8; 4]);
    let crc = crc32c::crc32c(&with_header);
    with_header.extend_from_slice(&crc.to_le_bytes());
    with_header.extend_from_slice(data);
    let _ = crate::db::verify_dump(&with_header[..]);
}

/// A TreeLine page (kinds 16 and 17; `crate::treeline::page`), sealed as page 7: the header
/// and slotted body decoded, every record read, every own key and the probes looked up and
/// placed by the page's model, as recovery, a lookup, a scan and a flush read it.
pub fn treeline_page(data: &[u8]) {
    use crate::treeline::page::SegmentPage;
    let mut page = vec![0u8; MIN_PAGE_SIZE];
    let n = data.len().min(MIN_PAGE_SIZE);
    page[..n].copy_from_slice(&data[..n]);
    seal(&mut page, PageKind::SegmentPage, ID, 1);
    let Ok(p) = SegmentPage::new(ID, &page) else {
        return;
    };
    let _ = (p.count(), p.range());
    let mut records = Vec::new();
    if p.records_into(&mut records).is_err() {
        return;
    }
    let pages = p.header.pages as usize;
    for key in records
        .iter()
        .take(OWN_PROBES)
        .map(|r| r.0.as_slice())
        .chain(PROBES)
    {
        let _ = p.get(key);
        assert!(p.header.model.page_of(key, pages) < pages.max(1));
    }
}

/// Arbitrary bytes as a TreeLine log record's payload: decoding returns an error or a record,
/// never panics.
pub fn treeline_log_payload(payload: &[u8]) {
    let _ = crate::treeline::log::decode(1, payload);
}
