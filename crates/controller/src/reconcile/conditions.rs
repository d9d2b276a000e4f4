//! Status conditions (`pb::Condition`): typed, timestamped facts on an object's status. A
//! condition's transition time changes only when its status does, so it tells how long the
//! object has been in that status (workloads measure waits with it).

use std::time::Duration;

use osac_model::pb;

/// Current time as a proto timestamp.
pub(crate) fn now() -> pbjson_types::Timestamp {
    let t = chrono::Utc::now();
    pbjson_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

/// The condition of `kind` in `conds`.
pub(crate) fn condition<'a>(conds: &'a [pb::Condition], kind: &str) -> Option<&'a pb::Condition> {
    conds.iter().find(|c| c.r#type == kind)
}

/// Whether the condition is TRUE.
pub(crate) fn is_true(conds: &[pb::Condition], kind: &str) -> bool {
    condition(conds, kind).is_some_and(|c| c.status == pb::ConditionStatus::True as i32)
}

/// Sets a condition TRUE (`ok`) or FALSE; see [`set_status`].
pub(crate) fn set_condition(
    conds: &mut Vec<pb::Condition>,
    kind: &str,
    ok: bool,
    reason: &str,
    message: impl Into<String>,
) {
    let status = if ok {
        pb::ConditionStatus::True
    } else {
        pb::ConditionStatus::False
    };
    set_status(conds, kind, status, reason, message);
}

/// Sets (adds or replaces) the condition of `kind`; the transition time changes only when the
/// status does.
pub(crate) fn set_status(
    conds: &mut Vec<pb::Condition>,
    kind: &str,
    status: pb::ConditionStatus,
    reason: &str,
    message: impl Into<String>,
) {
    let status = status as i32;
    let position = conds.iter().position(|c| c.r#type == kind);
    let transition = match position.map(|i| &conds[i]) {
        Some(c) if c.status == status => c.last_transition_time,
        _ => Some(now()),
    };
    let c = pb::Condition {
        r#type: kind.to_string(),
        status,
        reason: reason.to_string(),
        message: message.into(),
        last_transition_time: transition,
    };
    match position {
        Some(i) => conds[i] = c,
        None => conds.push(c),
    }
}

/// How long ago condition `kind` last changed (zero when unknown): the start of a wait.
pub(crate) fn since_condition(conds: &[pb::Condition], kind: &str) -> Duration {
    condition(conds, kind)
        .and_then(|c| c.last_transition_time)
        .and_then(|t| chrono::DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?))
        .and_then(|t| (chrono::Utc::now() - t).to_std().ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_keep_transition_time_while_status_holds() {
        let mut conds = Vec::new();
        set_condition(&mut conds, "A", false, "Wait", "w");
        let t0 = conds[0].last_transition_time;
        set_condition(&mut conds, "A", false, "Wait", "again");
        assert_eq!(conds[0].last_transition_time, t0);
        assert_eq!(conds[0].message, "again");
        set_condition(&mut conds, "A", true, "Done", "");
        assert!(is_true(&conds, "A"));
        assert_eq!(conds.len(), 1);
    }
}
