//! The `ovn` driver of the k8s role: a hosting cluster is a set of OVN chassis
//! ([`OvnSettings::chassis`]). A subnet's logical switch already spans every chassis, so an
//! overlay has nothing to bridge: `create_subnet_overlay` validates the request as every k8s
//! driver does, refuses a segment another subnet holds on the cluster, and records the overlay
//! (with the VIP range the cluster's load balancer may use, which OVN's DHCP never hands out:
//! it answers each port with that port's own addresses only). The fabric role binds a VM's
//! port to a chassis of its hosting cluster ([`OvnSettings::chassis_for`]).
//!
//! The records live in the northbound database, like the fabric role's: one `Address_Set` row
//! per overlay, keyed `overlay:<cluster>/<subnet>`, holding the VIP range, the request's JSON
//! in `external_ids` [`OVERLAY_KEY`], and [`nb::MANAGED_KEY`]` = k8s` — the fabric role's
//! rows say `true`, so neither role's convergence ever reads or deletes the other's rows.

use std::collections::BTreeMap;

use async_trait::async_trait;
use osac_backends::checks;
use osac_backends::{
    CreateSubnetOverlayRequest, DeleteSubnetOverlayRequest, K8sManager, OpError, Registration,
};
use osac_ovsdb::{Address, Client, Tls, datum, op};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::{OvnError, OvnSettings, connect, northbound_failure, within_deadline};
use crate::nb::{self, ID_KEY, MANAGED_KEY};

/// The table overlay records live in.
pub const TABLE: &str = "Address_Set";
/// [`MANAGED_KEY`]'s value on the k8s role's rows.
pub const MANAGED_BY_K8S: &str = "k8s";
/// `external_ids` key holding an overlay's request JSON.
pub const OVERLAY_KEY: &str = "osac-overlay";

/// The row key of hosting cluster `cluster`'s overlay of subnet `subnet`.
pub fn overlay_key(cluster: &str, subnet: &str) -> String {
    format!("overlay:{cluster}/{subnet}")
}

/// A registered `ovn` k8s manager. Operations are serialised (one northbound writer).
pub struct OvnK8s {
    registration: Registration,
    settings: OvnSettings,
    addresses: Vec<Address>,
    tls: Option<Tls>,
    inner: Mutex<Inner>,
}

struct Inner {
    client: Option<Client>,
    /// The overlays recorded, by row key.
    overlays: BTreeMap<String, CreateSubnetOverlayRequest>,
}

impl OvnK8s {
    /// Checks that every hosting cluster of the registration has chassis, connects to the
    /// northbound database and reads the overlays recorded there.
    pub async fn open(registration: Registration, settings: OvnSettings) -> Result<Self, OvnError> {
        let addresses = Address::parse_list(&settings.northbound)
            .map_err(|e| OvnError::Settings(e.to_string()))?;
        if registration.hosting_clusters.is_empty() {
            return Err(OvnError::Settings(
                "a k8s registration needs hosting_clusters".into(),
            ));
        }
        for cluster in &registration.hosting_clusters {
            if settings.chassis.get(cluster).is_none_or(Vec::is_empty) {
                return Err(OvnError::Settings(format!(
                    "hosting cluster '{cluster}' has no chassis: list them under chassis.{cluster}"
                )));
            }
        }
        let tls = settings.tls(&addresses)?;
        let client = connect(&addresses, tls.as_ref())
            .await
            .map_err(|e| OvnError::Northbound(e.to_string()))?;
        let overlays = load(&client)
            .await
            .map_err(|e| OvnError::Northbound(e.to_string()))?;
        Ok(OvnK8s {
            registration,
            settings,
            addresses,
            tls,
            inner: Mutex::new(Inner {
                client: Some(client),
                overlays,
            }),
        })
    }

    /// The chassis of hosting cluster `cluster` (empty when it is not served).
    pub fn chassis_of(&self, cluster: &str) -> &[String] {
        self.settings
            .chassis
            .get(cluster)
            .map_or(&[], Vec::as_slice)
    }

    /// A recorded overlay (tests, dev tooling).
    pub async fn overlay(
        &self,
        subnet_id: &str,
        cluster: &str,
    ) -> Option<CreateSubnetOverlayRequest> {
        self.inner
            .lock()
            .await
            .overlays
            .get(&overlay_key(cluster, subnet_id))
            .cloned()
    }

