//! Dump and load: a database's records as a portable, checksummed byte stream (issue 23), to
//! move contents between machines, format versions and page sizes (`sylva dump`, `sylva
//! load`; LMDB's `mdb_dump`/`mdb_load`, RocksDB's `ldb dump`/`load`). Every byte is in
//! `docs/format.md`, "Dump stream".
//!
//! ```text
//! header   b"sylvaDMP" | version u32 (1) | flags u32 (0) | CRC32C of the 16 bytes before u32
//! record   1 u8 | key length u32 | value length u32 | key | value | CRC32C u32 of the record
//!          from its type byte to its value's end
//! end      0 u8 | records u64 | CRC32C u32 of every record CRC in order | CRC32C u32 of the
//!          end's first 13 bytes
//! ```
//!
//! Integers are little-endian. The stream is the records in key order, each key once; a reader
//! refuses (with the byte offset where it found the problem, [`Error::Corruption`] whose `page`
//! is that offset): a wrong magic or version, a record whose checksum fails, keys out of order,
//! a length over the limit, a stream that ends before its end record (a truncated dump), an end
//! record whose count or running checksum disagrees with the records read (a record dropped or
//! duplicated), or bytes after the end record. A key's length is checked against
//! [`MAX_DUMP_KEY`] before anything is allocated, and a value (up to `u32::MAX` bytes, the
//! longest a database takes) is read a megabyte at a time, so a damaged length costs no more
//! memory than the stream holds.
//!
//! [`Db::load`] applies the records in write batches (atomic each, [`LOAD_BATCH_BYTES`] of keys
//! and values or [`LOAD_BATCH_RECORDS`] records at most; a value over [`LOAD_ALONE_BYTES`] is
//! put on its own), into an empty or an existing database (a loaded key overwrites). A damaged stream stops the load with the error at its
//! offset, and the batches before it stay loaded: the error says how many records were, so
//! nothing is half loaded silently. `sylva load` of a file verifies the whole stream first and
//! loads nothing from a damaged one.

use std::io::{Read, Write};
use std::ops::Bound;

use super::{Db, WriteBatch};
use crate::error::{Error, Result};

/// The stream's magic.
pub const DUMP_MAGIC: &[u8; 8] = b"sylvaDMP";
/// The stream format version this build writes and reads.
pub const DUMP_VERSION: u32 = 1;
/// The longest key a dump record may carry (longer is corruption).
pub const MAX_DUMP_KEY: u32 = 1 << 16;
/// A load's write batch holds at most this many bytes of keys and values...
pub const LOAD_BATCH_BYTES: usize = 16 << 20;
/// ...and at most this many records.
pub const LOAD_BATCH_RECORDS: usize = 10_000;
/// A record whose value is longer than this is loaded by a put of its own (a batch is logged
/// whole in one log record, which holds at most 64 MiB).
pub const LOAD_ALONE_BYTES: usize = 4 << 20;

const RECORD: u8 = 1;
const END: u8 = 0;
const HEADER_LEN: usize = 20;

fn io_err(what: &str, e: std::io::Error) -> Error {
    Error::InvalidArgument {
        what: format!("{what}: {e}"),
        limit: 0,
    }
}

/// Writes a dump stream record by record.
pub struct DumpWriter<W: Write> {
    out: W,
    records: u64,
    /// CRC32C over the records' CRCs, in order.
    running: u32,
    buf: Vec<u8>,
}

impl<W: Write> DumpWriter<W> {
    /// Writes the header.
    pub fn new(mut out: W) -> Result<Self> {
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(DUMP_MAGIC);
        h[8..12].copy_from_slice(&DUMP_VERSION.to_le_bytes());
        let crc = crc32c::crc32c(&h[..16]);
        h[16..20].copy_from_slice(&crc.to_le_bytes());
        out.write_all(&h)
            .map_err(|e| io_err("writing the dump", e))?;
        Ok(DumpWriter {
            out,
            records: 0,
            running: 0,
            buf: Vec::new(),
        })
    }

