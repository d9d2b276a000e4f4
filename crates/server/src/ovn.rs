//! The `ovn` driver in the server: the factory that starts `driver: ovn` registrations with
//! the fabric manager of `osac-ovn`, which programs an OVN deployment through its northbound
//! database (docs/ovn.md).

use std::sync::Arc;

use async_trait::async_trait;
use osac_backends::{DriverConfig, DriverContext, DriverFactory, Registration, Role, RoleManager};
use osac_ovn::{OvnFabric, OvnSettings};

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
        if registration.role != Role::Fabric {
            return Err(
                "the ovn driver serves the fabric role; register the k8s role with another driver"
                    .into(),
            );
        }
        let settings: OvnSettings = serde_yaml_ng::from_value(value.clone())
            .map_err(|e| format!("the ovn: block of the registration: {e}"))?;
        let fabric = Arc::new(
            OvnFabric::open(registration, settings)
                .await
                .map_err(|e| e.to_string())?,
        );
        Ok(RoleManager::Fabric(fabric))
    }
}

/// A driver context that can start `ovn` registrations.
pub fn with_ovn(ctx: DriverContext) -> DriverContext {
    ctx.with_driver_factory("ovn", Arc::new(OvnFactory))
}
