//! Recovery's reading of the log: each segment scanned for its intact records (the cut, and
//! intact records beyond it), the segments arranged in LSN order, and [`Wal::replay`] reading
//! the records again through a bounded window (module docs of [`super`], "Recovery").

use super::record::{decode_record, Decoded, FRAME_LEN, FRAME_LEN_V1, MAX_PAYLOAD};
use super::{decode_header, encode_header, Header, Wal, HEADER_LEN, VERSION};
use crate::error::{Error, Result};
use crate::io::Io;

/// What recovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// Intact records recovery found (read them with [`Wal::replay`]), in the segments it uses.
    pub records: u64,
    /// Bytes of torn tail that were cut off (0 after a clean shutdown).
    pub cut_bytes: u64,
    /// File offset of an intact record with a later LSN found beyond the cut, if any.
    pub intact_after_cut: Option<u64>,
    /// An intact record beyond the cut says the cut's first LSN had been synced: the damage lost
    /// durable records (a version 1 log, whose records make no claim, counts any intact record
    /// beyond the cut).
    pub hole_was_synced: bool,
}

/// Which of the scanned segments is the active one (appends continue there), and whose records
/// recovery returns, in LSN order. One segment: itself. Two: both when the newer one continues
/// the older one, else the newer one when the older is no longer needed (`min_next_lsn` is in
/// the newer one); an empty segment is the active one only if it continues the other (a
/// rotation happened just before the crash). `Err` names a gap in records recovery needs.
pub(super) fn arrange(
    scans: &[Scan],
    min_next_lsn: u64,
) -> std::result::Result<(usize, Vec<usize>), String> {
    if scans.len() == 1 {
        return Ok((0, vec![0]));
    }
    let full = |i: usize| scans[i].count > 0;
    let end = |i: usize| scans[i].start_lsn + scans[i].count;
    Ok(match (full(0), full(1)) {
        (false, false) => (usize::from(scans[1].start_lsn > scans[0].start_lsn), vec![]),
        (true, false) | (false, true) => {
            let x = usize::from(full(1));
            let e = 1 - x;
            let continues = scans[e].start_lsn == end(x) && scans[x].end == scans[x].len;
            (if continues { e } else { x }, vec![x])
        }
        (true, true) => {
            let (old, new) = if scans[0].start_lsn < scans[1].start_lsn {
                (0, 1)
            } else {
                (1, 0)
            };
            if end(old) == scans[new].start_lsn {
                (new, vec![old, new])
            } else if scans[new].start_lsn <= min_next_lsn {
                (new, vec![new])
            } else {
                return Err(format!(
                    "records {} to {} are missing (one segment ends before the other begins)",
                    end(old),
                    scans[new].start_lsn - 1
                ));
            }
        }
    })
}

pub(super) struct Scan {
    /// The file's length.
    pub(super) len: u64,
    /// Intact records from the header on.
    pub(super) count: u64,
    /// Offset just past the last intact record.
    pub(super) end: u64,
    pub(super) start_lsn: u64,
    pub(super) version: u32,
    pub(super) intact_after_cut: Option<u64>,
    pub(super) hole_was_synced: bool,
    /// The highest LSN its intact records claim every record below was durable at (the synced
    /// gap of their frames; 0 if none claims anything).
    pub(super) claimed_below: u64,
}

impl Scan {
    /// A new, empty file whose header names `start_lsn`.
    pub(super) fn empty(start_lsn: u64) -> Scan {
        Scan {
            len: HEADER_LEN,
            count: 0,
            end: HEADER_LEN,
            start_lsn,
            version: VERSION,
            intact_after_cut: None,
            hole_was_synced: false,
            claimed_below: 0,
        }
    }
}

