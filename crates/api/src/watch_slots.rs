//! Caps on open watches: per credential (token or JWT subject) and per tenant (by id), so one
//! caller cannot hold thousands of watchers and slow everyone else down.
//!
//! Rules:
//! - Every open watch holds one slot of its credential and one of its tenant; a console stream
//!   holds one per collection it watches. The slots are taken, all or none, before the watch
//!   starts; a request beyond a cap is refused with RESOURCE_EXHAUSTED (HTTP 429) naming the
//!   limit and the flag that sets it.
//! - A slot is freed when its watch ends, whatever ends it (the client leaves, the credential
//!   ends, the server shuts down).
//! - Caps are per server process (each replica counts its own streams).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::auth::Authenticated;
use crate::error::{ApiError, ApiResult, Code};

/// Default of `--max-watches-per-token`.
pub const DEFAULT_MAX_WATCHES_PER_TOKEN: usize = 64;
/// Default of `--max-watches-per-tenant`.
pub const DEFAULT_MAX_WATCHES_PER_TENANT: usize = 256;

/// How many watches may be open at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchLimits {
    /// Per token (or JWT subject): `--max-watches-per-token`.
    pub per_token: usize,
    /// Per tenant, every credential of it together: `--max-watches-per-tenant`.
    pub per_tenant: usize,
}

impl Default for WatchLimits {
    fn default() -> Self {
        WatchLimits {
            per_token: DEFAULT_MAX_WATCHES_PER_TOKEN,
            per_tenant: DEFAULT_MAX_WATCHES_PER_TENANT,
        }
    }
}

/// Open watches by slot key.
#[derive(Default)]
pub(crate) struct WatchSlots {
    open: Mutex<HashMap<String, usize>>,
}

/// One open watch's hold on its credential's and tenant's slots; dropping it frees them.
pub struct WatchSlot {
    slots: Arc<WatchSlots>,
    keys: Vec<String>,
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut open = self.slots.lock();
        for key in &self.keys {
            if let Some(n) = open.get_mut(key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    open.remove(key);
                }
            }
        }
    }
}

impl WatchSlots {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        // The counts stay consistent under the lock; a panic elsewhere cannot break them.
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes `n` slots for watches of `who`, all or none: RESOURCE_EXHAUSTED beyond a cap.
    pub(crate) fn take(
        self: &Arc<Self>,
        limits: WatchLimits,
        who: &Authenticated,
        n: usize,
    ) -> ApiResult<Vec<WatchSlot>> {
        let mut keyed = vec![(
            who.credential.slot_key(),
            limits.per_token,
            "this token",
            "--max-watches-per-token",
        )];
        let tenant = match (&who.tenant_id, &who.caller.tenant) {
            (Some(id), _) => Some(format!("tenant:{id}")),
            (None, Some(name)) => Some(format!("tenant-name:{name}")),
            (None, None) => None,
        };
        if let Some(key) = tenant {
            keyed.push((
                key,
                limits.per_tenant,
                "this tenant",
                "--max-watches-per-tenant",
            ));
        }
        let mut open = self.lock();
        for (key, limit, whose, flag) in &keyed {
            let now = open.get(key).copied().unwrap_or(0);
            if now.saturating_add(n) > *limit {
                return Err(ApiError::new(
                    Code::ResourceExhausted,
                    format!(
                        "too many open watches for {whose}: {now} open, this request opens {n}, limit {limit} (server flag {flag}); close some streams first"
                    ),
                ));
            }
        }
        for (key, ..) in &keyed {
            *open.entry(key.clone()).or_insert(0) += n;
        }
        let keys: Vec<String> = keyed.into_iter().map(|(k, ..)| k).collect();
        Ok((0..n)
            .map(|_| WatchSlot {
                slots: Arc::clone(self),
                keys: keys.clone(),
            })
            .collect())
    }

    /// Watches open under a slot key (tests).
    #[cfg(test)]
    fn open(&self, key: &str) -> usize {
        self.lock().get(key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Caller, Credential, Role};

    fn who(token: &str, tenant: &str) -> Authenticated {
        Authenticated {
            caller: Caller {
                subject: token.into(),
                tenant: Some("t".into()),
                role: Role::TenantUser,
            },
            credential: Credential::Stored {
                key: format!("k{token}"),
                id: token.into(),
            },
            tenant_id: Some(tenant.into()),
            expires: None,
        }
    }

    #[test]
    fn caps_per_token_and_tenant_all_or_none_and_freed_on_drop() {
        let slots = Arc::new(WatchSlots::default());
        let limits = WatchLimits {
            per_token: 3,
            per_tenant: 4,
        };
        let a = slots.take(limits, &who("a", "t1"), 3).expect("3 of 3");
        let e = slots
            .take(limits, &who("a", "t1"), 1)
            .err()
            .expect("token full");
        assert!(
            e.message.contains("--max-watches-per-token"),
            "{}",
            e.message
        );
        assert_eq!(e.code, Code::ResourceExhausted);
        let e = slots
            .take(limits, &who("b", "t1"), 2)
            .err()
            .expect("tenant full");
        assert!(
            e.message.contains("--max-watches-per-tenant"),
            "{}",
            e.message
        );
        assert_eq!(slots.open("token:b"), 0, "a refused request takes nothing");
        let b = slots
            .take(limits, &who("b", "t1"), 1)
            .expect("last tenant slot");
        slots
            .take(limits, &who("c", "t2"), 3)
            .expect("another tenant");
        drop(a);
        assert_eq!(slots.open("tenant:t1"), 1);
        slots.take(limits, &who("a", "t1"), 3).expect("freed");
        drop(b);
    }
}
