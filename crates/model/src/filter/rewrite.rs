//! Rewriting string literals of a filter in its source text, so that what the caller wrote
//! stays as written around them (the API replaces a reference written as a name by the id
//! stored in the field).

use super::lexer::lex_string;
use super::{Expr, FilterError, Literal, LiteralAt, Path};

/// Every string literal compared for equality with a field (`==`, `!=`, `in [...]`), with the
/// field: the literals whose meaning can be an object's name instead of its id.
pub fn equality_strings(expr: &Expr) -> Vec<(&Path, &LiteralAt)> {
    let mut out = Vec::new();
    collect(expr, &mut out);
    out
}

fn collect<'a>(expr: &'a Expr, out: &mut Vec<(&'a Path, &'a LiteralAt)>) {
    match expr {
        Expr::Compare { path, op, value } => {
            if !op.is_ordering() && matches!(value.value, Literal::String(_)) {
                out.push((path, value));
            }
        }
        Expr::In { path, values } => out.extend(
            values
                .iter()
                .filter(|v| matches!(v.value, Literal::String(_)))
                .map(|v| (path, v)),
        ),
        Expr::Has(_) | Expr::Method { .. } => {}
        Expr::Not(e) => collect(e, out),
        Expr::And(a, b) | Expr::Or(a, b) => {
            collect(a, out);
            collect(b, out);
        }
    }
}

/// A string as a filter literal (double-quoted, escaped as the lexer reads it back).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `src` with the string literals starting at the given character positions replaced by new
/// strings; everything else is kept as written. A position that does not start a string
/// literal is an error (the positions come from parsing `src`).
pub fn replace_strings(src: &str, replacements: &[(usize, String)]) -> Result<String, FilterError> {
    let chars: Vec<char> = src.chars().collect();
    let mut spans = Vec::with_capacity(replacements.len());
    for (pos, new) in replacements {
        if !matches!(chars.get(*pos), Some('"' | '\'')) {
            return Err(FilterError::new(*pos, "no string literal here"));
        }
        let (_, end) = lex_string(&chars, *pos)?;
        spans.push((*pos, end, new));
    }
    spans.sort_by_key(|(start, _, _)| *start);
    let mut out = String::with_capacity(src.len());
    let mut at = 0;
    for (start, end, new) in spans {
        if start < at {
            return Err(FilterError::new(start, "overlapping literals"));
        }
        out.extend(&chars[at..start]);
        out.push_str(&quote(new));
        at = end;
    }
    out.extend(&chars[at..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::parse_filter;

    #[test]
    fn replaces_only_the_named_literals() {
        let src = r#"this.spec.virtual_network == "gen-net" && this.metadata.name != 'x' || this.spec.virtual_network in ["a", "b"]"#;
        let expr = parse_filter(src).unwrap();
        let found: Vec<(String, usize)> = equality_strings(&expr)
            .into_iter()
            .map(|(p, l)| (p.to_string(), l.pos))
            .collect();
        assert_eq!(found.len(), 4);
        let gen_net = found[0].1;
        let b = found[3].1;
        let out =
            replace_strings(src, &[(b, "id-b".into()), (gen_net, "id \"1\"\\".into())]).unwrap();
        assert_eq!(
            out,
            r#"this.spec.virtual_network == "id \"1\"\\" && this.metadata.name != 'x' || this.spec.virtual_network in ["a", "id-b"]"#
        );
        // What was written back parses to the new values.
        let again = parse_filter(&out).unwrap();
        let values: Vec<Literal> = equality_strings(&again)
            .into_iter()
            .map(|(_, l)| l.value.clone())
            .collect();
        assert_eq!(values[0], Literal::String("id \"1\"\\".into()));
        assert_eq!(values[3], Literal::String("id-b".into()));
    }

    #[test]
    fn ordering_and_methods_are_not_equality() {
        let expr = parse_filter(
            r#"this.metadata.name > "a" && this.spec.virtual_network.startsWith("x")"#,
        )
        .unwrap();
        assert!(equality_strings(&expr).is_empty());
        assert!(replace_strings("this.a == 1", &[(11, "x".into())]).is_err());
    }
}
