-- Bandwidth metering. The dataplane's byte counters of each NAT path (an
-- ExternalIPAttachment's DNAT, a NATGateway's SNAT) are cumulative and start again from zero
-- when the dataplane recreates them: `traffic_counters` keeps the last raw reading of each
-- (with the counter's incarnation, `epoch`), `traffic_usage` the bytes accumulated per path
-- and 60-second bucket. Times are Unix seconds.
CREATE TABLE traffic_counters (
    kind          TEXT NOT NULL,
    object_id     TEXT NOT NULL,
    epoch         TEXT NOT NULL,
    ingress_bytes BIGINT NOT NULL,
    egress_bytes  BIGINT NOT NULL,
    read_at       BIGINT NOT NULL,
    PRIMARY KEY (kind, object_id)
);

CREATE TABLE traffic_usage (
    kind           TEXT NOT NULL,
    object_id      TEXT NOT NULL,
    bucket_start   BIGINT NOT NULL,
    tenant      TEXT NOT NULL,
    external_ip_id TEXT NOT NULL,
    ingress_bytes  BIGINT NOT NULL,
    egress_bytes   BIGINT NOT NULL,
    PRIMARY KEY (kind, object_id, bucket_start)
);
CREATE INDEX traffic_usage_time ON traffic_usage (bucket_start);
CREATE INDEX traffic_usage_tenant ON traffic_usage (tenant, bucket_start);
