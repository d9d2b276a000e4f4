#[test]
fn the_label_shorthand_becomes_a_label_match() {
    let want = Some(r#"this.metadata.labels["osac.openshift.io/default"] == "true""#.to_string());
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
    let e = parse_filter(r#"this.metadata.labels["osac.openshift.io/default"] == 'true'"#).unwrap();
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
        let Expr::Method { method, .. } = parse_filter(&format!("this.x.{m}('y')")).unwrap() else {
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
