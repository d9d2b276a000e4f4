//! The list `filter` language (a CEL subset over the object, rooted at `this`) and the list
//! `order` language (`field [asc|desc], …`): a hand-written lexer, a recursive-descent parser and
//! the AST they produce. Translation to SQL lives in the store crate; nothing here evaluates a
//! filter.

use std::fmt;

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

/// A literal value.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// A string, escapes resolved.
    String(String),
    /// A signed integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
}

impl Literal {
    /// The name of the literal's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Literal::String(_) => "string",
            Literal::Int(_) => "integer",
            Literal::Float(_) => "float",
            Literal::Bool(_) => "bool",
            Literal::Null => "null",
        }
    }
}

/// A literal with the position where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct LiteralAt {
    /// The value.
    pub value: Literal,
    /// 0-based character position of the literal.
    pub pos: usize,
}

/// A field path below `this`, e.g. `this.metadata.labels["k"]` → `["metadata", "labels", "k"]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    /// The segments, without the leading `this`.
    pub segments: Vec<String>,
    /// 0-based character position where the path starts.
    pub pos: usize,
}

impl Path {
    /// Whether the segments are exactly `names`.
    pub fn is(&self, names: &[&str]) -> bool {
        self.segments.len() == names.len() && self.segments.iter().zip(names).all(|(a, b)| a == b)
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.segments.iter().enumerate() {
            if is_identifier(seg) {
                if i > 0 {
                    f.write_str(".")?;
                }
                f.write_str(seg)?;
            } else {
                write!(f, "[{seg:?}]")?;
            }
        }
        Ok(())
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CompareOp {
    /// The operator with its operands swapped (`a < b` ⇔ `b > a`).
    pub fn flip(self) -> Self {
        match self {
            CompareOp::Eq => CompareOp::Eq,
            CompareOp::Ne => CompareOp::Ne,
            CompareOp::Lt => CompareOp::Gt,
            CompareOp::Le => CompareOp::Ge,
            CompareOp::Gt => CompareOp::Lt,
            CompareOp::Ge => CompareOp::Le,
        }
    }

    /// The CEL spelling of the operator.
    pub fn symbol(self) -> &'static str {
        match self {
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
        }
    }

    /// Whether this is an ordering (`< <= > >=`) rather than an equality operator.
    pub fn is_ordering(self) -> bool {
        !matches!(self, CompareOp::Eq | CompareOp::Ne)
    }
}

/// A string method callable on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StringMethod {
    /// `path.startsWith("x")`
    StartsWith,
    /// `path.endsWith("x")`
    EndsWith,
    /// `path.contains("x")`
    Contains,
}

impl StringMethod {
    /// The CEL name of the method.
    pub fn name(self) -> &'static str {
        match self {
            StringMethod::StartsWith => "startsWith",
            StringMethod::EndsWith => "endsWith",
            StringMethod::Contains => "contains",
        }
    }
}

/// A parsed filter: a boolean condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// `path op literal` (a `literal op path` is normalised to this form).
    Compare {
        /// The field.
        path: Path,
        /// The operator, as seen with the path on the left.
        op: CompareOp,
        /// The literal.
        value: LiteralAt,
    },
    /// `path in [literals]`.
    In {
        /// The field.
        path: Path,
        /// The list items.
        values: Vec<LiteralAt>,
    },
    /// `has(path)`.
    Has(Path),
    /// `path.method("arg")`.
    Method {
        /// The field.
        path: Path,
        /// The method.
        method: StringMethod,
        /// The string argument.
        arg: String,
        /// 0-based character position of the argument.
        arg_pos: usize,
    },
    /// `!e`.
    Not(Box<Expr>),
    /// `a && b`.
    And(Box<Expr>, Box<Expr>),
    /// `a || b`.
    Or(Box<Expr>, Box<Expr>),
}

