//! `MemIo`: an [`Io`] over a byte vector, for tests and fuzzing (decoders fed arbitrary bytes
//! without touching the filesystem).

use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use super::Io;
use crate::error::{Error, Result};

/// A file held in memory.
#[derive(Debug, Default)]
pub struct MemIo {
    bytes: Mutex<Vec<u8>>,
    path: PathBuf,
}

impl MemIo {
    /// A file with the given contents.
    pub fn new(bytes: Vec<u8>) -> Self {
        MemIo {
            bytes: Mutex::new(bytes),
            path: PathBuf::from("<memory>"),
        }
    }

    /// A copy of the current contents.
    pub fn contents(&self) -> Vec<u8> {
        self.bytes.lock().clone()
    }
}

fn out_of_range(offset: u64, len: usize) -> Error {
    Error::Io {
        path: Some(PathBuf::from("<memory>")),
        source: std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("{len} bytes at {offset} are past the end"),
        ),
    }
}

impl Io for MemIo {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let bytes = self.bytes.lock();
        let start = usize::try_from(offset).map_err(|_| out_of_range(offset, buf.len()))?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| bytes.get(start..end))
            .ok_or_else(|| out_of_range(offset, buf.len()))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut bytes = self.bytes.lock();
        let start = usize::try_from(offset).map_err(|_| out_of_range(offset, buf.len()))?;
        let end = start
            .checked_add(buf.len())
            .ok_or_else(|| out_of_range(offset, buf.len()))?;
        if bytes.len() < end {
            bytes.resize(end, 0);
        }
        bytes[start..end].copy_from_slice(buf);
        Ok(())
    }
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    fn file_len(&self) -> Result<u64> {
        Ok(self.bytes.lock().len() as u64)
    }
    fn set_file_len(&self, len: u64) -> Result<()> {
        let len = usize::try_from(len).map_err(|_| out_of_range(len, 0))?;
        self.bytes.lock().resize(len, 0);
        Ok(())
    }
    fn path(&self) -> &Path {
        &self.path
    }
}
