//! The stored shape of an object and the query/change types around it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use osac_model::Kind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One stored object: identity and metadata as columns, spec/status (and any other top-level
/// fields) as the JSON `body`: parsed ([`Value`], the default) or, for replies that carry it
/// through unparsed, as the stored JSON text ([`RecordText`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Record<Body = Value> {
    pub id: String,
    pub kind: Kind,
    /// Owning tenant; empty for provider objects.
    pub tenant: String,
    pub name: Option<String>,
    pub creator: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub finalizers: Vec<String>,
    /// Bumped by every write; starts at 1.
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
    /// The object's proto-JSON without `id` and `metadata`.
    pub body: Body,
}

/// The stored JSON text of an object body, as the database returns it (PostgreSQL renders
/// `jsonb`, so spacing and key order may differ from what was written; it is the same JSON).
/// Not parsed again on the way out: the store only ever writes serialised JSON (SQLite keeps
/// the text serde_json wrote, PostgreSQL's `jsonb` parsed it on insert).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyText(String);

impl BodyText {
    /// Text read from a body column of this store.
    pub(crate) fn stored(text: String) -> Self {
        Self(text)
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        &self.0
    }
}

/// A record whose body is the stored JSON text ([`crate::Store::get_text`]).
pub type RecordText = Record<BodyText>;

/// A page of records whose bodies are the stored JSON text ([`crate::Store::list_text`]).
pub type PageText = Page<BodyText>;

impl<Body> Record<Body> {
    /// The same record with another representation of its body.
    pub fn with_body<Other>(self, body: Other) -> Record<Other> {
        Record {
            id: self.id,
            kind: self.kind,
            tenant: self.tenant,
            name: self.name,
            creator: self.creator,
            labels: self.labels,
            annotations: self.annotations,
            finalizers: self.finalizers,
            version: self.version,
            created_at: self.created_at,
            deleted_at: self.deleted_at,
            body,
        }
    }
}

impl Record {
    /// This record with its body as JSON text (what [`crate::Store::get_text`] returns).
    pub fn into_text(self) -> Result<RecordText, crate::StoreError> {
        let text = serde_json::to_string(&self.body)
            .map_err(|e| crate::StoreError::Corrupt(format!("{} {}: {e}", self.kind, self.id)))?;
        Ok(self.with_body(BodyText(text)))
    }

    /// A new object of `kind` with a fresh id, version 1, created now.
    pub fn new(kind: Kind, tenant: impl Into<String>, body: Value) -> Self {
        Self {
            id: uuid::Uuid::now_v7().to_string(),
            kind,
            tenant: tenant.into(),
            name: None,
            creator: String::new(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            finalizers: Vec::new(),
            version: 1,
            created_at: Utc::now(),
            deleted_at: None,
            body,
        }
    }

    /// The (field, target) references of this object.
    pub fn references(&self) -> Vec<(String, String)> {
        osac_model::refs::references(self.kind, &self.body)
    }

    /// Name if set, else id: how messages refer to the object.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

/// A reference from `source` (of `source_kind`) through `field` to some target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub source: String,
    pub source_kind: Kind,
    pub field: String,
}

/// A committed write, published on the change feed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Kind collection name.
    pub kind: String,
    pub id: String,
    pub tenant: String,
    /// The row no longer exists.
    pub gone: bool,
    /// Ids the object references (before and after the write), so their controllers wake too.
    pub refs: Vec<String>,
    /// The object's version as written (None: not known, e.g. a notice from an older build).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
}

impl Change {
    /// The change for a record as written.
    pub fn of(record: &Record, gone: bool, previous_refs: &[String]) -> Self {
        let mut refs: Vec<String> = record.references().into_iter().map(|(_, t)| t).collect();
        for r in previous_refs {
            if !refs.contains(r) {
                refs.push(r.clone());
            }
        }
        Self {
            kind: record.kind.collection().to_string(),
            id: record.id.clone(),
            tenant: record.tenant.clone(),
            gone,
            refs,
            version: Some(record.version),
        }
    }

    /// The kind, if known to this build.
    pub fn kind(&self) -> Option<Kind> {
        self.kind.parse().ok()
    }
}

/// A list request: kind, optional tenant scope, CEL filter, order, paging.
#[derive(Debug, Clone)]
pub struct ListQuery {
    pub kind: Kind,
    /// None = every tenant (provider view).
    pub tenant: Option<String>,
    pub filter: String,
    pub order: String,
    pub offset: i64,
    pub limit: i64,
}

impl ListQuery {
    /// All objects of a kind (first page of 1000), creation order.
    pub fn all(kind: Kind) -> Self {
        Self {
            kind,
            tenant: None,
            filter: String::new(),
            order: String::new(),
            offset: 0,
            limit: 1000,
        }
    }
}

/// One page of a list and the total matching count.
#[derive(Debug, Clone)]
pub struct Page<Body = Value> {
    pub total: i64,
    pub items: Vec<Record<Body>>,
}

impl Page {
    /// This page with its bodies as JSON text (what [`crate::Store::list_text`] returns).
    pub fn into_text(self) -> Result<PageText, crate::StoreError> {
        Ok(Page {
            total: self.total,
            items: self
                .items
                .into_iter()
                .map(Record::into_text)
                .collect::<Result<_, _>>()?,
        })
    }
}

/// The enum-number resolver the filter translator needs, for one kind.
pub fn enum_resolver(kind: Kind) -> impl Fn(&[String], i64) -> Option<String> {
    move |path, n| osac_model::enums::enum_name(kind, path, n)
}

/// Formats a timestamp as stored in SQLite (sortable text).
pub(crate) fn ts_text(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Parses a SQLite timestamp.
pub(crate) fn parse_ts(s: &str) -> Result<DateTime<Utc>, crate::StoreError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| crate::StoreError::Corrupt(format!("timestamp '{s}': {e}")))
}

/// Parses a JSON text column.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, crate::StoreError> {
    serde_json::from_str(s).map_err(|e| crate::StoreError::Corrupt(format!("json column: {e}")))
}

/// Serialises a value for a JSON text column.
pub(crate) fn to_json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_string())
}

impl Record {
    /// Decodes the body into its proto type (id and metadata are left unset).
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, crate::StoreError> {
        serde_json::from_value(self.body.clone())
            .map_err(|e| crate::StoreError::Corrupt(format!("{} {}: {e}", self.kind, self.id)))
    }

    /// Replaces the body with a proto value (its id and metadata are dropped: columns own them).
    pub fn encode<T: Serialize>(&mut self, value: &T) -> Result<(), crate::StoreError> {
        let mut body =
            serde_json::to_value(value).map_err(|e| crate::StoreError::Corrupt(e.to_string()))?;
        if let Some(map) = body.as_object_mut() {
            map.remove("id");
            map.remove("metadata");
        }
        self.body = body;
        Ok(())
    }
}
