-- Metering. An interval is one stretch of time in which an object accrued resource-seconds
-- with one set of dimensions; it is written in the transaction of the state change that opens
-- or closes it. Its id is `<object id>.<ordinal>`. Times are microseconds since the epoch.
CREATE TABLE usage_intervals (
    id                    TEXT PRIMARY KEY,
    object_id             TEXT NOT NULL,
    ordinal               BIGINT NOT NULL,
    signature             TEXT NOT NULL,
    tenant                TEXT NOT NULL,
    tenant_id             TEXT NOT NULL,
    kind                  TEXT NOT NULL,
    object_name           TEXT NOT NULL,
    network_class         TEXT NOT NULL,
    ip_family             TEXT NOT NULL,
    attached              TEXT NOT NULL,
    parent_kind           TEXT NOT NULL,
    parent_id             TEXT NOT NULL,
    started_us            BIGINT NOT NULL,
    ended_us              BIGINT,
    end_reason            TEXT,
    -- When the object's deletion was requested and when its row went away.
    deletion_requested_us BIGINT,
    deletion_finished_us  BIGINT,
    -- End of the last periodic usage record (starts at started_us).
    reported_us           BIGINT NOT NULL,
    UNIQUE (object_id, ordinal)
);
CREATE UNIQUE INDEX usage_intervals_open ON usage_intervals (object_id) WHERE ended_us IS NULL;
CREATE INDEX usage_intervals_time ON usage_intervals (started_us, ended_us);
CREATE INDEX usage_intervals_tenant ON usage_intervals (tenant, started_us);

-- CloudEvents waiting to be published, oldest first; a row is deleted once the broker
-- acknowledged it. `payload` is the complete structured-mode JSON.
CREATE TABLE metering_outbox (
    seq      BIGSERIAL PRIMARY KEY,
    event_id TEXT NOT NULL UNIQUE,
    subject  TEXT NOT NULL,
    payload  TEXT NOT NULL
);