pub(super) fn recover(io: &dyn Io, len: u64, min_next_lsn: u64) -> Result<Scan> {
    let path = io.path().to_path_buf();
    if len < HEADER_LEN {
        return Err(Error::NotSylva {
            path,
            expected: "write-ahead log",
            detail: format!("{len} bytes is shorter than the {HEADER_LEN}-byte header"),
        });
    }
    let mut header = [0u8; HEADER_LEN as usize];
    io.read_at(&mut header, 0)?;
    let (start_lsn, version) = match decode_header(&header) {
        Header::Valid { start_lsn, version } => (start_lsn, version),
        Header::WrongMagic => {
            return Err(Error::NotSylva {
                path,
                expected: "write-ahead log",
                detail: "wrong magic bytes".into(),
            })
        }
        Header::WrongVersion(found) => {
            return Err(Error::UnsupportedVersion {
                path,
                found,
                supported: VERSION,
            })
        }
        // A header torn while a truncation rewrote it, over an empty log: nothing was lost.
        Header::BadChecksum if len == HEADER_LEN => {
            io.write_at(&encode_header(min_next_lsn), 0)?;
            io.sync()?;
            (min_next_lsn, VERSION)
        }
        Header::BadChecksum => {
            return Err(Error::LogCorruption {
                path: Some(path),
                detail: "header checksum mismatch".into(),
            })
        }
    };
    // The records are checked front to back through a bounded window (not read whole into
    // memory): recovery's memory does not grow with the log.
    let mut window = Window::new(io, len);
    let mut at = HEADER_LEN;
    let mut count = 0u64;
    let mut expect = start_lsn;
    let mut claimed_below = 0;
    while let Some(r) = window.record(at, version, expect)? {
        if r.lsn != expect {
            break;
        }
        claimed_below = claimed_below.max(r.synced_below.unwrap_or(0));
        at += r.size as u64;
        count += 1;
        expect += 1;
    }
    // Beyond the cut: intact records with later LSNs, and whether one of them says the first
    // missing LSN (`expect`) had been synced.
    let mut intact_after_cut = None;
    let mut hole_was_synced = false;
    let mut q = at + 1;
    while q < len && !hole_was_synced {
        match window.record(q, version, expect)? {
            Some(r) if r.lsn >= expect => {
                intact_after_cut.get_or_insert(q);
                hole_was_synced = r.synced_below.is_none_or(|s| s > expect);
                q += r.size as u64;
            }
            _ => q += 1,
        }
    }
    Ok(Scan {
        len,
        count,
        end: at,
        start_lsn,
        version,
        intact_after_cut,
        hole_was_synced,
        claimed_below,
    })
}

/// Where the records of one segment that recovery found lie, for [`Wal::replay`].
pub(super) struct Recovery {
    pub(super) segment: usize,
    /// Offset just past the last of them.
    pub(super) end: u64,
    pub(super) version: u32,
    pub(super) first_lsn: u64,
    pub(super) count: u64,
}

/// Reads a log file through a window of at least [`Window::CHUNK`] bytes (or one record, if
/// larger), so recovery holds at most that much of the file at a time.
struct Window<'a> {
    io: &'a dyn Io,
    len: u64,
    buf: Vec<u8>,
    /// The file offset of `buf[0]`.
    start: u64,
}

impl<'a> Window<'a> {
    const CHUNK: usize = 1 << 20;

    fn new(io: &'a dyn Io, len: u64) -> Self {
        Window {
            io,
            len,
            buf: Vec::new(),
            start: 0,
        }
    }

    /// Up to `need` bytes from offset `at` (fewer at the end of the file).
    fn bytes(&mut self, at: u64, need: usize) -> Result<&[u8]> {
        let end = at.saturating_add(need as u64).min(self.len);
        let have = self.start + self.buf.len() as u64;
        if at < self.start || end > have {
            let n = (end.saturating_sub(at))
                .max(Self::CHUNK as u64)
                .min(self.len.saturating_sub(at)) as usize;
            self.buf.resize(n, 0);
            self.io.read_at(&mut self.buf, at)?;
            self.start = at;
        }
        let from = (at - self.start) as usize;
        let to = (end.max(at) - self.start) as usize;
        Ok(&self.buf[from..to])
    }

