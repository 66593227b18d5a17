//! The raw page runs of out-of-line values (`crate::db`'s overflow runs): whole pages whose
//! first carries the page header, sealed by the caller, and whose others carry none, so they are
//! written and read as bytes, not as checked pages.

use super::PageFile;
use crate::error::{Error, Result};
use crate::io::IO_ALIGN;

impl PageFile {
    /// Writes `bytes` (whole pages, the first sealed by the caller, the others raw) at page
    /// `first` in one I/O: an out-of-line value's run (`crate::db`'s overflow runs), whose
    /// pages after the first carry no header. `bytes` must be aligned for direct I/O.
    pub fn write_raw_run(&self, first: u64, bytes: &[u8]) -> Result<()> {
        let pages = bytes.len() / self.page_size;
        if !bytes.len().is_multiple_of(self.page_size)
            || (self.direct && !(bytes.as_ptr() as usize).is_multiple_of(IO_ALIGN))
        {
            return Err(Error::InvalidArgument {
                what: format!("a run of {} bytes is not whole aligned pages", bytes.len()),
                limit: pages * self.page_size,
            });
        }
        self.check_range(first, pages, false)?;
        self.io.write_at(bytes, first * self.page_size as u64)
    }

    /// Writes `runs`, each whole pages as [`PageFile::write_raw_run`] takes them, one after
    /// another from page `first`: with one vectored I/O where the file allows.
    pub fn write_raw_runs(&self, first: u64, runs: &[&[u8]]) -> Result<()> {
        let mut pages = 0;
        for bytes in runs {
            if !bytes.len().is_multiple_of(self.page_size)
                || (self.direct && !(bytes.as_ptr() as usize).is_multiple_of(IO_ALIGN))
            {
                return Err(Error::InvalidArgument {
                    what: format!("a run of {} bytes is not whole aligned pages", bytes.len()),
                    limit: bytes.len() / self.page_size * self.page_size,
                });
            }
            pages += bytes.len() / self.page_size;
        }
        self.check_range(first, pages, false)?;
        self.io
            .write_vectored_at(runs, first * self.page_size as u64)
    }

    /// Reads `buf.len()` bytes from byte `offset` of the run of pages starting at `first`,
    /// unverified (the caller checks the value's CRC32C). Without direct I/O any offset and
    /// buffer will do; with it, both must be aligned to [`IO_ALIGN`].
    pub fn read_raw(&self, first: u64, offset: usize, buf: &mut [u8]) -> Result<()> {
        let end = offset.saturating_add(buf.len());
        let pages = end.div_ceil(self.page_size).max(1);
        self.check_range(first, pages, true)?;
        if self.direct
            && (!offset.is_multiple_of(IO_ALIGN)
                || !buf.len().is_multiple_of(IO_ALIGN)
                || !(buf.as_ptr() as usize).is_multiple_of(IO_ALIGN))
        {
            return Err(Error::InvalidArgument {
                what: "an unaligned read of a file opened for direct I/O".into(),
                limit: IO_ALIGN,
            });
        }
        match self
            .io
            .read_at(buf, first * self.page_size as u64 + offset as u64)
        {
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::UnexpectedEof => {
                Err(Error::Corruption {
                    page: first,
                    detail: "the file ends inside this run of pages (truncated?)".into(),
                })
            }
            r => r,
        }
    }
}
