//! Read-ahead for a merge's d-tree cursor: a thread reads a d-tree's next leaves while the
//! merger works through the ones it has.
//!
//! A merge reads each d-tree it rewrites from start to end, a run of at most 1 MiB at a time, and
//! the page file is opened with `O_DIRECT`, so no kernel read-ahead overlaps those reads with the
//! merging: the merger waited for each read, then merged its records, then waited for the next.
//! Here one thread per cursor reads the runs in order into two buffers: while the cursor goes
//! through one, the thread fills the other. The buffers go back and forth, never made again (a
//! buffer is zeroed when made). The thread holds the d-tree (`Arc`), so its runs are not freed
//! under it; it ends at the last leaf, at the first failed read (whose error the cursor gets in
//! order), or when the cursor is dropped.

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;

use super::dtree::DTree;
use crate::error::Result;
use crate::io::page_header::PageKind;
use crate::io::AlignedBuf;

/// A run of leaves read: its first page in the file, its leaf count, and its bytes.
pub(crate) type Run = (u64, usize, AlignedBuf);

/// The reading thread's end of a cursor.
pub(crate) struct ReadAhead {
    runs: Receiver<Result<Run>>,
    spent: SyncSender<AlignedBuf>,
}

impl ReadAhead {
    /// Starts reading `tree`'s leaves from logical leaf `from`, `per_read` at a time, into a
    /// second buffer beside the cursor's.
    pub(crate) fn start(tree: Arc<DTree>, from: u64, per_read: usize) -> Result<ReadAhead> {
        let (runs_tx, runs) = mpsc::sync_channel(1);
        let (spent, spent_rx) = mpsc::sync_channel(1);
        let buf = tree.file().buffer(per_read);
        std::thread::Builder::new()
            .name("sylva-nb-read-ahead".into())
            .spawn(move || read_runs(&tree, from, per_read, buf, &runs_tx, &spent_rx))?;
        Ok(ReadAhead { runs, spent })
    }

    /// Puts the next run into `buf`, handing the buffer it held (which the cursor has gone
    /// through) back for a later one: the run's first page and leaf count; `None` after the
    /// last leaf.
    pub(crate) fn next(&self, buf: &mut AlignedBuf) -> Option<Result<(u64, usize)>> {
        let run = match self.runs.recv().ok()? {
            Ok(run) => run,
            Err(e) => return Some(Err(e)),
        };
        let (first, n, filled) = run;
        let done = std::mem::replace(buf, filled);
        // The thread may have ended (after the last run): nothing to hand on then.
        let _ = self.spent.send(done);
        Some(Ok((first, n)))
    }
}

fn read_runs(
    tree: &DTree,
    mut next: u64,
    per_read: usize,
    first_buf: AlignedBuf,
    runs: &SyncSender<Result<Run>>,
    spent: &Receiver<AlignedBuf>,
) {
    let end = u64::from(tree.extent.leaf_pages);
    let kinds = vec![PageKind::DTreeLeaf; per_read];
    let mut spare = Some(first_buf);
    while next < end {
        let Some(mut buf) = spare.take().or_else(|| spent.recv().ok()) else {
            return; // the cursor was dropped
        };
        let read = tree.next_run(next, per_read).and_then(|(first, n)| {
            tree.file().read_run(first, &mut buf, &kinds[..n])?;
            Ok((first, n))
        });
        let (run, failed) = match read {
            Ok((first, n)) => {
                next += n as u64;
                (Ok((first, n, buf)), false)
            }
            Err(e) => (Err(e), true),
        };
        if runs.send(run).is_err() || failed {
            return;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use crate::error::Error;
    use crate::io::PageFile;
    use crate::nbtree::dtree::{Bound, DTree, Writer, TAG_PUT};

    fn key(i: u32) -> [u8; 8] {
        u64::from(i * 3).to_be_bytes()
    }

    fn tagged(i: u32) -> Vec<u8> {
        let mut v = vec![TAG_PUT];
        v.extend(std::iter::repeat_n((i % 251) as u8, 128));
        v
    }

    /// A d-tree of `n` records in a fresh page file: more than four 1 MiB reads of leaves at
    /// 30,000.
    fn tree(dir: &std::path::Path, n: u32) -> Arc<DTree> {
        let file = Arc::new(PageFile::create(&dir.join("pages"), 4096, false).unwrap());
        let mut bound = Bound::default();
        for i in 0..n {
            bound.record(&key(i), &tagged(i));
        }
        let mut w = Writer::new(&file, bound, 10, None, 1 << 30);
        for i in 0..n {
            w.push(&key(i), &tagged(i)).unwrap();
        }
        Arc::new(w.finish().unwrap().unwrap())
    }

    fn read_all(t: &Arc<DTree>, from: &[u8]) -> crate::error::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut c = t.cursor(from, true)?;
        let mut out = Vec::new();
        while let Some((k, v)) = c.next_record()? {
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    #[test]
    fn a_merge_cursor_reads_every_record_in_order_through_the_read_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let t = tree(dir.path(), 30_000);
        assert!(
            t.extent.leaf_pages > 3 * 256,
            "{} leaves",
            t.extent.leaf_pages
        );
        let all = read_all(&t, &[]).unwrap();
        let want: Vec<_> = (0..30_000).map(|i| (key(i).to_vec(), tagged(i))).collect();
        assert_eq!(all, want);
        // From a key in the middle (not a record's: between two).
        let from = (3 * 7_001u64 + 1).to_be_bytes();
        assert_eq!(read_all(&t, &from).unwrap(), want[7_002..]);
        // A cursor dropped early stops its thread (the test would hang on a leaked one only
        // at the end of the process; this one just must not block the drop).
        let mut c = t.cursor(&[], true).unwrap();
        assert!(c.next_record().unwrap().is_some());
        drop(c);
    }

    #[test]
    fn a_damaged_leaf_ahead_is_an_error_in_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let t = tree(dir.path(), 30_000);
        let bad_leaf = 600;
        let page = t.pieces.page(bad_leaf).unwrap();
        let path = dir.path().join("pages");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[page as usize * 4096 + 2000] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let mut c = t.cursor(&[], true).unwrap();
        let mut read = 0;
        let err = loop {
            match c.next_record() {
                Ok(Some(_)) => read += 1,
                Ok(None) => panic!("the damaged leaf was read without an error"),
                Err(e) => break e,
            }
        };
        assert!(matches!(err, Error::ChecksumMismatch { .. }), "{err:?}");
        // Every record of the leaves before the damaged one's run came first.
        assert!(read >= 512 * 27, "{read} records before the error");
    }
}
