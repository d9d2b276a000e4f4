-- Several `osac server` processes (replicas) may share this database. Each one registers
-- itself and renews its row; controller work is split into shards, each reconciled by the
-- replica holding its lease. `fence` grows every time a shard changes hands: a write that
-- carries an older fence was made under a lost lease and is refused.
CREATE TABLE replicas (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    address    TEXT NOT NULL,
    dataplane  BOOLEAN NOT NULL DEFAULT FALSE,
    started_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE shard_leases (
    shard      INTEGER PRIMARY KEY,
    owner      TEXT,
    fence      BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);

-- Driver records written by several replicas (the sim managers' tables): every batch gets the
-- next generation of its namespace and is journalled, so a replica catches up on what the
-- others wrote since the generation it last saw. Old journal rows are pruned; a replica that
-- fell further behind reloads the namespace.
CREATE TABLE kv_namespaces (
    ns           TEXT PRIMARY KEY,
    generation   BIGINT NOT NULL,
    pruned_below BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE kv_journal (
    ns         TEXT NOT NULL,
    generation BIGINT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT,
    PRIMARY KEY (ns, generation, key)
);
