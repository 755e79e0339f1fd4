use std::fmt;

use thiserror::Error;

/// One problem with a scenario, located as precisely as the source allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where the scenario came from (a file path, or "command line").
    pub origin: String,
    /// 1-based line of the offending key, when it is in the file.
    pub line: Option<usize>,
    /// Dotted key path (`load.request_rate`, `stages[1].users`).
    pub key: String,
    /// What is wrong and what would be right.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(
                f,
                "{}:{}: `{}`: {}",
                self.origin, line, self.key, self.message
            ),
            None => write!(f, "{}: `{}`: {}", self.origin, self.key, self.message),
        }
    }
}

/// Why a scenario could not be used.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{origin}: cannot read the scenario: {source}")]
    Read {
        origin: String,
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid TOML.
    #[error("{origin}:{line}:{column}: invalid TOML{}: {message}", key.as_ref().map(|k| format!(" at `{k}`")).unwrap_or_default())]
    Syntax {
        origin: String,
        line: usize,
        column: usize,
        key: Option<String>,
        message: String,
    },
    /// A key set on the command line could not be applied; `spec` is what
    /// the user typed (`--set key=value`, `--header K=V`).
    #[error("command line ({spec}): {message}")]
    Override { spec: String, message: String },
    /// A command-line flag whose text cannot be read (`--header nokey`,
    /// `--goodput ttft=5`); the message names the flag.
    #[error("{0}")]
    Flag(String),
    /// Keys with wrong types, unknown names or out-of-range values.
    #[error("{}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid { problems: Vec<Problem> },
    /// A dataset could not be read or built.
    #[error(transparent)]
    Dataset(#[from] crate::dataset::DatasetError),
}

impl ScenarioError {
    /// The problems, when the error is about keys and values.
    pub fn problems(&self) -> &[Problem] {
        match self {
            ScenarioError::Invalid { problems } => problems,
            _ => &[],
        }
    }
}
