//! Rewrites an nft script so `nft -f` does not dump the namespace's chains first.
//!
//! nft 1.0.6 (Debian bookworm) fetches every chain, set and object of the namespace before a
//! batch containing `add rule` or `add element` (to resolve names), but only the table list
//! for `add chain <t> <c> { <rule>; … }` and `add map <t> <m> { <declaration>; elements = … }`.
//! With 5,000 security groups a router holds 10,000+ chains and that dump costs more than
//! the rest of the transaction, growing with every group (measured: 16 → 32 ms per batch at
//! 10 vs 10,000 chains). The block forms the kernel receives are the same rules and elements,
//! in the same single transaction, so [`compact`] turns the one form into the other:
//!
//! - consecutive `add rule F T C <rule>` lines of one chain become one
//!   `add chain F T C { <rule>; … }` (which also declares the chain: every renderer declares
//!   it before anyway). A rule naming a set (`@name`) stays as it is unless the script declares
//!   that set, because the block form does not load sets from the kernel;
//! - `add element F T M { … }` becomes `add map F T M { <declaration> elements = { … } }`
//!   when the script declares `M` with `add map`/`add set` (the declaration must match the
//!   kernel's, which it does: the same line was just accepted as a declaration).
//!
//! Everything else passes through unchanged, in order.

use std::collections::HashMap;

/// One declared set or map: its keyword and its declaration body (`type …;`).
struct Decl {
    kind: &'static str,
    body: String,
}

/// `(family, table, name)` of a set, map or chain.
type Key = (String, String, String);

/// Splits `n` whitespace-separated words off `s`; returns them and the trimmed rest.
fn words(s: &str, n: usize) -> Option<(Vec<&str>, &str)> {
    let mut rest = s.trim_start();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        if end == 0 {
            return None;
        }
        out.push(&rest[..end]);
        rest = rest[end..].trim_start();
    }
    Some((out, rest.trim_end()))
}

/// The text between the first `{` and the last `}` of `s` when `s` is exactly `{ … }`.
fn braced(s: &str) -> Option<&str> {
    let inner = s.strip_prefix('{')?.strip_suffix('}')?;
    Some(inner.trim())
}

/// Whether `s` has balanced braces and none of the characters that would end or comment out
/// a rule inside a chain block.
fn block_safe(s: &str) -> bool {
    let mut depth = 0i32;
    for c in s.chars() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            ';' | '#' | '\n' | '\r' => return false,
            _ => {}
        }
    }
    depth == 0
}

