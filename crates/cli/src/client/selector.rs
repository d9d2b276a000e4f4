//! `get -l/--selector` and `--sort-by`, kubectl's spellings, translated to the server's filter
//! and order.

use osac_model::filter::quote;

/// A label selector (`k=v`, `k==v`, `k!=v`, comma = AND) as a filter. `k!=v` also holds for
/// objects without the label, as in kubectl.
pub fn selector_filter(selector: &str) -> Result<String, String> {
    let mut terms = Vec::new();
    for part in selector.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(format!("--selector '{selector}': an empty term"));
        }
        let (key, value, negated) = if let Some((k, v)) = part.split_once("!=") {
            (k, v, true)
        } else if let Some((k, v)) = part.split_once("==") {
            (k, v, false)
        } else if let Some((k, v)) = part.split_once('=') {
            (k, v, false)
        } else {
            return Err(format!(
                "--selector '{part}': expected KEY=VALUE or KEY!=VALUE"
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() {
            return Err(format!("--selector '{part}': the label key is empty"));
        }
        let label = format!("this.metadata.labels[{}]", quote(key));
        terms.push(if negated {
            format!("!has({label}) || {label} != {}", quote(value))
        } else {
            format!("{label} == {}", quote(value))
        });
    }
    Ok(terms
        .into_iter()
        .map(|t| format!("({t})"))
        .collect::<Vec<_>>()
        .join(" && "))
}

/// `--sort-by .metadata.name` (or without the dot) as the server's order.
pub fn sort_by_order(field: &str) -> Result<String, String> {
    let path = field.trim().trim_start_matches('.');
    if path.is_empty() || path.contains(char::is_whitespace) {
        return Err(format!(
            "--sort-by '{field}': expected a field path such as .metadata.name"
        ));
    }
    Ok(path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_become_label_filters() {
        assert_eq!(
            selector_filter("app=web, tier!=db").unwrap(),
            r#"(this.metadata.labels["app"] == "web") && (!has(this.metadata.labels["tier"]) || this.metadata.labels["tier"] != "db")"#
        );
        assert_eq!(
            selector_filter("osac.io/x==1").unwrap(),
            r#"(this.metadata.labels["osac.io/x"] == "1")"#
        );
        for bad in ["app", "=x", "a=b,,c=d"] {
            assert!(selector_filter(bad).is_err(), "{bad}");
        }
        // What it makes parses.
        osac_model::filter::parse_filter(&selector_filter("a=b,c!=d").unwrap()).unwrap();
    }

    #[test]
    fn sort_by_takes_a_json_path() {
        assert_eq!(sort_by_order(".metadata.name").unwrap(), "metadata.name");
        assert_eq!(
            sort_by_order("metadata.creation_timestamp").unwrap(),
            "metadata.creation_timestamp"
        );
        assert!(sort_by_order(".").is_err());
    }
}
