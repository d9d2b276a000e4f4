//! The list `filter` language (a CEL subset over the object, rooted at `this`) and the list
//! `order` language (`field [asc|desc], …`): a hand-written lexer, a recursive-descent parser and
//! the AST they produce, and the rewriting of string literals in a filter's text. Translation to
//! SQL lives in the store crate; nothing here evaluates a filter.

mod ast;
mod lexer;
mod parser;
mod rewrite;

pub use ast::{CompareOp, Expr, Literal, LiteralAt, OrderTerm, Path, StringMethod};
pub use parser::{parse_filter, parse_order};
pub use rewrite::{equality_strings, quote, replace_strings};

/// Longest accepted filter or order text, in bytes.
pub const MAX_INPUT_LEN: usize = 4096;

/// Deepest accepted nesting of parentheses and `!`.
pub const MAX_DEPTH: usize = 64;

/// A filter or order that cannot be parsed or translated, with the 0-based character position
/// of the problem in the source text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("filter error at position {position}: {message}")]
pub struct FilterError {
    /// 0-based character (not byte) position in the source text.
    pub position: usize,
    /// What is wrong.
    pub message: String,
}

impl FilterError {
    /// Builds an error at `position`.
    pub fn new(position: usize, message: impl Into<String>) -> Self {
        Self {
            position,
            message: message.into(),
        }
    }
}

/// The kubectl/design shorthand for a label match — `labels["KEY"]="VALUE"` (also with `==`,
/// `metadata.labels`, single quotes) — written in the filter language:
/// `this.metadata.labels["KEY"] == "VALUE"`. `None` when `src` is not that shorthand.
pub fn label_shorthand(src: &str) -> Option<String> {
    let s = src.trim();
    let s = s.strip_prefix("metadata.").unwrap_or(s);
    let rest = s.strip_prefix("labels[")?;
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let rest = &rest[1..];
    let end = rest.find(quote)?;
    let key = &rest[..end];
    let rest = rest[end + 1..].strip_prefix(']')?.trim_start();
    let rest = rest
        .strip_prefix("==")
        .or_else(|| rest.strip_prefix('='))?
        .trim_start();
    let vquote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let value = rest[1..].strip_suffix(vquote)?;
    let plain = |t: &str| !t.is_empty() && !t.contains(['"', '\'', '\\']);
    (plain(key) && !value.contains(['"', '\'', '\\']))
        .then(|| format!("this.metadata.labels[\"{key}\"] == \"{value}\""))
}

#[cfg(test)]
mod tests;