    /// Writes one record (keys must come in ascending order; the reader checks).
    pub fn record(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let (Ok(klen), Ok(vlen)) = (u32::try_from(key.len()), u32::try_from(value.len())) else {
            return Err(Error::InvalidArgument {
                what: format!(
                    "a record of a {}-byte key and a {}-byte value is too long for a dump",
                    key.len(),
                    value.len()
                ),
                limit: u32::MAX as usize,
            });
        };
        self.buf.clear();
        self.buf.push(RECORD);
        self.buf.extend_from_slice(&klen.to_le_bytes());
        self.buf.extend_from_slice(&vlen.to_le_bytes());
        let crc = crc32c::crc32c(&self.buf);
        let crc = crc32c::crc32c_append(crc, key);
        let crc = crc32c::crc32c_append(crc, value);
        let mut w = || -> std::io::Result<()> {
            self.out.write_all(&self.buf)?;
            self.out.write_all(key)?;
            self.out.write_all(value)?;
            self.out.write_all(&crc.to_le_bytes())
        };
        w().map_err(|e| io_err("writing the dump", e))?;
        self.running = crc32c::crc32c_append(self.running, &crc.to_le_bytes());
        self.records += 1;
        Ok(())
    }

    /// Writes the end record and flushes; returns the records written and the writer.
    pub fn finish(mut self) -> Result<(u64, W)> {
        let mut end = [0u8; 17];
        end[0] = END;
        end[1..9].copy_from_slice(&self.records.to_le_bytes());
        end[9..13].copy_from_slice(&self.running.to_le_bytes());
        let crc = crc32c::crc32c(&end[..13]);
        end[13..17].copy_from_slice(&crc.to_le_bytes());
        self.out
            .write_all(&end)
            .and_then(|()| self.out.flush())
            .map_err(|e| io_err("writing the dump", e))?;
        Ok((self.records, self.out))
    }
}

/// Reads and verifies a dump stream record by record.
pub struct DumpReader<R: Read> {
    input: R,
    /// Bytes consumed so far.
    offset: u64,
    records: u64,
    running: u32,
    last_key: Option<Vec<u8>>,
    done: bool,
}

