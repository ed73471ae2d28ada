//! Spec errors: every one names the file, the line, the key, what was found
//! and what was expected, so a user can fix the spec without reading code.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub file: String,
    /// 1-based; 0 when the error is not tied to a line (e.g. an unreadable file).
    pub line: usize,
    /// Dotted key path, e.g. `task.main.steps[2].order`.
    pub key: String,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: ", self.file, self.line)?;
        } else {
            write!(f, "{}: ", self.file)?;
        }
        if !self.key.is_empty() {
            write!(f, "key `{}`: ", self.key)?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for SpecError {}

/// Maps byte offsets in the source to 1-based line numbers.
pub(crate) struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    pub fn line(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}

/// Builds errors for one source file.
pub(crate) struct Reporter<'a> {
    pub file: &'a str,
    pub lines: LineIndex,
}

impl<'a> Reporter<'a> {
    pub fn new(file: &'a str, text: &str) -> Self {
        Reporter {
            file,
            lines: LineIndex::new(text),
        }
    }

    pub fn at(&self, offset: usize, key: impl Into<String>, message: impl Into<String>) -> SpecError {
        SpecError {
            file: self.file.to_string(),
            line: self.lines.line(offset),
            key: key.into(),
            message: message.into(),
        }
    }
}
