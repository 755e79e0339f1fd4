//! Why an output could not write its files: which file, what it was doing
//! and the cause, so a caller can tell a full disk from a refused
//! `summary.csv` (the binary prints the message and its causes).

use std::path::PathBuf;

/// A result file that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A directory or file could not be created.
    #[error("creating {}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An existing file could not be opened (`append`: to add to its end).
    #[error("opening {}{}", path.display(), if *append { " for appending" } else { "" })]
    Open {
        path: PathBuf,
        append: bool,
        #[source]
        source: std::io::Error,
    },
    /// An existing file could not be read.
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Writing to a file failed.
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Writing CSV rows to a file failed.
    #[error("writing {}", path.display())]
    Csv {
        path: PathBuf,
        #[source]
        source: csv::Error,
    },
    /// A result could not be encoded as JSON.
    #[error("encoding result JSON")]
    Json(#[source] serde_json::Error),
    /// `summary.csv` exists with another version's columns: appending would
    /// misalign them.
    #[error(
        "refusing to append to {}: its header differs from this version's summary columns \
         (first difference at column {column}: file has \"{found}\", expected \"{expected}\"); \
         write to a new file or move the old one away",
        path.display()
    )]
    HeaderDiffers {
        path: PathBuf,
        /// 1-based.
        column: usize,
        found: String,
        expected: String,
    },
}
