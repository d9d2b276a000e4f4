//! The lexer of the filter and order languages: text → tokens with character positions.

use std::fmt;

use super::{CompareOp, FilterError, MAX_INPUT_LEN};

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Str(String),
    Int(i64),
    Float(f64),
    Dot,
    Comma,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Op(CompareOp),
    AndAnd,
    OrOr,
    Bang,
    End,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Ident(s) => write!(f, "'{s}'"),
            Tok::Str(s) => write!(f, "string {s:?}"),
            Tok::Int(i) => write!(f, "integer {i}"),
            Tok::Float(x) => write!(f, "number {x}"),
            Tok::Dot => f.write_str("'.'"),
            Tok::Comma => f.write_str("','"),
            Tok::LParen => f.write_str("'('"),
            Tok::RParen => f.write_str("')'"),
            Tok::LBracket => f.write_str("'['"),
            Tok::RBracket => f.write_str("']'"),
            Tok::Op(op) => write!(f, "'{}'", op.symbol()),
            Tok::AndAnd => f.write_str("'&&'"),
            Tok::OrOr => f.write_str("'||'"),
            Tok::Bang => f.write_str("'!'"),
            Tok::End => f.write_str("end of input"),
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) pos: usize,
}

fn check_length(src: &str) -> Result<(), FilterError> {
    if src.len() > MAX_INPUT_LEN {
        let position = src
            .char_indices()
            .position(|(b, _)| b >= MAX_INPUT_LEN)
            .unwrap_or(0);
        return Err(FilterError::new(
            position,
            format!(
                "input is too long ({} bytes, at most {MAX_INPUT_LEN} allowed)",
                src.len()
            ),
        ));
    }
    Ok(())
}

pub(super) fn lex(src: &str) -> Result<Vec<Token>, FilterError> {
    check_length(src)?;
    let chars: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        let next = chars.get(i + 1).copied();
        let simple = |tok: Tok| Token { tok, pos: start };
        match c {
            c if c.is_whitespace() => {
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                toks.push(simple(Tok::Ident(chars[start..i].iter().collect())));
            }
            c if c.is_ascii_digit() || (c == '-' && next.is_some_and(|n| n.is_ascii_digit())) => {
                let (tok, end) = lex_number(&chars, start)?;
                toks.push(simple(tok));
                i = end;
            }
            '"' | '\'' => {
                let (s, end) = lex_string(&chars, start)?;
                toks.push(simple(Tok::Str(s)));
                i = end;
            }
            '=' if next == Some('=') => {
                toks.push(simple(Tok::Op(CompareOp::Eq)));
                i += 2;
            }
            '=' => {
                return Err(FilterError::new(
                    start,
                    "unexpected '=' (use '==' to compare)",
                ));
            }
            '!' if next == Some('=') => {
                toks.push(simple(Tok::Op(CompareOp::Ne)));
                i += 2;
            }
            '!' => {
                toks.push(simple(Tok::Bang));
                i += 1;
            }
            '<' | '>' => {
                let eq = next == Some('=');
                let op = match (c, eq) {
                    ('<', false) => CompareOp::Lt,
                    ('<', true) => CompareOp::Le,
                    (_, false) => CompareOp::Gt,
                    (_, true) => CompareOp::Ge,
                };
                toks.push(simple(Tok::Op(op)));
                i += if eq { 2 } else { 1 };
            }
            '&' if next == Some('&') => {
                toks.push(simple(Tok::AndAnd));
                i += 2;
            }
            '|' if next == Some('|') => {
                toks.push(simple(Tok::OrOr));
                i += 2;
            }
            '&' | '|' => {
                return Err(FilterError::new(
                    start,
                    format!("unexpected '{c}' (use '{c}{c}')"),
                ));
            }
            '.' => {
                toks.push(simple(Tok::Dot));
                i += 1;
            }
            ',' => {
                toks.push(simple(Tok::Comma));
                i += 1;
            }
            '(' => {
                toks.push(simple(Tok::LParen));
                i += 1;
            }
            ')' => {
                toks.push(simple(Tok::RParen));
                i += 1;
            }
            '[' => {
                toks.push(simple(Tok::LBracket));
                i += 1;
            }
            ']' => {
                toks.push(simple(Tok::RBracket));
                i += 1;
            }
            '+' | '-' | '*' | '/' | '%' => {
                return Err(FilterError::new(
                    start,
                    format!("arithmetic operator '{c}' is not supported"),
                ));
            }
            '?' | ':' => {
                return Err(FilterError::new(
                    start,
                    "the conditional operator '? :' is not supported",
                ));
            }
            '{' | '}' => {
                return Err(FilterError::new(start, "map literals are not supported"));
            }
            c => {
                return Err(FilterError::new(
                    start,
                    format!("unexpected character {c:?}"),
                ));
            }
        }
    }
    toks.push(Token {
        tok: Tok::End,
        pos: chars.len(),
    });
    Ok(toks)
}

fn lex_number(chars: &[char], start: usize) -> Result<(Tok, usize), FilterError> {
    let digit_at = |j: usize| chars.get(j).is_some_and(|c| c.is_ascii_digit());
    let mut i = start;
    if chars[i] == '-' {
        i += 1;
    }
    while digit_at(i) {
        i += 1;
    }
    let mut float = false;
    if chars.get(i) == Some(&'.') && digit_at(i + 1) {
        float = true;
        i += 1;
        while digit_at(i) {
            i += 1;
        }
    }
    if matches!(chars.get(i), Some('e' | 'E')) {
        let sign = usize::from(matches!(chars.get(i + 1), Some('+' | '-')));
        if digit_at(i + 1 + sign) {
            float = true;
            i += 1 + sign;
            while digit_at(i) {
                i += 1;
            }
        }
    }
    if chars
        .get(i)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
    {
        return Err(FilterError::new(
            start,
            format!(
                "invalid number '{}'",
                chars[start..=i].iter().collect::<String>()
            ),
        ));
    }
    let text: String = chars[start..i].iter().collect();
    if float {
        match text.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok((Tok::Float(x), i)),
            _ => Err(FilterError::new(
                start,
                format!("number '{text}' is out of range"),
            )),
        }
    } else {
        match text.parse::<i64>() {
            Ok(n) => Ok((Tok::Int(n), i)),
            Err(_) => Err(FilterError::new(
                start,
                format!("integer '{text}' is out of range"),
            )),
        }
    }
}

pub(super) fn lex_string(chars: &[char], start: usize) -> Result<(String, usize), FilterError> {
    let quote = chars[start];
    let mut out = String::new();
    let mut i = start + 1;
    loop {
        match chars.get(i) {
            None => {
                return Err(FilterError::new(start, "unterminated string literal"));
            }
            Some(&c) if c == quote => return Ok((out, i + 1)),
            Some('\\') => {
                let escaped = match chars.get(i + 1) {
                    Some('"') => '"',
                    Some('\'') => '\'',
                    Some('\\') => '\\',
                    Some('n') => '\n',
                    Some('t') => '\t',
                    Some('r') => '\r',
                    Some(c) => {
                        return Err(FilterError::new(
                            i,
                            format!("unsupported escape sequence '\\{c}'"),
                        ));
                    }
                    None => {
                        return Err(FilterError::new(start, "unterminated string literal"));
                    }
                };
                out.push(escaped);
                i += 2;
            }
            Some(&c) => {
                out.push(c);
                i += 1;
            }
        }
    }
}
