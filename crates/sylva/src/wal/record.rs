//! The bytes of the write-ahead log: the file header and the record frame.
//!
//! ```text
//! file header (32 bytes, at offset 0)
//!   0..8    magic  b"sylvaWAL"
//!   8..12   format version, u32 LE (2; 1 is still read)
//!   12..16  CRC32C of bytes 0..12 and 16..32, u32 LE
//!   16..24  start LSN: the LSN of the first record in the file, u64 LE
//!   24..32  zero (reserved)
//!
//! record, version 2 (20-byte frame + payload), records back to back from offset 32
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

/// Magic at the start of every log file.
pub(crate) const MAGIC: &[u8; 8] = b"sylvaWAL";
/// The log format version this build writes.
pub(crate) const VERSION: u32 = 2;
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
    let len = (payload.len() as u32).to_le_bytes();
    let mut tail = [0u8; FRAME_LEN - 8];
    tail[..8].copy_from_slice(&lsn.to_le_bytes());
    let tail = if version == 1 {
        &tail[..8]
    } else {
        let gap = u32::try_from(lsn.saturating_sub(synced_below)).unwrap_or(u32::MAX);
        tail[8..].copy_from_slice(&gap.to_le_bytes());
        &tail[..]
    };
    let crc = crc32c::crc32c_append(crc32c::crc32c_append(crc32c::crc32c(&len), tail), payload);
    out.extend_from_slice(&len);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(tail);
    out.extend_from_slice(payload);
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
}
