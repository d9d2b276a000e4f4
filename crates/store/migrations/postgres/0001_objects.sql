-- Every object of every kind; `body` is its proto-JSON without id and metadata.
CREATE TABLE objects (
    seq         BIGSERIAL PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    kind        TEXT NOT NULL,
    tenant      TEXT NOT NULL,
    name        TEXT,
    creator     TEXT NOT NULL,
    version     BIGINT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    deleted_at  TIMESTAMPTZ,
    labels      TEXT NOT NULL DEFAULT '{}',
    annotations JSONB NOT NULL DEFAULT '{}',
    finalizers  TEXT NOT NULL DEFAULT '[]',
    body        JSONB NOT NULL
);
CREATE UNIQUE INDEX objects_name ON objects (kind, tenant, name) WHERE name IS NOT NULL;
CREATE INDEX objects_kind_tenant ON objects (kind, tenant, seq);
CREATE UNIQUE INDEX external_ip_address ON objects (
    (body #>> '{status,pool}'), (body #>> '{status,address}')
) WHERE kind = 'external_ips' AND (body #>> '{status,address}') IS NOT NULL;

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

CREATE TABLE kv (
    ns    TEXT NOT NULL,
    key   TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (ns, key)
);