impl Expr {
    /// Every field path the condition reads.
    pub fn paths(&self) -> Vec<&Path> {
        match self {
            Expr::Compare { path, .. }
            | Expr::In { path, .. }
            | Expr::Has(path)
            | Expr::Method { path, .. } => vec![path],
            Expr::Not(e) => e.paths(),
            Expr::And(a, b) | Expr::Or(a, b) => {
                let mut out = a.paths();
                out.extend(b.paths());
                out
            }
        }
    }
}

/// One term of an `order`: a field and a direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderTerm {
    /// The field (dotted; the leading `this.` is optional in the source).
    pub path: Path,
    /// `desc` (otherwise `asc`).
    pub descending: bool,
}

// ---------------------------------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone, PartialEq)]
enum Tok {
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
struct Token {
    tok: Tok,
    pos: usize,
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

fn lex(src: &str) -> Result<Vec<Token>, FilterError> {
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

fn lex_string(chars: &[char], start: usize) -> Result<(String, usize), FilterError> {
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

// ---------------------------------------------------------------------------------------------
// Parser

/// An intermediate parse result: relations and conditions are only known one level up.
enum Operand {
    Path(Path),
    Lit(LiteralAt),
    List(Vec<LiteralAt>, usize),
    Cond(Expr, usize),
}

impl Operand {
    fn pos(&self) -> usize {
        match self {
            Operand::Path(p) => p.pos,
            Operand::Lit(l) => l.pos,
            Operand::List(_, pos) | Operand::Cond(_, pos) => *pos,
        }
    }
}

struct Parser {
    toks: Vec<Token>,
    i: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        // The token list always ends with `End`, and `advance` never moves past it.
        &self.toks[self.i.min(self.toks.len() - 1)]
    }

    fn advance(&mut self) -> Token {
        let t = self.peek().clone();
        if self.i < self.toks.len() - 1 {
            self.i += 1;
        }
        t
    }

    fn expect(&mut self, want: &Tok, what: &str) -> Result<Token, FilterError> {
        let t = self.advance();
        if &t.tok == want {
            Ok(t)
        } else {
            Err(FilterError::new(
                t.pos,
                format!("expected {what} but found {}", t.tok),
            ))
        }
    }

    fn enter(&mut self, pos: usize) -> Result<(), FilterError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(FilterError::new(
                pos,
                format!("expression is nested too deeply (at most {MAX_DEPTH} levels)"),
            ));
        }
        Ok(())
    }

