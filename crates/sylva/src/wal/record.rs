//! The bytes of the write-ahead log: the file header and the record frame.
//!
//! ```text
//! file header (32 bytes, at offset 0)
//!   0..8    magic  b"sylvaWAL"
//!   8..12   format version, u32 LE (1)
//!   12..16  CRC32C of bytes 0..12 and 16..32, u32 LE
//!   16..24  start LSN: the LSN of the first record in the file, u64 LE
//!   24..32  zero (reserved)
//!
//! record (16-byte frame + payload), records back to back from offset 32
//!   0..4    payload length, u32 LE (at most MAX_PAYLOAD)
//!   4..8    CRC32C of bytes 0..4, 8..16 and the payload, u32 LE
//!   8..16   LSN, u64 LE: one more than the previous record's
//!   16..    payload
//! ```

/// Magic at the start of every log file.
pub(crate) const MAGIC: &[u8; 8] = b"sylvaWAL";
/// The log format version this build writes and reads.
pub(crate) const VERSION: u32 = 1;
/// Bytes of the file header.
pub(crate) const HEADER_LEN: u64 = 32;
/// Bytes of a record frame before the payload.
pub(crate) const FRAME_LEN: usize = 16;
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
    Valid { start_lsn: u64 },
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
    if version != VERSION {
        return Header::WrongVersion(version);
    }
    let mut lsn = [0u8; 8];
    lsn.copy_from_slice(&h[16..24]);
    Header::Valid {
        start_lsn: u64::from_le_bytes(lsn),
    }
}

/// Appends one record frame and payload to `out`.
pub(crate) fn encode_record(out: &mut Vec<u8>, lsn: u64, payload: &[u8]) {
    let len = (payload.len() as u32).to_le_bytes();
    let lsn_bytes = lsn.to_le_bytes();
    let crc = crc32c::crc32c_append(
        crc32c::crc32c_append(crc32c::crc32c(&len), &lsn_bytes),
        payload,
    );
    out.extend_from_slice(&len);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&lsn_bytes);
    out.extend_from_slice(payload);
}

/// Decodes the record at the start of `bytes`: `Some((lsn, payload, total bytes))`, or `None` if
/// the bytes there are not a whole, intact record.
pub(crate) fn decode_record(bytes: &[u8]) -> Option<(u64, &[u8], usize)> {
    let frame = bytes.get(..FRAME_LEN)?;
    let len = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    if len > MAX_PAYLOAD {
        return None;
    }
    let crc = u32::from_le_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let mut lsn = [0u8; 8];
    lsn.copy_from_slice(&frame[8..16]);
    let payload = bytes.get(FRAME_LEN..FRAME_LEN + len)?;
    let want = crc32c::crc32c_append(
        crc32c::crc32c_append(crc32c::crc32c(&frame[0..4]), &lsn),
        payload,
    );
    (crc == want).then_some((u64::from_le_bytes(lsn), payload, FRAME_LEN + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_rejects_damage() {
        let h = encode_header(77);
        assert_eq!(decode_header(&h), Header::Valid { start_lsn: 77 });
        let mut bad = h;
        bad[20] ^= 1;
        assert_eq!(decode_header(&bad), Header::BadChecksum);
        let mut foreign = h;
        foreign[0] = b'X';
        assert_eq!(decode_header(&foreign), Header::WrongMagic);
    }

    #[test]
    fn records_round_trip_and_any_flipped_bit_is_detected() {
        let mut buf = Vec::new();
        encode_record(&mut buf, 5, b"hello, log");
        assert_eq!(
            decode_record(&buf),
            Some((5, &b"hello, log"[..], buf.len()))
        );
        for bit in 0..buf.len() * 8 {
            let mut damaged = buf.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(
                decode_record(&damaged).map(|r| r.0),
                None,
                "flipped bit {bit} went unnoticed"
            );
        }
        assert_eq!(
            decode_record(&buf[..buf.len() - 1]),
            None,
            "a cut record is not a record"
        );
    }
}
