//! Drift repair: every fabric manager that asks for it
//! ([`FabricManager::drift_check_interval`], e.g. the `ovn` driver, whose state is the rows of
//! a northbound database anyone with access can edit) is asked at that interval to put back
//! what was changed behind its back ([`FabricManager::repair_drift`]).
//!
//! What a repair changed is logged and recorded as a provider-only WARNING event
//! ([`REASON_DRIFT_REPAIRED`]) on every NetworkClass whose fabric manager it is: the provider
//! sees that someone edited the backend, tenants never see backend detail. With several
//! replicas the replica holding the manager name's shard runs its checks, so one repair is
//! reported once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use osac_backends::{DriftRepair, FabricManager, RoleManager};
use osac_model::{Kind, pb};
use osac_store::events::{self, NewEvent};
use tokio::sync::watch;

use crate::ownership::{Claim, Ownership};
use crate::reconcile::ReconcileCtx;

/// Reason of the event recorded when a manager put back state changed behind its back.
pub const REASON_DRIFT_REPAIRED: &str = "FabricDriftRepaired";

/// How often the loop looks for managers whose check is due.
const TICK: Duration = Duration::from_secs(1);

/// At most this many repaired objects are named in one event's message.
const NAMED_IN_MESSAGE: usize = 10;

/// Runs until `shutdown`: asks each fabric manager with a drift check interval to repair
/// drift once per interval (the first check one interval after start).
pub(crate) async fn drift_loop(
    ctx: Arc<ReconcileCtx>,
    ownership: Ownership,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut due: HashMap<String, Instant> = HashMap::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
                continue;
            }
        }
        for (name, manager, interval) in checked_managers(&ctx) {
            let now = Instant::now();
            let next = *due.entry(name.clone()).or_insert(now + interval);
            if now < next {
                continue;
            }
            due.insert(name.clone(), now + interval);
            if matches!(ownership.claim(&name), Claim::NotMine) {
                continue;
            }
            match manager.repair_drift().await {
                Ok(repair) if repair.is_empty() => {}
                Ok(repair) => report(&ctx, &name, &repair).await,
                Err(e) => {
                    tracing::warn!(manager = %name, error = %e.message(), "drift check failed");
                }
            }
        }
    }
}

/// The registered fabric managers that ask for drift checks, with their interval.
fn checked_managers(ctx: &ReconcileCtx) -> Vec<(String, Arc<dyn FabricManager>, Duration)> {
    let registry = ctx.dispatcher.registry();
    registry
        .registrations()
        .into_iter()
        .filter_map(|r| match registry.get(&r.name) {
            Some(RoleManager::Fabric(m)) => {
                let interval = m.drift_check_interval()?;
                Some((r.name.clone(), m, interval))
            }
            _ => None,
        })
        .collect()
}

/// Logs `repair` and records it on every NetworkClass of manager `name`.
async fn report(ctx: &ReconcileCtx, name: &str, repair: &DriftRepair) {
    tracing::warn!(
        manager = %name,
        recreated = ?repair.recreated,
        reset = ?repair.reset,
        removed = ?repair.removed,
        "state changed behind the fabric manager's back was put back"
    );
    let message = describe(name, repair);
    for (id, class_name) in classes_of(ctx, name).await {
        let ev = NewEvent::warning(
            "",
            Kind::NetworkClass,
            id,
            class_name,
            REASON_DRIFT_REPAIRED,
            message.clone(),
        );
        events::record_now(ctx.store.as_ref(), ev).await;
    }
}

/// The event's message: how many objects, and the first [`NAMED_IN_MESSAGE`] of them.
pub(crate) fn describe(name: &str, repair: &DriftRepair) -> String {
    let mut parts = Vec::new();
    for (verb, list) in [
        ("recreated", &repair.recreated),
        ("reset", &repair.reset),
        ("removed", &repair.removed),
    ] {
        if list.is_empty() {
            continue;
        }
        let named: Vec<&str> = list
            .iter()
            .take(NAMED_IN_MESSAGE)
            .map(String::as_str)
            .collect();
        let more = list.len().saturating_sub(NAMED_IN_MESSAGE);
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        parts.push(format!(
            "{verb} {} ({}{tail})",
            list.len(),
            named.join(", ")
        ));
    }
    format!(
        "fabric manager '{name}' put back {} object(s) changed behind its back: {}",
        repair.len(),
        parts.join("; ")
    )
}

/// Ids and names of the NetworkClasses whose fabric manager is `name`.
async fn classes_of(ctx: &ReconcileCtx, name: &str) -> Vec<(String, String)> {
    let ids = match ctx.store.ids(Kind::NetworkClass).await {
        Ok(ids) => ids,
        Err(e) => {
            tracing::warn!(error = %e, "drift report: cannot list NetworkClasses");
            return Vec::new();
        }
    };
    let mut classes = Vec::new();
    for id in ids {
        let Ok(Some(rec)) = ctx.store.get(&id).await else {
            continue;
        };
        let Ok(class) = rec.decode::<pb::NetworkClass>() else {
            continue;
        };
        if class.fabric_manager == name {
            classes.push((id, rec.name.unwrap_or_default()));
        }
    }
    classes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_names_what_was_put_back_and_caps_the_list() {
        let repair = DriftRepair {
            recreated: vec!["ACL:sg:1:ingress:1".into()],
            reset: Vec::new(),
            removed: (0..12).map(|i| format!("Logical_Switch:x{i}")).collect(),
        };
        let text = describe("ovn-fabric", &repair);
        assert!(text.starts_with("fabric manager 'ovn-fabric' put back 13 object(s)"));
        assert!(text.contains("recreated 1 (ACL:sg:1:ingress:1)"));
        assert!(text.contains("removed 12 (Logical_Switch:x0,"));
        assert!(text.contains("Logical_Switch:x9 and 2 more)"));
        assert!(!text.contains("x10"));
        assert!(!text.contains("reset"));
    }
}
