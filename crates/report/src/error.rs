//! Why `cicada report` could not report: an argument that names no result
//! file, a file it cannot use, or an output it cannot write.

use crate::curves::CurvesError;
use crate::curves::inputs::InputError;
use crate::read::FileError;

/// Why `cicada report` could not report (the binary exits with 2).
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// An argument names no result file, or a `--label` is malformed.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A result file cannot be used.
    #[error(transparent)]
    File(#[from] FileError),
    /// The CSV table could not be written.
    #[error("writing CSV: {0}")]
    Csv(csv::Error),
    /// The `--html` comparison page could not be made.
    #[error(transparent)]
    Curves(#[from] CurvesError),
}