    fn parse_or(&mut self) -> Result<Expr, FilterError> {
        let mut left = self.parse_and()?;
        while self.peek().tok == Tok::OrOr {
            self.advance();
            let right = self.parse_and()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn parse_and(&mut self) -> Result<Expr, FilterError> {
        let mut left = self.parse_relation()?;
        while self.peek().tok == Tok::AndAnd {
            self.advance();
            let right = self.parse_relation()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn parse_relation(&mut self) -> Result<Expr, FilterError> {
        let left = self.parse_unary()?;
        let t = self.peek().clone();
        match t.tok {
            Tok::Op(op) => {
                self.advance();
                let right = self.parse_unary()?;
                comparison(left, op, right)
            }
            Tok::Ident(ref s) if s == "in" => {
                self.advance();
                let right = self.parse_unary()?;
                match (left, right) {
                    (Operand::Path(path), Operand::List(values, _)) => {
                        Ok(Expr::In { path, values })
                    }
                    (Operand::Path(_), other) => Err(FilterError::new(
                        other.pos(),
                        "the right side of 'in' must be a list literal, e.g. [\"a\", \"b\"]",
                    )),
                    (other, _) => Err(FilterError::new(
                        other.pos(),
                        "the left side of 'in' must be a field path",
                    )),
                }
            }
            _ => condition(left),
        }
    }

    fn parse_unary(&mut self) -> Result<Operand, FilterError> {
        let t = self.peek().clone();
        if t.tok == Tok::Bang {
            self.advance();
            self.enter(t.pos)?;
            let inner = self.parse_unary()?;
            self.depth -= 1;
            let cond = condition(inner)?;
            return Ok(Operand::Cond(Expr::Not(Box::new(cond)), t.pos));
        }
        self.parse_primary()
    }

    fn parse_primary(&mut self) -> Result<Operand, FilterError> {
        let t = self.advance();
        let lit = |value| Ok(Operand::Lit(LiteralAt { value, pos: t.pos }));
        match &t.tok {
            Tok::LParen => {
                self.enter(t.pos)?;
                let e = self.parse_or()?;
                self.depth -= 1;
                self.expect(&Tok::RParen, "')'")?;
                Ok(Operand::Cond(e, t.pos))
            }
            Tok::LBracket => {
                let mut items = Vec::new();
                loop {
                    if self.peek().tok == Tok::RBracket {
                        self.advance();
                        break;
                    }
                    let item = self.advance();
                    let value = match item.tok {
                        Tok::Str(s) => Literal::String(s),
                        Tok::Int(n) => Literal::Int(n),
                        Tok::Float(x) => Literal::Float(x),
                        Tok::Ident(ref s) if s == "true" => Literal::Bool(true),
                        Tok::Ident(ref s) if s == "false" => Literal::Bool(false),
                        Tok::Ident(ref s) if s == "null" => Literal::Null,
                        other => {
                            return Err(FilterError::new(
                                item.pos,
                                format!("list items must be literals, found {other}"),
                            ));
                        }
                    };
                    items.push(LiteralAt {
                        value,
                        pos: item.pos,
                    });
                    let sep = self.advance();
                    match sep.tok {
                        Tok::Comma => {}
                        Tok::RBracket => break,
                        other => {
                            return Err(FilterError::new(
                                sep.pos,
                                format!("expected ',' or ']' but found {other}"),
                            ));
                        }
                    }
                }
                Ok(Operand::List(items, t.pos))
            }
            Tok::Str(s) => lit(Literal::String(s.clone())),
            Tok::Int(n) => lit(Literal::Int(*n)),
            Tok::Float(x) => lit(Literal::Float(*x)),
            Tok::Ident(name) => match name.as_str() {
                "true" => lit(Literal::Bool(true)),
                "false" => lit(Literal::Bool(false)),
                "null" => lit(Literal::Null),
                "this" => self.parse_path_tail(t.pos, true),
                "has" if self.peek().tok == Tok::LParen => {
                    self.advance();
                    let arg = self.advance();
                    let is_this = matches!(&arg.tok, Tok::Ident(s) if s == "this");
                    if !is_this {
                        return Err(FilterError::new(
                            arg.pos,
                            format!(
                                "has() needs a field path starting with 'this', found {}",
                                arg.tok
                            ),
                        ));
                    }
                    let path = match self.parse_path_tail(arg.pos, false)? {
                        Operand::Path(p) => p,
                        other => {
                            return Err(FilterError::new(other.pos(), "has() needs a field path"));
                        }
                    };
                    self.expect(&Tok::RParen, "')'")?;
                    Ok(Operand::Cond(Expr::Has(path), t.pos))
                }
                _ if self.peek().tok == Tok::LParen => Err(FilterError::new(
                    t.pos,
                    format!("unknown function '{name}' (supported: has)"),
                )),
                _ => Err(FilterError::new(
                    t.pos,
                    format!("unknown identifier '{name}': field paths must start with 'this.'"),
                )),
            },
            other => Err(FilterError::new(
                t.pos,
                format!("expected an expression but found {other}"),
            )),
        }
    }

    /// Parses the segments after `this` (at `pos`), and a trailing method call if allowed.
    fn parse_path_tail(&mut self, pos: usize, allow_method: bool) -> Result<Operand, FilterError> {
        let mut segments = Vec::new();
        loop {
            match self.peek().tok {
                Tok::Dot => {
                    self.advance();
                    let name_tok = self.advance();
                    let Tok::Ident(name) = name_tok.tok else {
                        return Err(FilterError::new(
                            name_tok.pos,
                            format!("expected a field name after '.' but found {}", name_tok.tok),
                        ));
                    };
                    if self.peek().tok != Tok::LParen {
                        segments.push(name);
                        continue;
                    }
                    let method = match name.as_str() {
                        "startsWith" => StringMethod::StartsWith,
                        "endsWith" => StringMethod::EndsWith,
                        "contains" => StringMethod::Contains,
                        _ => {
                            return Err(FilterError::new(
                                name_tok.pos,
                                format!(
                                    "unknown method '{name}' (supported: startsWith, endsWith, contains)"
                                ),
                            ));
                        }
                    };
                    if !allow_method {
                        return Err(FilterError::new(
                            name_tok.pos,
                            format!("a method call ('{name}') is not allowed here"),
                        ));
                    }
                    if segments.is_empty() {
                        return Err(FilterError::new(
                            name_tok.pos,
                            format!("'{name}' needs a field path, not 'this'"),
                        ));
                    }
                    self.advance();
                    let arg = self.advance();
                    let Tok::Str(s) = arg.tok else {
                        return Err(FilterError::new(
                            arg.pos,
                            format!(
                                "the argument of '{name}' must be a string literal, found {}",
                                arg.tok
                            ),
                        ));
                    };
                    self.expect(&Tok::RParen, "')'")?;
                    let after = self.peek();
                    if matches!(after.tok, Tok::Dot | Tok::LBracket) {
                        return Err(FilterError::new(
                            after.pos,
                            format!("the result of '{name}' has no fields or methods"),
                        ));
                    }
                    let expr = Expr::Method {
                        path: Path { segments, pos },
                        method,
                        arg: s,
                        arg_pos: arg.pos,
                    };
                    return Ok(Operand::Cond(expr, pos));
                }
                Tok::LBracket => {
                    self.advance();
                    let key = self.advance();
                    match key.tok {
                        Tok::Str(s) => segments.push(s),
                        Tok::Int(_) => {
                            return Err(FilterError::new(
                                key.pos,
                                "list indexing is not supported; index maps with a string key",
                            ));
                        }
                        other => {
                            return Err(FilterError::new(
                                key.pos,
                                format!("expected a string key after '[' but found {other}"),
                            ));
                        }
                    }
                    self.expect(&Tok::RBracket, "']'")?;
                }
                _ => break,
            }
        }
        if segments.is_empty() {
            return Err(FilterError::new(
                pos,
                "'this' alone is not a field; name a field, e.g. this.metadata.name",
            ));
        }
        Ok(Operand::Path(Path { segments, pos }))
    }
}

/// Builds `left op right`, normalising `literal op path` to `path op' literal`.
fn comparison(left: Operand, op: CompareOp, right: Operand) -> Result<Expr, FilterError> {
    let sym = op.symbol();
    match (left, right) {
        (Operand::Path(path), Operand::Lit(value)) => Ok(Expr::Compare { path, op, value }),
        (Operand::Lit(value), Operand::Path(path)) => Ok(Expr::Compare {
            path,
            op: op.flip(),
            value,
        }),
        (Operand::Path(_), Operand::Path(p)) => Err(FilterError::new(
            p.pos,
            format!(
                "comparing two fields is not supported; the right side of '{sym}' must be a literal"
            ),
        )),
        (Operand::Lit(l), Operand::Lit(_)) => Err(FilterError::new(
            l.pos,
            format!("one side of '{sym}' must be a field path"),
        )),
        (Operand::List(_, pos), _) | (_, Operand::List(_, pos)) => Err(FilterError::new(
            pos,
            "a list literal is only allowed on the right side of 'in'",
        )),
        (Operand::Cond(_, pos), _) => Err(FilterError::new(
            pos,
            format!(
                "the left side of '{sym}' must be a field path or a literal (write a negated comparison as !(a {sym} b))"
            ),
        )),
        (_, Operand::Cond(_, pos)) => Err(FilterError::new(
            pos,
            format!("the right side of '{sym}' must be a literal"),
        )),
    }
}

/// Turns an operand used as a boolean into a condition; a bare path means `path == true`.
fn condition(operand: Operand) -> Result<Expr, FilterError> {
    match operand {
        Operand::Cond(e, _) => Ok(e),
        Operand::Path(path) => {
            let pos = path.pos;
            Ok(Expr::Compare {
                path,
                op: CompareOp::Eq,
                value: LiteralAt {
                    value: Literal::Bool(true),
                    pos,
                },
            })
        }
        Operand::Lit(l) => Err(FilterError::new(
            l.pos,
            format!("a {} literal alone is not a condition", l.value.type_name()),
        )),
        Operand::List(_, pos) => Err(FilterError::new(
            pos,
            "a list literal is only allowed on the right side of 'in'",
        )),
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

/// Parses a list `filter` (a CEL subset over `this`) into an [`Expr`].
pub fn parse_filter(src: &str) -> Result<Expr, FilterError> {
    let toks = lex(src)?;
    if toks.len() == 1 {
        return Err(FilterError::new(0, "the filter is empty"));
    }
    let mut p = Parser {
        toks,
        i: 0,
        depth: 0,
    };
    let expr = p.parse_or()?;
    let t = p.peek();
    if t.tok != Tok::End {
        let msg = if t.tok == Tok::RParen {
            "unbalanced ')'".to_string()
        } else {
            format!("expected '&&', '||' or end of input but found {}", t.tok)
        };
        return Err(FilterError::new(t.pos, msg));
    }
    Ok(expr)
}

fn order_segment(p: &mut Parser) -> Result<String, FilterError> {
    let t = p.advance();
    match t.tok {
        Tok::Ident(seg) => Ok(seg),
        other => Err(FilterError::new(
            t.pos,
            format!("expected a field name but found {other}"),
        )),
    }
}

/// Parses a list `order`: a comma list of `field [asc|desc]`, where a field is a dotted path
/// with or without a leading `this.`. Empty (or blank) text gives no terms.
pub fn parse_order(src: &str) -> Result<Vec<OrderTerm>, FilterError> {
    let toks = lex(src)?;
    let mut p = Parser {
        toks,
        i: 0,
        depth: 0,
    };
    let mut terms = Vec::new();
    if p.peek().tok == Tok::End {
        return Ok(terms);
    }
    loop {
        let first = p.advance();
        let Tok::Ident(name) = first.tok else {
            return Err(FilterError::new(
                first.pos,
                format!("expected a field name but found {}", first.tok),
            ));
        };
        let mut segments = Vec::new();
        if name == "this" {
            p.expect(&Tok::Dot, "'.' after 'this'")?;
            segments.push(order_segment(&mut p)?);
        } else {
            segments.push(name);
        }
        while p.peek().tok == Tok::Dot {
            p.advance();
            segments.push(order_segment(&mut p)?);
        }
        let mut descending = false;
        if let Tok::Ident(dir) = &p.peek().tok {
            if dir.eq_ignore_ascii_case("asc") {
                p.advance();
            } else if dir.eq_ignore_ascii_case("desc") {
                descending = true;
                p.advance();
            }
        }
        terms.push(OrderTerm {
            path: Path {
                segments,
                pos: first.pos,
            },
            descending,
        });
        let sep = p.advance();
        match sep.tok {
            Tok::Comma => {}
            Tok::End => return Ok(terms),
            other => {
                return Err(FilterError::new(
                    sep.pos,
                    format!("expected 'asc', 'desc', ',' or end of input but found {other}"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_label_shorthand_becomes_a_label_match() {
        let want =
            Some(r#"this.metadata.labels["osac.openshift.io/default"] == "true""#.to_string());
        assert_eq!(
            label_shorthand(r#"labels["osac.openshift.io/default"]="true""#),
            want
        );
        assert_eq!(
            label_shorthand(r#" labels['osac.openshift.io/default'] == 'true' "#),
            want
        );
        assert_eq!(
            label_shorthand(r#"metadata.labels["osac.openshift.io/default"]="true""#),
            want
        );
        assert!(parse_filter(want.as_deref().unwrap()).is_ok());
        assert_eq!(label_shorthand(r#"this.metadata.labels["a"] == "b""#), None);
        assert_eq!(label_shorthand(r#"labels["a"]"#), None);
        assert_eq!(label_shorthand(r#"labels["a"]="b" && x"#), None);
        assert_eq!(label_shorthand(r#"labels[""]="b""#), None);
    }

    use super::*;

    fn path(segs: &[&str], pos: usize) -> Path {
        Path {
            segments: segs.iter().map(|s| s.to_string()).collect(),
            pos,
        }
    }

    fn lit(value: Literal, pos: usize) -> LiteralAt {
        LiteralAt { value, pos }
    }

    fn err(src: &str) -> (usize, String) {
        match parse_filter(src) {
            Ok(e) => panic!("{src:?} parsed as {e:?}"),
            Err(e) => (e.position, e.message),
        }
    }

    #[test]
    fn simple_comparison() {
        let e = parse_filter(r#"this.spec.virtual_network == "vn-1""#).unwrap();
        assert_eq!(
            e,
            Expr::Compare {
                path: path(&["spec", "virtual_network"], 0),
                op: CompareOp::Eq,
                value: lit(Literal::String("vn-1".into()), 29),
            }
        );
    }

    #[test]
    fn label_index_and_dotted_label() {
        let e =
            parse_filter(r#"this.metadata.labels["osac.openshift.io/default"] == 'true'"#).unwrap();
        let Expr::Compare { path: p, value, .. } = e else {
            panic!()
        };
        assert_eq!(
            p.segments,
            ["metadata", "labels", "osac.openshift.io/default"]
        );
        assert_eq!(value.value, Literal::String("true".into()));
        assert_eq!(
            p.to_string(),
            r#"metadata.labels["osac.openshift.io/default"]"#
        );
        let e = parse_filter("this.metadata.labels.foo != 'x'").unwrap();
        let Expr::Compare { path: p, op, .. } = e else {
            panic!()
        };
        assert_eq!(p.segments, ["metadata", "labels", "foo"]);
        assert_eq!(op, CompareOp::Ne);
    }

    #[test]
    fn literals() {
        let cases: &[(&str, Literal)] = &[
            ("-42", Literal::Int(-42)),
            ("7", Literal::Int(7)),
            ("-9223372036854775808", Literal::Int(i64::MIN)),
            ("1.5", Literal::Float(1.5)),
            ("-2.5e3", Literal::Float(-2500.0)),
            ("1e2", Literal::Float(100.0)),
            ("true", Literal::Bool(true)),
            ("false", Literal::Bool(false)),
            ("null", Literal::Null),
            (r#""a\"b\\c\nd""#, Literal::String("a\"b\\c\nd".into())),
            (r#"'it\'s "x"'"#, Literal::String("it's \"x\"".into())),
            ("'é€'", Literal::String("é€".into())),
        ];
        for (src, want) in cases {
            let e = parse_filter(&format!("this.a == {src}")).unwrap();
            let Expr::Compare { value, .. } = e else {
                panic!()
            };
            assert_eq!(&value.value, want, "{src}");
            assert_eq!(value.pos, 10);
        }
    }

    #[test]
    fn literal_on_left_is_flipped() {
        let e = parse_filter("3 < this.metadata.version").unwrap();
        assert_eq!(
            e,
            Expr::Compare {
                path: path(&["metadata", "version"], 4),
                op: CompareOp::Gt,
                value: lit(Literal::Int(3), 0),
            }
        );
    }

    #[test]
    fn precedence_and_not() {
        let e = parse_filter("!this.a || this.b == 1 && (this.c || !has(this.d))").unwrap();
        let t = |p: &str, pos| Expr::Compare {
            path: path(&[p], pos),
            op: CompareOp::Eq,
            value: lit(Literal::Bool(true), pos),
        };
        let want = Expr::Or(
            Box::new(Expr::Not(Box::new(t("a", 1)))),
            Box::new(Expr::And(
                Box::new(Expr::Compare {
                    path: path(&["b"], 11),
                    op: CompareOp::Eq,
                    value: lit(Literal::Int(1), 21),
                }),
                Box::new(Expr::Or(
                    Box::new(t("c", 27)),
                    Box::new(Expr::Not(Box::new(Expr::Has(path(&["d"], 42))))),
                )),
            )),
        );
        assert_eq!(e, want);
    }

    #[test]
    fn in_methods_and_has() {
        let e = parse_filter(r#"this.status.state in [1, "X", 2.5,]"#).unwrap();
        let Expr::In { path: p, values } = e else {
            panic!()
        };
        assert_eq!(p.segments, ["status", "state"]);
        assert_eq!(
            values,
            vec![
                lit(Literal::Int(1), 22),
                lit(Literal::String("X".into()), 25),
                lit(Literal::Float(2.5), 30),
            ]
        );
        assert_eq!(
            parse_filter("this.a in []").unwrap(),
            Expr::In {
                path: path(&["a"], 0),
                values: vec![]
            }
        );
        let e = parse_filter(r#"this.metadata.labels["k"].startsWith("we_b%")"#).unwrap();
        assert_eq!(
            e,
            Expr::Method {
                path: path(&["metadata", "labels", "k"], 0),
                method: StringMethod::StartsWith,
                arg: "we_b%".into(),
                arg_pos: 37,
            }
        );
        for (m, want) in [
            ("endsWith", StringMethod::EndsWith),
            ("contains", StringMethod::Contains),
        ] {
            let Expr::Method { method, .. } = parse_filter(&format!("this.x.{m}('y')")).unwrap()
            else {
                panic!()
            };
            assert_eq!(method, want);
        }
        assert_eq!(
            parse_filter("has(this.metadata.labels['a/b'])").unwrap(),
            Expr::Has(path(&["metadata", "labels", "a/b"], 4))
        );
    }

    #[test]
    fn errors_with_positions() {
        let cases: &[(&str, usize, &str)] = &[
            ("(this.a == 1", 12, "expected ')' but found end of input"),
            (
                "this.spec.x + 1",
                12,
                "arithmetic operator '+' is not supported",
            ),
            ("spec.x == 1", 0, "unknown identifier 'spec'"),
            ("size(this.a) == 1", 0, "unknown function 'size'"),
            ("this.a.matches('x')", 7, "unknown method 'matches'"),
            ("this.a = 1", 7, "use '=='"),
            ("this.a == 1 & this.b", 12, "use '&&'"),
            ("this.a == 'abc", 10, "unterminated string"),
            (r#"this.a == "\q""#, 11, "unsupported escape"),
            ("this.a == 99999999999999999999", 10, "out of range"),
            ("this.a == 12abc", 10, "invalid number"),
            ("this.a == this.b", 10, "comparing two fields"),
            ("1 == 2", 0, "must be a field path"),
            ("this == 1", 0, "'this' alone"),
            ("this.a in 'x'", 10, "must be a list literal"),
            ("'x' in [1]", 0, "left side of 'in'"),
            (
                "this.a == [1]",
                10,
                "only allowed on the right side of 'in'",
            ),
            ("!this.a == 'x'", 0, "must be a field path or a literal"),
            ("this.a.startsWith(1)", 18, "must be a string literal"),
            ("this.a.startsWith('x').b", 22, "has no fields"),
            ("has(this.a.startsWith('x'))", 11, "not allowed here"),
            ("has(x)", 4, "has() needs a field path"),
            ("this.a[0] == 1", 7, "list indexing is not supported"),
            (
                "this.a == 1 this.b",
                12,
                "expected '&&', '||' or end of input but found 'this'",
            ),
            ("this.a == 1)", 11, "unbalanced ')'"),
            ("", 0, "empty"),
            ("   ", 0, "empty"),
            ("true", 0, "not a condition"),
            (
                "this.a &&",
                9,
                "expected an expression but found end of input",
            ),
            ("this.", 5, "expected a field name"),
            ("this.a in [this.b]", 11, "list items must be literals"),
            ("this.a in [1 2]", 13, "expected ',' or ']'"),
            ("this.a ? 1 : 2", 7, "conditional operator"),
            ("{}", 0, "map literals"),
            ("this.a == #", 10, "unexpected character '#'"),
            ("é == 1", 0, "unexpected character 'é'"),
            ("this.é == 1", 5, "unexpected character 'é'"),
        ];
        for (src, pos, msg) in cases {
            let (p, m) = err(src);
            assert_eq!(p, *pos, "{src:?}: {m}");
            assert!(m.contains(msg), "{src:?}: {m:?} does not contain {msg:?}");
        }
    }

    #[test]
    fn display() {
        let e = parse_filter("(this.a == 1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "filter error at position 12: expected ')' but found end of input"
        );
        // Positions count characters, not bytes.
        let e = parse_filter("this.a == 'é' &&").unwrap_err();
        assert_eq!(e.position, 16);
    }

    #[test]
    fn length_and_depth_guards() {
        let deep = format!("{}this.a{}", "(".repeat(64), ")".repeat(64));
        assert!(parse_filter(&deep).is_ok());
        let too_deep = format!("{}this.a{}", "(".repeat(65), ")".repeat(65));
        let e = parse_filter(&too_deep).unwrap_err();
        assert_eq!(e.position, 64);
        assert!(e.message.contains("nested too deeply"));
        let bangs = format!("{}this.a", "!".repeat(65));
        assert_eq!(parse_filter(&bangs).unwrap_err().position, 64);

        let long = format!("this.a == '{}'", "x".repeat(MAX_INPUT_LEN));
        let e = parse_filter(&long).unwrap_err();
        assert_eq!(e.position, MAX_INPUT_LEN);
        assert!(e.message.contains("too long"));

        // Long flat chains are fine (no recursion per term).
        let chain = vec!["this.a == 1"; 250].join(" || ");
        assert!(parse_filter(&chain).is_ok());
    }

    #[test]
    fn order() {
        let terms = parse_order("metadata.name desc, this.metadata.creation_timestamp").unwrap();
        assert_eq!(
            terms,
            vec![
                OrderTerm {
                    path: path(&["metadata", "name"], 0),
                    descending: true
                },
                OrderTerm {
                    path: path(&["metadata", "creation_timestamp"], 20),
                    descending: false
                },
            ]
        );
        let terms = parse_order(" spec.x ASC,status.y DESC ").unwrap();
        assert_eq!(terms.len(), 2);
        assert!(!terms[0].descending && terms[1].descending);
        assert_eq!(parse_order("").unwrap(), vec![]);
        assert_eq!(parse_order("  ").unwrap(), vec![]);
    }

    #[test]
    fn order_errors() {
        let cases: &[(&str, usize, &str)] = &[
            ("metadata.name sideways", 14, "expected 'asc', 'desc'"),
            (
                "metadata.name,",
                14,
                "expected a field name but found end of input",
            ),
            ("this", 4, "expected '.' after 'this'"),
            ("a.b desc desc", 9, "expected 'asc', 'desc'"),
            ("metadata.labels['x']", 15, "expected 'asc', 'desc'"),
            ("a..b", 2, "expected a field name"),
            ("a + b", 2, "arithmetic"),
            ("'a'", 0, "expected a field name"),
        ];
        for (src, pos, msg) in cases {
            let e = parse_order(src).unwrap_err();
            assert_eq!(e.position, *pos, "{src:?}: {}", e.message);
            assert!(e.message.contains(msg), "{src:?}: {}", e.message);
        }
    }
}
