//! The bytes of the write-ahead log: the file header and the record frame.
//!
//! ```text
//! file header (32 bytes, at offset 0)
//!   0..8    magic  b"sylvaWAL"
//!   8..12   format version, u32 LE (5; 4, 3, 2 and 1 are still read)
//!   12..16  CRC32C of bytes 0..12 and 16..32, u32 LE
//!   16..24  start LSN: the LSN of the first record in the file, u64 LE
//!   24..32  zero (reserved)
//!
//! record, versions 2 and 3 (20-byte frame + payload), records back to back from offset 32
//!   0..4    payload length, u32 LE (at most MAX_PAYLOAD)
//!   4..8    CRC32C of bytes 0..4, 8..20 and the payload, u32 LE
//!   8..16   LSN, u64 LE: one more than the previous record's
//!   16..20  synced gap, u32 LE: when this record was appended, every record with an LSN below
//!           LSN - gap was durable (fsynced); u32::MAX means "no claim that far back"
//!   20..    payload
//!
//! record, version 1 (16-byte frame): bytes 0..16 as above without the synced gap; the CRC
//! covers bytes 0..4, 8..16 and the payload.
//! ```
//!
//! The synced gap lets recovery tell a hole that lost acknowledged records from one in a tail
//! that was never synced (see [`super::Wal::open_strict`]).
//!
//! **Versions.** 1: 16-byte frames. 2: the synced gap. 3: the frame of 2; the number says the
//! log may hold payloads an older build cannot decode (`Db`'s PAGES_EDIT), so such a build
//! refuses the log as a newer version instead of reporting a corrupt one. Builds from the one
//! that added PAGES_EDIT until version 3 wrote it into version 2 logs (and into version 1 logs
//! they appended to), so this build decodes every payload type in a log of any version. A log
//! of an older version is appended to in its own frame format until a truncation or rotation
//! rewrites its header as the current version. 4: the frame of 2; the log may hold `Db`'s RUNS
//! records (out-of-line values), which a version 3 build cannot decode. 5: the frame of 2; a
//! RUNS record may name a run whose value it does not carry and which reaches the page file only
//! with the log's next sync (`Db`'s values over `logged_value_max`): recovery checks such runs
//! in records the crash may have left unsynced, which a version 4 build would not.
//!
//! **Record types.** A payload's first byte is its record type, and each engine owns a range of
//! them ([`RecordOwner`]), so that one engine's decoder meeting another's record (a directory
//! opened by the wrong engine, or damage) reports whose it is instead of misreading it.

use crate::error::Error;

/// Magic at the start of every log file.
pub(crate) const MAGIC: &[u8; 8] = b"sylvaWAL";
/// The log format version this build writes (module docs, "Versions").
pub(crate) const VERSION: u32 = 5;
/// The oldest log format version this build reads (and appends to until the next truncation).
pub(crate) const OLDEST_VERSION: u32 = 1;
/// Bytes of the file header.
pub(crate) const HEADER_LEN: u64 = 32;
/// Bytes of a record frame before the payload (version 2).
pub(crate) const FRAME_LEN: usize = 20;
/// Bytes of a version 1 record frame.
pub(crate) const FRAME_LEN_V1: usize = 16;
/// Largest payload a record may carry; a larger length field is corruption.
pub const MAX_PAYLOAD: usize = 64 << 20;

/// The engines that write records into a log, each owning a range of record types (a
/// payload's first byte; `docs/format.md`, "Record types"). 0 and 96–255 are unassigned. A
/// type, once given, is never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordOwner {
    /// `Db`'s tree, types 1–31 (1–6 in use), and the PA-Tree mode, which runs the same tree
    /// and so writes the same records.
    Db,
    /// TreeLine (issue 21), types 32–63, reserved.
    TreeLine,
    /// The NB-tree (issue 22), types 64–95, reserved.
    NbTree,
}

impl RecordOwner {
    /// Every owner, in the order of their ranges.
    pub const ALL: [RecordOwner; 3] = [RecordOwner::Db, RecordOwner::TreeLine, RecordOwner::NbTree];

    /// The first and last record type of the owner's range.
    pub const fn types(self) -> (u8, u8) {
        match self {
            RecordOwner::Db => (1, 31),
            RecordOwner::TreeLine => (32, 63),
            RecordOwner::NbTree => (64, 95),
        }
    }

