//! The fabric model's records in the northbound database: the database is the driver's state,
//! with no files beside it.
//!
//! Each record of the shared fabric model ([`osac_backends::fabric_model::Record`]) is one row
//! of ours in `Address_Set`, keyed `record:<record key>`, its JSON in `external_ids`
//! [`RECORD_KEY`] (and a router's transit address in [`TRANSIT_KEY`]). An allocated external
//! address's row holds the address, so an ACL can name the set; the others hold none. The
//! rows are written in the same transaction as the rendered rows of the operation, so a
//! record and what it renders appear and disappear together.

use std::collections::BTreeMap;
use std::net::IpAddr;

use osac_backends::fabric_model::{FabricState, Record};
use osac_ovsdb::{Client, datum, op};
use serde_json::json;

use crate::nb::{self, ID_KEY, MANAGED_KEY, Row};

/// The table record rows live in.
pub const TABLE: &str = "Address_Set";
/// `external_ids` key holding a record's JSON.
pub const RECORD_KEY: &str = "osac-record";
/// `external_ids` key holding a VirtualNetwork router's transit addresses (comma-separated, one
/// per transit prefix).
pub const TRANSIT_KEY: &str = "osac-transit";

/// The row key of the record stored under model key `key`.
pub fn row_key(key: &str) -> String {
    format!("record:{key}")
}

/// The row of `record`; `transit` are the router's transit addresses of a VirtualNetwork.
pub fn row(record: &Record, transit: Option<Vec<IpAddr>>) -> Result<Row, serde_json::Error> {
    let key = record.key();
    let addresses: Vec<String> = match record {
        Record::ExternalIp(e) => vec![e.address.to_string()],
        _ => Vec::new(),
    };
    let name = format!("osac_r_{:016x}", osac_model::hash::fnv1a64(key.bytes()));
    let mut row = Row::new(
        TABLE,
        row_key(&key),
        op::row([
            ("name", json!(name)),
            ("addresses", datum::string_set(&addresses)),
        ]),
    )
    .with_external_id(RECORD_KEY, &serde_json::to_string(record)?);
    if let Some(t) = transit {
        let text: Vec<String> = t.iter().map(IpAddr::to_string).collect();
        row = row.with_external_id(TRANSIT_KEY, &text.join(","));
    }
    Ok(row)
}

/// What a northbound database holds of the model: every record, and routers' transit
/// addresses by VirtualNetwork id.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The records with their indexes.
    pub state: FabricState,
    /// Transit addresses by VirtualNetwork id.
    pub transit: BTreeMap<String, Vec<IpAddr>>,
}

/// A record row that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The database could not be read.
    #[error(transparent)]
    Ovsdb(#[from] osac_ovsdb::Error),
    /// A row of ours holds something that is not a record.
    #[error("record row '{key}' does not hold a record: {message}")]
    Corrupt {
        /// Its key.
        key: String,
        /// Why.
        message: String,
    },
}

/// Reads every record row of ours.
pub async fn load(client: &Client) -> Result<Loaded, LoadError> {
    let select = op::select(
        TABLE,
        vec![op::map_has("external_ids", MANAGED_KEY, "true")],
        Some(&["external_ids"]),
    );
    let reply = client.transact(nb::DATABASE, vec![select]).await?;
    let mut loaded = Loaded::default();
    for row in reply[0]["rows"].as_array().into_iter().flatten() {
        let ids = datum::string_map_items(&row["external_ids"]);
        let (Some(key), Some(text)) = (ids.get(ID_KEY), ids.get(RECORD_KEY)) else {
            continue;
        };
        let corrupt = |message: String| LoadError::Corrupt {
            key: key.clone(),
            message,
        };
        let record: Record = serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?;
        if row_key(&record.key()) != *key {
            return Err(corrupt(format!(
                "it holds the record of '{}'",
                record.key()
            )));
        }
        if let (Record::VirtualNetwork(v), Some(t)) = (&record, ids.get(TRANSIT_KEY)) {
            let t = t
                .split(',')
                .map(str::parse)
                .collect::<Result<Vec<IpAddr>, _>>()
                .map_err(|e| corrupt(format!("transit '{t}': {e}")))?;
            loaded.transit.insert(v.virtual_network_id.clone(), t);
        }
        loaded.state.apply(record.key(), Some(record));
    }
    Ok(loaded)
}
