//! The syntax tree of filters and orders: paths, literals, comparisons, conditions.

use std::fmt;

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
