-- Usage belongs to a tenant's identity, its Tenant object's id: a tenant deleted and created
-- again under the same name is another tenant and must not read its predecessor's usage. The
-- query selects intervals and bandwidth rows by `tenant_id`, so the bandwidth rows carry it.
ALTER TABLE traffic_usage ADD COLUMN tenant_id TEXT NOT NULL DEFAULT '';

-- Rows written before the column existed take the tenant id of the metered object's
-- intervals (a NAT gateway's own, an attachment's ExternalIP's), when those name the row's
-- tenant and agree on one id; otherwise they keep '' and are read only by queries of every
-- tenant.
UPDATE traffic_usage SET tenant_id = (
    SELECT CASE WHEN COUNT(DISTINCT u.tenant_id) = 1 THEN MIN(u.tenant_id) ELSE '' END
    FROM usage_intervals u
    WHERE u.object_id = CASE WHEN traffic_usage.kind = 'nat_gateway'
                             THEN traffic_usage.object_id
                             ELSE traffic_usage.external_ip_id END
      AND u.tenant = traffic_usage.tenant
      AND u.tenant_id <> ''
);

DROP INDEX traffic_usage_tenant;
CREATE INDEX traffic_usage_tenant_id ON traffic_usage (tenant_id, bucket_start);
DROP INDEX usage_intervals_tenant;
CREATE INDEX usage_intervals_tenant_id ON usage_intervals (tenant_id, started_us);

-- How many of a bucket's bytes the periodic usage records already carried: each record of an
-- ExternalIP or NATGateway interval carries what its rows counted beyond this, then moves it
-- up, so every byte is in one record at most. Rows written before the records carried bytes
-- count as carried.
ALTER TABLE traffic_usage ADD COLUMN reported_ingress BIGINT NOT NULL DEFAULT 0;
ALTER TABLE traffic_usage ADD COLUMN reported_egress BIGINT NOT NULL DEFAULT 0;
UPDATE traffic_usage SET reported_ingress = ingress_bytes, reported_egress = egress_bytes;
-- The rows with bytes not yet carried, by path (a NAT gateway's) and by ExternalIP (the
-- paths using its address).
CREATE INDEX traffic_usage_uncarried_path ON traffic_usage (object_id)
    WHERE ingress_bytes <> reported_ingress OR egress_bytes <> reported_egress;
CREATE INDEX traffic_usage_uncarried_ip ON traffic_usage (external_ip_id)
    WHERE ingress_bytes <> reported_ingress OR egress_bytes <> reported_egress;
