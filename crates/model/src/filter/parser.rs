//! The recursive-descent parser of the filter and order languages: tokens → [`Expr`] and
//! [`OrderTerm`]s.

use super::lexer::{Tok, Token, lex};
use super::{
    CompareOp, Expr, FilterError, Literal, LiteralAt, MAX_DEPTH, OrderTerm, Path, StringMethod,
};

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
