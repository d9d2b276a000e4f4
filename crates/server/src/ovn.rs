//! The `ovn` driver in the server: the factory that starts `driver: ovn` registrations with
//! the fabric and k8s managers of `osac-ovn`, which program an OVN deployment through its
//! northbound database (docs/ovn.md), and the dev-mode registry on them.

use std::sync::Arc;

use async_trait::async_trait;
use osac_backends::{DriverConfig, DriverContext, DriverFactory, Registration, Role, RoleManager};
use osac_ovn::{OvnFabric, OvnK8s, OvnSettings};

/// Starts `ovn` registrations.
pub struct OvnFactory;

#[async_trait]
impl DriverFactory for OvnFactory {
    async fn start(&self, registration: Registration) -> Result<RoleManager, String> {
        let DriverConfig::Ovn(value) = &registration.driver else {
            return Err(format!(
                "driver '{}' is not ovn",
                registration.driver.kind()
            ));
        };
        let settings: OvnSettings = serde_yaml_ng::from_value(value.clone())
            .map_err(|e| format!("the ovn: block of the registration: {e}"))?;
        Ok(match registration.role {
            Role::Fabric => {
                let fabric = Arc::new(
                    OvnFabric::open(registration, settings)
                        .await
                        .map_err(|e| e.to_string())?,
                );
                RoleManager::Fabric(fabric)
            }
            Role::K8s => RoleManager::K8s(Arc::new(
                OvnK8s::open(registration, settings)
                    .await
                    .map_err(|e| e.to_string())?,
            )),
        })
    }
}

/// A driver context that can start `ovn` registrations.
pub fn with_ovn(ctx: DriverContext) -> DriverContext {
    ctx.with_driver_factory("ovn", Arc::new(OvnFactory))
}