/// Names referenced as `@name` in a rule (a raw payload match `@th,64,10` is no reference).
fn set_refs(rule: &str) -> impl Iterator<Item = &str> {
    rule.match_indices('@').filter_map(move |(i, _)| {
        let rest = &rule[i + 1..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
            .unwrap_or(rest.len());
        (!rest[end..].starts_with(',')).then_some(&rest[..end])
    })
}

/// Rules gathered for one chain, waiting to be written as a block.
struct Pending {
    key: Key,
    rules: Vec<String>,
}

impl Pending {
    fn write(self, out: &mut String) {
        let (family, table, chain) = self.key;
        out.push_str(&format!(
            "add chain {family} {table} {chain} {{ {}; }}\n",
            self.rules.join("; ")
        ));
    }
}

/// Rewrites `script` into the cache-free block forms described in the module docs.
pub fn compact(script: &str) -> String {
    let mut out = String::with_capacity(script.len());
    let mut decls: HashMap<Key, Decl> = HashMap::new();
    let mut pending: Option<Pending> = None;
    for raw in script.lines() {
        let line = raw.trim();
        if let Some(((family, table, chain), rule)) = rule_of(line)
            && block_safe(rule)
            && set_refs(rule).all(|name| {
                decls.contains_key(&(family.to_string(), table.to_string(), name.to_string()))
            })
        {
            let key = (family.to_string(), table.to_string(), chain.to_string());
            match &mut pending {
                Some(p) if p.key == key => p.rules.push(rule.to_string()),
                _ => {
                    if let Some(p) = pending.take() {
                        p.write(&mut out);
                    }
                    pending = Some(Pending {
                        key,
                        rules: vec![rule.to_string()],
                    });
                }
            }
            continue;
        }
        if let Some(p) = pending.take() {
            p.write(&mut out);
        }
        if let Some((key, decl)) = declaration_of(line) {
            decls.insert(key, decl);
        } else if let Some((key, elements)) = element_of(line)
            && let Some(decl) = decls.get(&key)
        {
            let (family, table, name) = &key;
            out.push_str(&format!(
                "add {} {family} {table} {name} {{ {} elements = {{ {elements} }} }}\n",
                decl.kind, decl.body
            ));
            continue;
        }
        out.push_str(raw);
        out.push('\n');
    }
    if let Some(p) = pending.take() {
        p.write(&mut out);
    }
    out
}

/// `add rule F T C <rule>` → ((F, T, C), rule).
fn rule_of(line: &str) -> Option<((&str, &str, &str), &str)> {
    let (w, rule) = words(line, 5)?;
    if w[0] != "add" || w[1] != "rule" || rule.is_empty() {
        return None;
    }
    Some(((w[2], w[3], w[4]), rule))
}

/// `add set|map F T N { <body> }` without elements → ((F, T, N), declaration).
fn declaration_of(line: &str) -> Option<(Key, Decl)> {
    let (w, rest) = words(line, 5)?;
    let kind = match (w[0], w[1]) {
        ("add", "set") => "set",
        ("add", "map") => "map",
        _ => return None,
    };
    let body = braced(rest)?;
    if body.is_empty() || body.contains(['{', '}', '#']) || body.contains("elements") {
        return None;
    }
    let body = if body.ends_with(';') {
        body.to_string()
    } else {
        format!("{body};")
    };
    Some((
        (w[2].to_string(), w[3].to_string(), w[4].to_string()),
        Decl { kind, body },
    ))
}

/// `add element F T N { <elements> }` → ((F, T, N), elements).
fn element_of(line: &str) -> Option<(Key, &str)> {
    let (w, rest) = words(line, 5)?;
    if w[0] != "add" || w[1] != "element" {
        return None;
    }
    let elements = braced(rest)?;
    if elements.is_empty() || !block_safe(elements) {
        return None;
    }
    Some((
        (w[2].to_string(), w[3].to_string(), w[4].to_string()),
        elements,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether nft 1.0.6 still loads the full chain cache for the compacted `script`.
    pub(crate) fn needs_full_cache(script: &str) -> bool {
        compact(script).lines().any(|l| {
            let l = l.trim();
            l.starts_with("delete ")
                || words(l, 2).is_some_and(|(w, _)| {
                    matches!(w[0], "add" | "insert" | "replace")
                        && matches!(w[1], "rule" | "element")
                })
        })
    }

    #[test]
    fn consecutive_rules_of_a_chain_become_one_block() {
        let s = "add chain inet t c\nflush chain inet t c\nadd rule inet t c ip saddr 10.0.0.0/8 tcp dport 22 accept\nadd rule inet t c icmpv6 type { nd-neighbor-solicit, nd-router-advert } accept\nadd rule inet t d drop\nadd rule inet t c drop\n";
        assert_eq!(
            compact(s),
            "add chain inet t c\nflush chain inet t c\n\
             add chain inet t c { ip saddr 10.0.0.0/8 tcp dport 22 accept; icmpv6 type { nd-neighbor-solicit, nd-router-advert } accept; }\n\
             add chain inet t d { drop; }\n\
             add chain inet t c { drop; }\n"
        );
    }

    #[test]
    fn set_references_need_a_declaration_in_the_script() {
        let undeclared = "add rule inet t c ip saddr vmap @eg4\n";
        assert_eq!(compact(undeclared), undeclared);
        assert_eq!(
            compact("add rule bridge b c icmpv6 type nd-neighbor-advert @th,64,10 != 0x3fa drop\n"),
            "add chain bridge b c { icmpv6 type nd-neighbor-advert @th,64,10 != 0x3fa drop; }\n"
        );
        let other_table = "add map inet u eg4 { type ipv4_addr : verdict; }\nadd rule inet t c ip saddr vmap @eg4\n";
        assert_eq!(compact(other_table), other_table);
        let declared = "add map inet t eg4 { type ipv4_addr : verdict; }\nadd rule inet t c ip saddr vmap @eg4\n";
        assert_eq!(
            compact(declared),
            "add map inet t eg4 { type ipv4_addr : verdict; }\nadd chain inet t c { ip saddr vmap @eg4; }\n"
        );
    }

    #[test]
    fn elements_of_declared_maps_are_added_with_the_declaration() {
        let s = "add map inet t in4 { type ipv4_addr : verdict; }\nadd set bridge b brs { type ifname; }\n\
                 add element inet t in4 { 10.0.0.5 : jump i-p1 }\nadd element bridge b brs { \"br-1\" }\n\
                 add element inet t dnat4 { 1.2.3.4 : 10.0.0.2 }\ndelete element inet t in4 { 10.0.0.6 }\n";
        assert_eq!(
            compact(s),
            "add map inet t in4 { type ipv4_addr : verdict; }\nadd set bridge b brs { type ifname; }\n\
             add map inet t in4 { type ipv4_addr : verdict; elements = { 10.0.0.5 : jump i-p1 } }\n\
             add set bridge b brs { type ifname; elements = { \"br-1\" } }\n\
             add element inet t dnat4 { 1.2.3.4 : 10.0.0.2 }\ndelete element inet t in4 { 10.0.0.6 }\n"
        );
    }

    #[test]
    fn unsafe_rules_and_other_statements_pass_through() {
        let s = "add rule inet t c meta mark 1; drop\nadd rule inet t c drop # x\ninsert rule inet t c drop\nadd rule inet t c\n";
        assert_eq!(compact(s), s);
        assert!(needs_full_cache(s));
        assert!(!needs_full_cache(
            "add chain inet t c\nadd rule inet t c drop\n"
        ));
    }

    #[test]
    fn the_hot_paths_need_no_full_cache() {
        use crate::fabric_manager::render::{self, TableSite};
        use osac_backends::{Protocol, SecurityRule};
        let rule = |protocol, port: Option<u16>, cidr: &str| SecurityRule {
            protocol,
            port_from: port,
            port_to: port,
            cidr: cidr.parse().unwrap(),
        };
        let ingress = vec![
            rule(Protocol::Tcp, Some(22), "10.0.0.0/8"),
            rule(Protocol::Udp, None, "fd00::/64"),
            rule(Protocol::Icmp, None, "0.0.0.0/0"),
        ];
        let egress = vec![rule(Protocol::All, None, "0.0.0.0/0")];
        for site in [TableSite::Router, TableSite::Hosting] {
            let mut s = render::vn_table("t", site);
            s.push_str(&render::sg_chains("t", "sg-1", &ingress, &egress));
            s.push_str(&render::bridge_table());
            s.push_str(&render::port_sg(
                "t",
                "pabc",
                &["sg-1".to_string()],
                &render::PortKeys {
                    mac: "02:00:00:00:00:05".into(),
                    mark: 5,
                    v4: Some("10.0.0.5".parse().unwrap()),
                    v6: Some("fd00::5".parse().unwrap()),
                },
            ));
            assert!(!needs_full_cache(&s), "{}", compact(&s));
        }
        let mut s = render::vn_table("t", TableSite::Hosting);
        s.push_str(&render::add_bridge("t", "br-1"));
        s.push_str(&render::add_dhcp_server(
            "t",
            Some("10.0.1.1".parse().unwrap()),
            Some("fe80::1".parse().unwrap()),
        ));
        s.push_str(&render::bridge_table());
        assert!(!needs_full_cache(&s), "{}", compact(&s));
    }
}