impl<R: Read> DumpReader<R> {
    /// Reads and verifies the header.
    pub fn new(input: R) -> Result<Self> {
        let mut r = DumpReader {
            input,
            offset: 0,
            records: 0,
            running: 0,
            last_key: None,
            done: false,
        };
        let mut h = [0u8; HEADER_LEN];
        r.fill(&mut h, "the header")?;
        if &h[0..8] != DUMP_MAGIC {
            return Err(bad(0, "not a sylva dump (wrong magic)".into()));
        }
        let crc = u32::from_le_bytes([h[16], h[17], h[18], h[19]]);
        if crc != crc32c::crc32c(&h[..16]) {
            return Err(bad(16, "the header's checksum does not match".into()));
        }
        let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
        if version != DUMP_VERSION {
            return Err(bad(
                8,
                format!("dump format version {version}; this build reads {DUMP_VERSION}"),
            ));
        }
        if h[12..16] != [0; 4] {
            return Err(bad(12, "unknown header flags".into()));
        }
        Ok(r)
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Records read so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Fills `buf` from the input; a stream that ends first is truncated.
    fn fill(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        let mut got = 0;
        while got < buf.len() {
            match self.input.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(bad(
                        self.offset + got as u64,
                        format!("the stream ends inside {what} (a truncated dump)"),
                    ))
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err("reading the dump", e)),
            }
        }
        self.offset += buf.len() as u64;
        Ok(())
    }

    /// The next record into `key` and `value`; `false` after the end record (verified, and
    /// nothing after it).
    pub fn next_into(&mut self, key: &mut Vec<u8>, value: &mut Vec<u8>) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        let at = self.offset;
        let mut tag = [0u8; 1];
        self.fill(&mut tag, "a record's type (no end record)")?;
        match tag[0] {
            RECORD => {}
            END => return self.end(at).map(|()| false),
            t => return Err(bad(at, format!("unknown record type {t}"))),
        }
        let mut lens = [0u8; 8];
        self.fill(&mut lens, "a record's lengths")?;
        let klen = u32::from_le_bytes([lens[0], lens[1], lens[2], lens[3]]);
        let vlen = u32::from_le_bytes([lens[4], lens[5], lens[6], lens[7]]);
        if klen == 0 || klen > MAX_DUMP_KEY {
            return Err(bad(
                at + 1,
                format!("a record of a {klen}-byte key and a {vlen}-byte value"),
            ));
        }
        // Read in pieces so a damaged length allocates no more than the stream holds.
        read_piecewise(self, key, klen as usize, "a record's key")?;
        read_piecewise(self, value, vlen as usize, "a record's value")?;
        let mut crc = [0u8; 4];
        self.fill(&mut crc, "a record's checksum")?;
        let stored = u32::from_le_bytes(crc);
        let c = crc32c::crc32c(&tag);
        let c = crc32c::crc32c_append(c, &lens);
        let c = crc32c::crc32c_append(c, key);
        let c = crc32c::crc32c_append(c, value);
        if c != stored {
            return Err(bad(
                at,
                format!("record {}'s checksum does not match", self.records),
            ));
        }
        if let Some(last) = &self.last_key {
            if key.as_slice() <= last.as_slice() {
                return Err(bad(
                    at,
                    format!(
                        "record {}'s key is not after the previous one",
                        self.records
                    ),
                ));
            }
        }
        self.last_key = Some(key.clone());
        self.running = crc32c::crc32c_append(self.running, &crc);
        self.records += 1;
        Ok(true)
    }

    fn end(&mut self, at: u64) -> Result<()> {
        let mut rest = [0u8; 16];
        self.fill(&mut rest, "the end record")?;
        let mut whole = [0u8; 17];
        whole[1..].copy_from_slice(&rest);
        let crc = u32::from_le_bytes([whole[13], whole[14], whole[15], whole[16]]);
        if crc != crc32c::crc32c(&whole[..13]) {
            return Err(bad(at, "the end record's checksum does not match".into()));
        }
        let mut n = [0u8; 8];
        n.copy_from_slice(&whole[1..9]);
        let records = u64::from_le_bytes(n);
        let running = u32::from_le_bytes([whole[9], whole[10], whole[11], whole[12]]);
        if records != self.records || running != self.running {
            return Err(bad(
                at,
                format!(
                    "the end record counts {records} records; the stream held {} (records \
                     dropped, duplicated or damaged)",
                    self.records
                ),
            ));
        }
        let mut extra = [0u8; 1];
        loop {
            match self.input.read(&mut extra) {
                Ok(0) => break,
                Ok(_) => return Err(bad(self.offset, "bytes after the end record".into())),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err("reading the dump", e)),
            }
        }
        self.done = true;
        Ok(())
    }
}

/// Reads `len` bytes into `buf` (replacing it), growing it a megabyte at a time.
fn read_piecewise<R: Read>(
    r: &mut DumpReader<R>,
    buf: &mut Vec<u8>,
    len: usize,
    what: &str,
) -> Result<()> {
    buf.clear();
    while buf.len() < len {
        let start = buf.len();
        let n = (len - start).min(1 << 20);
        buf.resize(start + n, 0);
        r.fill(&mut buf[start..], what)?;
    }
    Ok(())
}

fn bad(offset: u64, detail: String) -> Error {
    Error::Corruption {
        page: offset,
        detail: format!("dump stream, byte offset {offset}: {detail}"),
    }
}

