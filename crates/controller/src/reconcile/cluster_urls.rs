//! A cluster's URLs under its tenant's DNS domain (the tenant's first `spec.domains` entry):
//! `status.api_url` = `https://api.<cluster>.<domain>:6443`, `status.console_url` =
//! `https://console-openshift-console.apps.<cluster>.<domain>`, and `status.dns_records`, the
//! records those names need (`api.<cluster>.<domain>` → the API external address,
//! `*.apps.<cluster>.<domain>` → the ingress one). Publishing the records is the provider's
//! DNS (not done here). Without a domain (or a cluster name) all three are empty.

use osac_model::{Kind, pb};
use osac_store::{ListQuery, Store, StoreError};

/// The first DNS domain of the tenant named `tenant`, if it has one.
async fn tenant_domain(store: &dyn Store, tenant: &str) -> Result<Option<String>, StoreError> {
    let page = store
        .list(&ListQuery {
            kind: Kind::Tenant,
            tenant: Some(String::new()),
            filter: format!(
                "this.metadata.name == {}",
                serde_json::Value::String(tenant.to_string())
            ),
            order: String::new(),
            offset: 0,
            limit: 1,
        })
        .await?;
    let Some(rec) = page.items.into_iter().next() else {
        return Ok(None);
    };
    let t: pb::Tenant = rec.decode()?;
    Ok(t.spec
        .and_then(|s| s.domains.into_iter().next())
        .map(|d| d.trim_end_matches('.').to_ascii_lowercase())
        .filter(|d| !d.is_empty()))
}

/// The URLs and DNS records of cluster `name` under `domain` (None: none), addresses from
/// `status`.
pub(crate) fn urls(name: &str, domain: Option<&str>, status: &mut pb::ClusterStatus) {
    let (Some(domain), false) = (domain, name.is_empty()) else {
        status.api_url.clear();
        status.console_url.clear();
        status.dns_records.clear();
        return;
    };
    status.api_url = format!("https://api.{name}.{domain}:6443");
    status.console_url = format!("https://console-openshift-console.apps.{name}.{domain}");
    status.dns_records = vec![
        pb::ClusterDnsRecord {
            name: format!("api.{name}.{domain}"),
            endpoint: pb::ExternalIpAttachmentEndpoint::Api as i32,
            address: status.external_ip_address.clone(),
        },
        pb::ClusterDnsRecord {
            name: format!("*.apps.{name}.{domain}"),
            endpoint: pb::ExternalIpAttachmentEndpoint::Ingress as i32,
            address: status.ingress_external_ip_address.clone(),
        },
    ];
}

/// Sets the URLs of the cluster `name` of `tenant` in `status`.
pub(crate) async fn set_urls(
    store: &dyn Store,
    tenant: &str,
    name: &str,
    status: &mut pb::ClusterStatus,
) -> Result<(), StoreError> {
    let domain = tenant_domain(store, tenant).await?;
    urls(name, domain.as_deref(), status);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_records_follow_the_domain_and_addresses() {
        let mut status = pb::ClusterStatus {
            external_ip_address: "203.0.113.5".into(),
            ..Default::default()
        };
        urls("c1", Some("example.com"), &mut status);
        assert_eq!(status.api_url, "https://api.c1.example.com:6443");
        assert_eq!(
            status.console_url,
            "https://console-openshift-console.apps.c1.example.com"
        );
        assert_eq!(status.dns_records[0].name, "api.c1.example.com");
        assert_eq!(status.dns_records[0].address, "203.0.113.5");
        assert_eq!(status.dns_records[1].name, "*.apps.c1.example.com");
        assert_eq!(status.dns_records[1].address, "");
        urls("c1", None, &mut status);
        assert!(status.api_url.is_empty() && status.dns_records.is_empty());
    }
}