    async fn create_overlay(&self, r: &CreateSubnetOverlayRequest) -> Result<(), OpError> {
        checks::subnet_overlay(r, &self.registration.hosting_clusters)?;
        let mut inner = self.inner.lock().await;
        let other = inner.overlays.values().find(|o| {
            o.hosting_cluster == r.hosting_cluster
                && o.segment_id == r.segment_id
                && o.subnet_id != r.subnet_id
        });
        checks::segment_free(r, other.map(|o| o.subnet_id.as_str()))?;
        let key = overlay_key(&r.hosting_cluster, &r.subnet_id);
        let text = serde_json::to_string(r)
            .map_err(|e| OpError::permanent(format!("the overlay cannot be encoded: {e}")))?;
        let vips: Vec<String> = r.vip_cidr.iter().map(ToString::to_string).collect();
        let row = op::row([
            (
                "name",
                json!(format!(
                    "osac_o_{:016x}",
                    osac_model::hash::fnv1a64(key.bytes())
                )),
            ),
            ("addresses", datum::string_set(&vips)),
            (
                "external_ids",
                datum::string_map([
                    (MANAGED_KEY, MANAGED_BY_K8S),
                    (ID_KEY, key.as_str()),
                    (OVERLAY_KEY, text.as_str()),
                ]),
            ),
        ]);
        // Rewritten only when the database does not hold it as it should (a row deleted or
        // edited by hand is put back by the controllers' next resync of the subnet).
        let held = self.read_row(&mut inner, &key).await?;
        if held.as_ref() != Some(&row_view(&row)) {
            let ops = vec![op::delete(TABLE, ours(&key)), op::insert(TABLE, row, None)];
            self.transact(&mut inner, ops).await?;
        }
        inner.overlays.insert(key, r.clone());
        Ok(())
    }

    async fn delete_overlay(&self, r: &DeleteSubnetOverlayRequest) -> Result<(), OpError> {
        checks::hosting_cluster(&r.hosting_cluster, &self.registration.hosting_clusters)?;
        let mut inner = self.inner.lock().await;
        let key = overlay_key(&r.hosting_cluster, &r.subnet_id);
        self.transact(&mut inner, vec![op::delete(TABLE, ours(&key))])
            .await?;
        inner.overlays.remove(&key);
        Ok(())
    }

    /// The columns we write of row `key`, as the database holds them (None when absent).
    async fn read_row(&self, inner: &mut Inner, key: &str) -> Result<Option<Value>, OpError> {
        let select = op::select(
            TABLE,
            ours(key),
            Some(&["name", "addresses", "external_ids"]),
        );
        let reply = self.transact(inner, vec![select]).await?;
        Ok(reply
            .first()
            .and_then(|r| r["rows"].as_array())
            .and_then(|rows| rows.first())
            .map(|row| {
                json!({
                    "name": row["name"],
                    "addresses": datum::string_set_items(&row["addresses"]),
                    "external_ids": datum::string_map_items(&row["external_ids"]),
                })
            }))
    }

    /// Runs `ops` in one transaction, reconnecting when the connection is gone.
    async fn transact(&self, inner: &mut Inner, ops: Vec<Value>) -> Result<Vec<Value>, OpError> {
        if inner.client.is_none() {
            inner.client = Some(
                connect(&self.addresses, self.tls.as_ref())
                    .await
                    .map_err(northbound_failure)?,
            );
        }
        let Some(client) = inner.client.as_ref() else {
            return Err(northbound_failure("no connection"));
        };
        match within_deadline(client.transact(nb::DATABASE, ops)).await {
            Ok(reply) => Ok(reply),
            Err(e) => {
                if matches!(e, osac_ovsdb::Error::Disconnected(_)) {
                    inner.client = None;
                }
                Err(northbound_failure(e))
            }
        }
    }
}

/// The conditions selecting row `key` of ours.
fn ours(key: &str) -> Vec<Value> {
    vec![
        op::map_has("external_ids", MANAGED_KEY, MANAGED_BY_K8S),
        op::map_has("external_ids", ID_KEY, key),
    ]
}

/// A row to insert in the shape [`OvnK8s::read_row`] answers.
fn row_view(row: &serde_json::Map<String, Value>) -> Value {
    json!({
        "name": row["name"],
        "addresses": datum::string_set_items(&row["addresses"]),
        "external_ids": datum::string_map_items(&row["external_ids"]),
    })
}

/// Every overlay recorded in the database.
async fn load(
    client: &Client,
) -> Result<BTreeMap<String, CreateSubnetOverlayRequest>, osac_ovsdb::Error> {
    let select = op::select(
        TABLE,
        vec![op::map_has("external_ids", MANAGED_KEY, MANAGED_BY_K8S)],
        Some(&["external_ids"]),
    );
    let reply = client.transact(nb::DATABASE, vec![select]).await?;
    let mut overlays = BTreeMap::new();
    for row in reply
        .first()
        .and_then(|r| r["rows"].as_array())
        .into_iter()
        .flatten()
    {
        let ids = datum::string_map_items(&row["external_ids"]);
        let Some(text) = ids.get(OVERLAY_KEY) else {
            continue;
        };
        match serde_json::from_str::<CreateSubnetOverlayRequest>(text) {
            Ok(o) => {
                overlays.insert(overlay_key(&o.hosting_cluster, &o.subnet_id), o);
            }
            // A row edited into nonsense is rewritten by the next create of its overlay.
            Err(e) => {
                tracing::warn!(row = ?ids.get(ID_KEY), error = %e, "ovn: unreadable overlay record")
            }
        }
    }
    Ok(overlays)
}

#[async_trait]
impl K8sManager for OvnK8s {
    fn registration(&self) -> &Registration {
        &self.registration
    }

    async fn create_subnet_overlay(&self, req: &CreateSubnetOverlayRequest) -> Result<(), OpError> {
        self.create_overlay(req).await
    }

    async fn delete_subnet_overlay(&self, req: &DeleteSubnetOverlayRequest) -> Result<(), OpError> {
        self.delete_overlay(req).await
    }
}
