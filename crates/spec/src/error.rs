//! Spec errors: every one names the file, the line, the key, what was found
//! and what was expected, so a user can fix the spec without reading code.

use crate::tree::At;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub file: String,
    /// 1-based; 0 when the error is not tied to a line (e.g. an unreadable file).
    pub line: usize,
    /// 1-based column (in characters) where the error is pinned to one
    /// (syntax and encoding errors); 0 otherwise.
    pub column: usize,
    /// Dotted key path, e.g. `task.main.steps[2].order`.
    pub key: String,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 && self.column > 0 {
            write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        } else if self.line > 0 {
            write!(f, "{}:{}: ", self.file, self.line)?;
        } else {
            write!(f, "{}: ", self.file)?;
        }
        if !self.key.is_empty() {
            write!(f, "key `{}`: ", crate::parse::escape_controls(&self.key))?;
        }
        // What the user wrote may reach the message; its control
        // characters are written as escapes, never sent to the terminal.
        write!(f, "{}", crate::parse::escape_controls(&self.message))
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

/// The KEY of a `--set KEY=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetKey {
    /// As the user wrote it (trimmed): what an error names.
    pub written: String,
    /// As the crate writes key paths (`sysctl."vm.swappiness"`).
    pub canonical: String,
}

/// Builds errors for one spec: its file, and the `--set` arguments applied
/// to it. An error at a node that came from a `--set` names that argument
/// (file `--set`, line 0, key = its KEY), since the file has no line for it.
pub(crate) struct Reporter<'a> {
    pub file: &'a str,
    pub lines: LineIndex,
    /// The KEY of each `--set KEY=VALUE`.
    pub sets: Vec<SetKey>,
}

impl<'a> Reporter<'a> {
    pub fn new(file: &'a str, text: &str) -> Self {
        Reporter {
            file,
            lines: LineIndex::new(text),
            sets: Vec::new(),
        }
    }

    /// The 1-based line of `at`; 0 for a value given by `--set`.
    pub fn line(&self, at: At) -> usize {
        match at {
            At::Text(offset) => self.lines.line(offset),
            At::Set(_) => 0,
        }
    }

    pub fn at(&self, at: At, key: impl Into<String>, message: impl Into<String>) -> SpecError {
        let key = key.into();
        let message = message.into();
        match at {
            At::Text(offset) => SpecError {
                file: self.file.to_string(),
                line: self.lines.line(offset),
                column: 0,
                key,
                message,
            },
            At::Set(i) => {
                let set = &self.sets[i];
                let message = if key == set.canonical || key.is_empty() {
                    message
                } else {
                    format!("{message} (at `{key}`)")
                };
                SpecError {
                    file: "--set".to_string(),
                    line: 0,
                    column: 0,
                    key: set.written.clone(),
                    message,
                }
            }
        }
    }
}
