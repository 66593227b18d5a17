//! The miss path split for an asynchronous reader: [`BufferPool::begin_load`], the caller's
//! read through an [`exec`](crate::exec) backend, [`BufferPool::complete_load`].

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::exec::{self, Backend, Completion, Request};

/// A pool of 8 pages over 40 pages written with patterns: most are evicted.
fn evicted_pool(dir: &std::path::Path) -> (BufferPool, Vec<u64>) {
    let p = pool(dir, 8, None);
    let ids: Vec<u64> = (0..40u64)
        .map(|i| {
            let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
            write_pattern(&p, id, i * 1000);
            p.unlock(id, true);
            id
        })
        .collect();
    (p, ids)
}

/// Reads a load's frame through `backend` under `tag`.
fn submit(backend: &mut dyn Backend, file: exec::FileId, load: &Load, tag: u64) {
    let (buf, len) = load.frame();
    let request = Request::Read {
        file,
        buf,
        len: len as u32,
        offset: load.offset(),
    };
    // SAFETY: the frame is the load's alone until it completes, after its completion.
    unsafe { backend.submit(tag, request) }.expect("submit");
}

fn loads_complete_out_of_order(backend: &mut dyn Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, ids) = evicted_pool(dir.path());
    let file = backend.register(p.file().io().clone()).expect("register");
    let mut loads: Vec<Load> = Vec::new();
    for &id in &ids {
        if let Some(load) = p.begin_load(id).expect("begin") {
            assert!(
                p.begin_load(id).expect("again").is_none(),
                "page {id} loads once"
            );
            loads.push(load);
            if loads.len() == 6 {
                break;
            }
        }
    }
    assert_eq!(loads.len(), 6, "six evicted pages");
    for (tag, load) in loads.iter().enumerate() {
        submit(backend, file, load, tag as u64);
    }
    let mut done: Vec<Completion> = Vec::new();
    while done.len() < loads.len() {
        backend
            .complete(1, Some(Duration::from_secs(10)), &mut done)
            .expect("complete");
    }
    // Completed in reverse of submission: the order a device may choose.
    let mut slots: Vec<Option<Load>> = loads.into_iter().map(Some).collect();
    done.sort_by_key(|c| std::cmp::Reverse(c.tag));
    let mut loaded = Vec::new();
    for c in done {
        let load = slots[c.tag as usize]
            .take()
            .expect("one completion per load");
        let id = load.id();
        p.complete_load(load, c.result.map(|n| n as usize))
            .expect("complete_load");
        loaded.push(id);
    }
    for id in loaded {
        let i = ids.iter().position(|&x| x == id).expect("known page") as u64;
        assert_eq!(read_first_word(&p, id), i * 1000, "page {id}");
    }
}

#[test]
fn loads_read_through_inline_complete_out_of_order() {
    loads_complete_out_of_order(&mut exec::Inline::new());
}

#[test]
fn loads_read_through_io_uring_complete_out_of_order() {
    match exec::Uring::new(16) {
        Ok(mut ring) => loads_complete_out_of_order(&mut ring),
        Err(e) => eprintln!("skipped: io_uring unavailable here: {e}"),
    }
}

#[test]
fn a_reader_waits_for_a_load_in_progress() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, ids) = evicted_pool(dir.path());
    let p = Arc::new(p);
    let (load, i) = ids
        .iter()
        .enumerate()
        .find_map(|(i, &id)| p.begin_load(id).expect("begin").map(|l| (l, i)))
        .expect("an evicted page");
    let id = load.id();
    let reader = {
        let p = p.clone();
        std::thread::spawn(move || read_first_word(&p, id))
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !reader.is_finished(),
        "the reader went on before the load completed"
    );
    let (buf, len) = load.frame();
    // SAFETY: (test) the frame is the load's alone until it completes.
    let frame = unsafe { std::slice::from_raw_parts_mut(buf, len) };
    p.file().io().read_at(frame, load.offset()).expect("read");
    p.complete_load(load, Ok(len)).expect("complete");
    assert_eq!(reader.join().expect("reader"), i as u64 * 1000);
}

#[test]
fn a_short_or_corrupt_read_fails_its_load_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, ids) = evicted_pool(dir.path());
    let mut evicted = ids
        .iter()
        .filter_map(|&id| p.begin_load(id).expect("begin"));
    // Short: the file seemed to end before the page.
    let load = evicted.next().expect("an evicted page");
    let short = load.id();
    let err = p.complete_load(load, Ok(100)).expect_err("short read");
    assert!(
        matches!(err, Error::Corruption { page, .. } if page == short),
        "{err}"
    );
    // Corrupt: a byte flipped between the disk and the frame.
    let load = evicted.next().expect("another evicted page");
    let corrupt = load.id();
    let (buf, len) = load.frame();
    // SAFETY: (test) the frame is the load's alone until it completes.
    let frame = unsafe { std::slice::from_raw_parts_mut(buf, len) };
    p.file().io().read_at(frame, load.offset()).expect("read");
    frame[100] ^= 1;
    let err = p.complete_load(load, Ok(len)).expect_err("checksum");
    assert!(
        matches!(err, Error::ChecksumMismatch { page, .. } if page == corrupt),
        "{err}"
    );
    drop(evicted);
    // Both stay evicted and load again, intact, on the blocking path.
    for id in [short, corrupt] {
        let i = ids.iter().position(|&x| x == id).expect("known") as u64;
        assert_eq!(read_first_word(&p, id), i * 1000, "page {id}");
    }
}
