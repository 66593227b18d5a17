//! The crate's one error type.
//!
//! Variants are specific enough for a caller to act on: an `InvalidArgument` is the caller's
//! mistake and retrying will not help; `Io` may be transient; `Corruption` and
//! `ChecksumMismatch` mean the bytes on disk cannot be trusted; `Locked` means another process
//! holds the database; `Poisoned` means a write to stable storage failed and the store refuses
//! further writes until it is reopened (after a failed `fsync` the kernel may have dropped the
//! dirty pages, so carrying on could acknowledge writes that never reach disk).

use std::path::PathBuf;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in sylva.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The caller passed something the engine cannot accept: an empty key, a key or value longer
    /// than the engine's limit, a value of the wrong fixed size.
    #[error("invalid argument: {what} (limit: {limit} bytes)")]
    InvalidArgument {
        /// What was wrong, in words (for example "key of 300 bytes is longer than the maximum").
        what: String,
        /// The limit that was broken, in bytes (a minimum for too-short input, a maximum for
        /// too-long input).
        limit: usize,
    },

    /// An operating-system I/O call failed.
    #[error("I/O error{}: {source}", path.as_ref().map(|p| format!(" on {}", p.display())).unwrap_or_default())]
    Io {
        /// The file involved, when there is one.
        path: Option<PathBuf>,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// Bytes read from storage are structurally impossible.
    #[error("corruption in page {page}: {detail}")]
    Corruption {
        /// The page (or log offset) where the problem was found.
        page: u64,
        /// What was wrong.
        detail: String,
    },

    /// The write-ahead log holds bytes that are structurally impossible, or lacks records
    /// recovery needs.
    #[error("corruption in the log{}: {detail}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    LogCorruption {
        /// The log's file, when known.
        path: Option<PathBuf>,
        /// What was wrong (with the LSN or offset where it was found).
        detail: String,
    },

    /// A page's stored checksum does not match its contents.
    #[error("checksum mismatch in page {page}: stored {expected:#010x}, computed {got:#010x}")]
    ChecksumMismatch {
        /// The page whose checksum failed.
        page: u64,
        /// The checksum stored in the page header.
        expected: u32,
        /// The checksum computed over the bytes read.
        got: u32,
    },

    /// Another process (or another handle in this process) holds the database.
    #[error("database at {} is locked by another process", path.display())]
    Locked {
        /// The database directory.
        path: PathBuf,
    },

    /// A file that is not what sylva expects there: not a sylva file at all (wrong magic) or
    /// damaged beyond recovery in its header.
    #[error("{} is not a sylva {expected}: {detail}", path.display())]
    NotSylva {
        /// The file.
        path: PathBuf,
        /// What it should have been (for example "write-ahead log").
        expected: &'static str,
        /// What was found.
        detail: String,
    },

    /// A sylva file written by a format version this build does not read.
    #[error("{} has format version {found}; this build reads versions up to {supported}", path.display())]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },

    /// A directory that must be new or empty (the target of an online backup) holds files.
    #[error("{} exists and is not empty (it holds {first}); refusing to write into it", path.display())]
    NotEmpty {
        /// The directory.
        path: PathBuf,
        /// One of the names it holds.
        first: String,
    },

    /// A write to stable storage failed earlier; the store refuses writes until reopened.
    #[error("store is poisoned by an earlier failed write to stable storage; reopen it")]
    Poisoned,
}

impl Error {
    /// The same error again, for reporting one failure to several callers (the tasks waiting
    /// on one page read). An `Io` error's source is rebuilt from its OS error number, or its
    /// kind and message.
    pub fn duplicate(&self) -> Error {
        match self {
            Error::InvalidArgument { what, limit } => Error::InvalidArgument {
                what: what.clone(),
                limit: *limit,
            },
            Error::Io { path, source } => Error::Io {
                path: path.clone(),
                source: match source.raw_os_error() {
                    Some(errno) => std::io::Error::from_raw_os_error(errno),
                    None => std::io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::Corruption { page, detail } => Error::Corruption {
                page: *page,
                detail: detail.clone(),
            },
            Error::LogCorruption { path, detail } => Error::LogCorruption {
                path: path.clone(),
                detail: detail.clone(),
            },
            Error::ChecksumMismatch {
                page,
                expected,
                got,
            } => Error::ChecksumMismatch {
                page: *page,
                expected: *expected,
                got: *got,
            },
            Error::Locked { path } => Error::Locked { path: path.clone() },
            Error::NotSylva {
                path,
                expected,
                detail,
            } => Error::NotSylva {
                path: path.clone(),
                expected,
                detail: detail.clone(),
            },
            Error::UnsupportedVersion {
                path,
                found,
                supported,
            } => Error::UnsupportedVersion {
                path: path.clone(),
                found: *found,
                supported: *supported,
            },
            Error::NotEmpty { path, first } => Error::NotEmpty {
                path: path.clone(),
                first: first.clone(),
            },
            Error::Poisoned => Error::Poisoned,
        }
    }

    /// An `Io` error with the path it happened on.
    pub fn io_at(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: Some(path.into()),
            source,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Self {
        Error::Io { path: None, source }
    }
}
