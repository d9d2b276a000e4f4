-- Every object of every kind; `body` is its proto-JSON without id and metadata.
CREATE TABLE objects (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL UNIQUE,
    kind        TEXT NOT NULL,
    tenant      TEXT NOT NULL,
    name        TEXT,
    creator     TEXT NOT NULL,
    version     INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    deleted_at  TEXT,
    labels      TEXT NOT NULL DEFAULT '{}',
    annotations TEXT NOT NULL DEFAULT '{}',
    finalizers  TEXT NOT NULL DEFAULT '[]',
    body        TEXT NOT NULL
);
CREATE UNIQUE INDEX objects_name ON objects (kind, tenant, name) WHERE name IS NOT NULL;
CREATE INDEX objects_kind_tenant ON objects (kind, tenant, seq);
CREATE UNIQUE INDEX external_ip_address ON objects (
    json_extract(body, '$.status.pool'), json_extract(body, '$.status.address')
) WHERE kind = 'external_ips' AND json_extract(body, '$.status.address') IS NOT NULL;

CREATE TABLE object_labels (
    object_id TEXT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (object_id, key)
);
CREATE INDEX object_labels_kv ON object_labels (key, value, object_id);

CREATE TABLE object_refs (
    object_id TEXT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    field     TEXT NOT NULL,
    target_id TEXT NOT NULL,
    PRIMARY KEY (object_id, field)
);
CREATE INDEX object_refs_target ON object_refs (target_id, field);

-- Small durable key/value records for drivers (the sim fabric keeps its tables here).
CREATE TABLE kv (
    ns    TEXT NOT NULL,
    key   TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (ns, key)
);