    /// Whether record type `t` is in the owner's range.
    pub const fn owns(self, t: u8) -> bool {
        let (first, last) = self.types();
        first <= t && t <= last
    }

    /// The owner of record type `t`, if it is assigned.
    pub fn of(t: u8) -> Option<RecordOwner> {
        Self::ALL.into_iter().find(|o| o.owns(t))
    }

    /// The owner's name in messages.
    pub const fn name(self) -> &'static str {
        match self {
            RecordOwner::Db => "Db",
            RecordOwner::TreeLine => "TreeLine",
            RecordOwner::NbTree => "the NB-tree",
        }
    }

    /// The error for the record at `lsn` whose type `t` the decoder of this owner does not
    /// know: a type of its own range that this build does not write, another engine's type, or
    /// an unassigned one. An [`Error::LogCorruption`] that says which.
    pub fn unknown_type(self, lsn: u64, t: u8) -> Error {
        let (first, last) = self.types();
        let detail = match Self::of(t) {
            Some(o) if o == self => format!(
                "record {lsn}: record type {t} is in {}'s range ({first}–{last}) but not one \
                 this build writes",
                self.name()
            ),
            Some(o) => {
                let (f, l) = o.types();
                format!(
                    "record {lsn}: record type {t} is {}'s ({f}–{l}), not {}'s ({first}–{last}): \
                     a log another engine wrote?",
                    o.name(),
                    self.name()
                )
            }
            None => format!("record {lsn}: record type {t} is unassigned"),
        };
        Error::LogCorruption { path: None, detail }
    }
}

/// Encodes the file header.
pub(crate) fn encode_header(start_lsn: u64) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&start_lsn.to_le_bytes());
    let crc = header_crc(&h);
    h[12..16].copy_from_slice(&crc.to_le_bytes());
    h
}

fn header_crc(h: &[u8; HEADER_LEN as usize]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&h[0..12]), &h[16..32])
}

/// What a header says, or why it cannot be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Header {
    Valid { start_lsn: u64, version: u32 },
    WrongMagic,
    WrongVersion(u32),
    BadChecksum,
}

/// Decodes the file header.
pub(crate) fn decode_header(h: &[u8; HEADER_LEN as usize]) -> Header {
    if &h[0..8] != MAGIC {
        return Header::WrongMagic;
    }
    let crc = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
    if crc != header_crc(h) {
        return Header::BadChecksum;
    }
    let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        return Header::WrongVersion(version);
    }
    let mut lsn = [0u8; 8];
    lsn.copy_from_slice(&h[16..24]);
    Header::Valid {
        start_lsn: u64::from_le_bytes(lsn),
        version,
    }
}

/// A record as read back.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Decoded<'a> {
    pub lsn: u64,
    /// Every record below this LSN was durable when this one was appended (version 2; `None`
    /// for version 1 records, which make no claim).
    pub synced_below: Option<u64>,
    pub payload: &'a [u8],
    /// Frame and payload bytes.
    pub size: usize,
}