/// Verifies a whole dump stream without loading it; returns its records.
pub fn verify_dump(input: impl Read) -> Result<u64> {
    let mut r = DumpReader::new(input)?;
    let (mut k, mut v) = (Vec::new(), Vec::new());
    while r.next_into(&mut k, &mut v)? {}
    Ok(r.records())
}

/// What [`Db::load`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Records loaded.
    pub records: u64,
    /// Bytes of the stream read.
    pub bytes: u64,
}

impl Db {
    /// Writes the records of `(lower, upper)` as a dump stream to `out`; returns how many.
    pub fn dump(&self, out: impl Write, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Result<u64> {
        let mut w = DumpWriter::new(out)?;
        for record in self.range(lower, upper) {
            let (k, v) = record?;
            w.record(&k, &v)?;
        }
        w.finish().map(|(n, _)| n)
    }

    /// Loads a dump stream into this database (empty or not; a loaded key overwrites), in
    /// write batches; `progress` is called after each batch. A damaged stream stops it with an
    /// error naming the byte offset and how many records were loaded before (module docs).
    pub fn load(
        &self,
        input: impl Read,
        mut progress: impl FnMut(&LoadReport),
    ) -> Result<LoadReport> {
        let mut r = DumpReader::new(input)?;
        let mut report = LoadReport::default();
        let (mut k, mut v) = (Vec::new(), Vec::new());
        let mut batch = WriteBatch::new();
        let mut batch_bytes = 0usize;
        loop {
            let more = match r.next_into(&mut k, &mut v) {
                Ok(more) => more,
                Err(Error::Corruption { page, detail }) => {
                    return Err(Error::Corruption {
                        page,
                        detail: format!(
                            "{detail}; {} records before it were loaded",
                            report.records
                        ),
                    })
                }
                Err(e) => return Err(e),
            };
            // A value too long for a batch's log record goes in on its own, after the batch
            // before it.
            let alone = more && v.len() > LOAD_ALONE_BYTES;
            if more && !alone {
                batch_bytes += k.len() + v.len();
                batch.put(&k, &v);
            }
            if !batch.is_empty()
                && (!more
                    || alone
                    || batch.len() >= LOAD_BATCH_RECORDS
                    || batch_bytes >= LOAD_BATCH_BYTES)
            {
                self.write(&batch)?;
                report.records += batch.len() as u64;
                report.bytes = r.offset();
                progress(&report);
                batch = WriteBatch::new();
                batch_bytes = 0;
            }
            if alone {
                self.put(&k, &v)?;
                report.records += 1;
                report.bytes = r.offset();
                progress(&report);
            }
            if !more {
                report.bytes = r.offset();
                return Ok(report);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn stream(records: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut w = DumpWriter::new(Vec::new()).unwrap();
        for (k, v) in records {
            w.record(k, v).unwrap();
        }
        w.finish().unwrap().1
    }

    #[test]
    fn streams_round_trip_and_every_cut_or_flip_is_refused_with_an_offset() {
        let records: [(&[u8], &[u8]); 3] = [(b"a", b""), (b"b\x00", b"\xff\xfe"), (b"c", b"xyz")];
        let s = stream(&records);
        assert_eq!(verify_dump(&s[..]).unwrap(), 3);
        for cut in 0..s.len() {
            match verify_dump(&s[..cut]) {
                Err(Error::Corruption { page, detail }) => {
                    assert!(page <= cut as u64, "cut {cut}: offset {page}");
                    assert!(detail.contains("byte offset"), "{detail}");
                }
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
        for byte in 0..s.len() {
            let mut d = s.clone();
            d[byte] ^= 0x10;
            assert!(verify_dump(&d[..]).is_err(), "flip in byte {byte}");
        }
        let mut extra = s.clone();
        extra.push(0);
        assert!(verify_dump(&extra[..]).is_err(), "bytes after the end");
        let unordered = stream(&[(b"b", b""), (b"a", b"")]);
        assert!(verify_dump(&unordered[..]).is_err(), "keys out of order");
    }
}
