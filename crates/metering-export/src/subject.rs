//! The NATS subject of a record: `<prefix>.<the CloudEvent type without org.osac.metering>`.

/// The part of a CloudEvent `type` that the prefix replaces.
const TYPE_NAMESPACE: &str = "org.osac.metering.";

/// The subject a record is published on: the prefix, then the CloudEvent `type` without its
/// `org.osac.metering.` namespace, so `org.osac.metering.networking.v1.allocation` goes to
/// `<prefix>.networking.v1.allocation` and a consumer can subscribe to one kind of record
/// (`<prefix>.networking.v1.usage`) or to all (`<prefix>.>`). Characters a subject token
/// cannot carry become `_`; a payload without a readable `type` goes to `<prefix>.unknown`
/// (it is still delivered: the outbox never stalls on one record).
pub fn subject_for(prefix: &str, payload: &str) -> String {
    let ty = serde_json::from_str::<serde_json::Value>(payload)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned));
    let tokens: Vec<String> = ty
        .as_deref()
        .map(|t| t.strip_prefix(TYPE_NAMESPACE).unwrap_or(t))
        .into_iter()
        .flat_map(|t| t.split('.'))
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        })
        .collect();
    if tokens.is_empty() {
        format!("{prefix}.unknown")
    } else {
        format!("{prefix}.{}", tokens.join("."))
    }
}

#[cfg(test)]
mod tests {
    use super::subject_for;

    #[test]
    fn subject_follows_the_event_type() {
        let p = "osac.metering";
        assert_eq!(
            subject_for(
                p,
                r#"{"type":"org.osac.metering.networking.v1.allocation","id":"x"}"#
            ),
            "osac.metering.networking.v1.allocation"
        );
        assert_eq!(
            subject_for(p, r#"{"type":"com.example.a b*.>"}"#),
            "osac.metering.com.example.a_b_._"
        );
        assert_eq!(subject_for(p, r#"{"type":"a..b."}"#), "osac.metering.a.b");
        assert_eq!(subject_for(p, "not json"), "osac.metering.unknown");
        assert_eq!(subject_for(p, r#"{"type":7}"#), "osac.metering.unknown");
        assert_eq!(subject_for(p, r#"{"type":"..."}"#), "osac.metering.unknown");
    }
}