/// Appends one record frame and payload to `out` in the format of log `version`.
/// `synced_below`: every record with a lower LSN is durable (at most `lsn`).
pub(crate) fn encode_record(
    out: &mut Vec<u8>,
    version: u32,
    lsn: u64,
    synced_below: u64,
    payload: &[u8],
) {
    let start = out.len();
    out.reserve(FRAME_LEN + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]); // the CRC, below
    out.extend_from_slice(&lsn.to_le_bytes());
    if version != 1 {
        let gap = u32::try_from(lsn.saturating_sub(synced_below)).unwrap_or(u32::MAX);
        out.extend_from_slice(&gap.to_le_bytes());
    }
    out.extend_from_slice(payload);
    // The CRC covers the length, then the rest of the frame and the payload, which follow it
    // in `out` with only the CRC's own bytes between: two passes instead of one per piece (each
    // pass has a fixed cost that, for a small record, is most of the work).
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[start..start + 4]), &out[start + 8..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes the record of log `version` at the start of `bytes`, or `None` if the bytes there
/// are not a whole, intact record.
pub(crate) fn decode_record(bytes: &[u8], version: u32) -> Option<Decoded<'_>> {
    let frame_len = if version == 1 {
        FRAME_LEN_V1
    } else {
        FRAME_LEN
    };
    let frame = bytes.get(..frame_len)?;
    let len = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    if len > MAX_PAYLOAD {
        return None;
    }
    let crc = u32::from_le_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let payload = bytes.get(frame_len..frame_len + len)?;
    let want = crc32c::crc32c_append(
        crc32c::crc32c_append(crc32c::crc32c(&frame[0..4]), &frame[8..]),
        payload,
    );
    if crc != want {
        return None;
    }
    let mut lsn = [0u8; 8];
    lsn.copy_from_slice(&frame[8..16]);
    let lsn = u64::from_le_bytes(lsn);
    let synced_below = (version != 1).then(|| {
        match u32::from_le_bytes([frame[16], frame[17], frame[18], frame[19]]) {
            u32::MAX => 0,
            gap => lsn.saturating_sub(u64::from(gap)),
        }
    });
    Some(Decoded {
        lsn,
        synced_below,
        payload,
        size: frame_len + len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_rejects_damage() {
        let h = encode_header(77);
        assert_eq!(
            decode_header(&h),
            Header::Valid {
                start_lsn: 77,
                version: VERSION
            }
        );
        let mut bad = h;
        bad[20] ^= 1;
        assert_eq!(decode_header(&bad), Header::BadChecksum);
        let mut foreign = h;
        foreign[0] = b'X';
        assert_eq!(decode_header(&foreign), Header::WrongMagic);
    }

    #[test]
    fn records_round_trip_in_both_versions_and_any_flipped_bit_is_detected() {
        for (version, synced) in [(1, None), (2, Some(3)), (2, Some(5))] {
            let mut buf = Vec::new();
            encode_record(&mut buf, version, 5, synced.unwrap_or(0), b"hello, log");
            assert_eq!(
                decode_record(&buf, version),
                Some(Decoded {
                    lsn: 5,
                    synced_below: synced,
                    payload: &b"hello, log"[..],
                    size: buf.len()
                })
            );
            for bit in 0..buf.len() * 8 {
                let mut damaged = buf.clone();
                damaged[bit / 8] ^= 1 << (bit % 8);
                assert_eq!(
                    decode_record(&damaged, version).map(|r| r.lsn),
                    None,
                    "version {version}: flipped bit {bit} went unnoticed"
                );
            }
            assert_eq!(
                decode_record(&buf[..buf.len() - 1], version),
                None,
                "a cut record is not a record"
            );
        }
    }

    #[test]
    fn a_synced_point_too_far_back_makes_no_claim() {
        let mut buf = Vec::new();
        encode_record(&mut buf, 2, 10 << 32, 1, b"x");
        assert_eq!(
            decode_record(&buf, 2).map(|r| r.synced_below),
            Some(Some(0))
        );
    }

    #[test]
    fn record_types_belong_to_one_owner_each_and_unknown_ones_say_whose_they_are() {
        for t in 0..=255u8 {
            let owners: Vec<_> = RecordOwner::ALL.iter().filter(|o| o.owns(t)).collect();
            assert!(owners.len() <= 1, "type {t}: {owners:?}");
            assert_eq!(
                RecordOwner::of(t).is_some(),
                (1..=95).contains(&t),
                "type {t}"
            );
        }
        let detail = |e: Error| match e {
            Error::LogCorruption { path: None, detail } => detail,
            e => panic!("{e:?}"),
        };
        let own = detail(RecordOwner::Db.unknown_type(9, 7));
        assert!(
            own.contains("record 9") && own.contains("Db's range (1–31)"),
            "{own}"
        );
        let foreign = detail(RecordOwner::Db.unknown_type(9, 40));
        assert!(foreign.contains("TreeLine's (32–63)"), "{foreign}");
        let foreign = detail(RecordOwner::TreeLine.unknown_type(9, 64));
        assert!(foreign.contains("the NB-tree's (64–95)"), "{foreign}");
        let unassigned = detail(RecordOwner::NbTree.unknown_type(9, 0));
        assert!(unassigned.contains("unassigned"), "{unassigned}");
    }
}