    /// The intact record at `at`, if there is one whose LSN is at least `min_lsn` (a record
    /// with an older LSN is not looked at whole: beyond a cut, most offsets are not records,
    /// and reading a garbage length's worth of bytes at each would be slow).
    fn record(&mut self, at: u64, version: u32, min_lsn: u64) -> Result<Option<Decoded<'_>>> {
        let frame_len = if version == 1 {
            FRAME_LEN_V1
        } else {
            FRAME_LEN
        };
        let frame = self.bytes(at, frame_len)?;
        if frame.len() < frame_len {
            return Ok(None);
        }
        let len = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        let mut lsn = [0u8; 8];
        lsn.copy_from_slice(&frame[8..16]);
        if len > MAX_PAYLOAD || u64::from_le_bytes(lsn) < min_lsn {
            return Ok(None);
        }
        Ok(decode_record(self.bytes(at, frame_len + len)?, version))
    }
}

impl Wal {
    /// Calls `apply` with every record recovery found (LSN and payload), in LSN order, reading
    /// the segments again through a bounded window: the memory it needs does not grow with the
    /// log. Call it before appending (it reads what the log held when opened).
    pub fn replay(&self, mut apply: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<()> {
        self.replay_until(|lsn, payload| apply(lsn, payload).map(|()| true))
            .map(drop)
    }

    /// [`Wal::replay`], except that `apply` may say that the log really ends before a record
    /// (returning `false`): that record and every later one are cut off the log, as a torn
    /// tail is, and the next record appended takes its LSN. Only records a crash may have left
    /// unsynced can be cut so: a record in a segment that another continues was synced, and
    /// cutting it is refused as corruption. Returns the bytes cut.
    pub fn replay_until(&self, mut apply: impl FnMut(u64, &[u8]) -> Result<bool>) -> Result<u64> {
        let mut recovered = self.recovered.lock();
        for (i, r) in recovered.iter().enumerate() {
            let io = &*self.segments[r.segment];
            let mut window = Window::new(io, r.end);
            let mut at = HEADER_LEN;
            for lsn in r.first_lsn..r.first_lsn + r.count {
                let Some(record) = window.record(at, r.version, lsn)? else {
                    return Err(Error::LogCorruption {
                        path: Some(io.path().to_path_buf()),
                        detail: format!(
                            "record {lsn} at offset {at}, intact when the log was opened, no longer is"
                        ),
                    });
                };
                if !apply(record.lsn, record.payload)? {
                    let (segment, end) = (r.segment, r.end);
                    self.cut_at(segment, at, lsn)?;
                    recovered.truncate(i + 1);
                    recovered[i].count = lsn - recovered[i].first_lsn;
                    recovered[i].end = at;
                    return Ok(end - at);
                }
                at += record.size as u64;
            }
        }
        Ok(0)
    }

    /// Cuts the log at record `lsn`, at offset `at` of `segment`: the file ends there, durably,
    /// and appends continue from it with that LSN.
    fn cut_at(&self, segment: usize, at: u64, lsn: u64) -> Result<()> {
        let mut st = self.state.lock();
        let io = &*self.segments[segment];
        if segment != st.active || lsn < self.claimed_below {
            return Err(Error::LogCorruption {
                path: Some(io.path().to_path_buf()),
                detail: format!(
                    "record {lsn} at offset {at} had been synced, but what it needs from the page \
                     file is not there"
                ),
            });
        }
        if !st.buf.is_empty() || st.flushing || st.next_lsn < lsn {
            return Err(Error::InvalidArgument {
                what: "the log was appended to before its recovered records were replayed".into(),
                limit: 0,
            });
        }
        io.set_file_len(at)?;
        io.sync()?;
        st.write_offset = at;
        st.next_lsn = lsn;
        st.durable_below = lsn;
        st.uncached_below = st.uncached_below.min(at & !(super::OS_PAGE - 1));
        Ok(())
    }

    /// Every record recovery found, in memory (for tests and tools; recovery itself uses
    /// [`Wal::replay`]).
    pub fn recovered_records(&self) -> Result<Vec<(u64, Vec<u8>)>> {
        let mut out = Vec::new();
        self.replay(|lsn, payload| {
            out.push((lsn, payload.to_vec()));
            Ok(())
        })?;
        Ok(out)
    }
}
