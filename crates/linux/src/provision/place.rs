//! Where a provisioner's machines live: the namespaces its DHCP clients run in and what makes
//! a machine's interfaces exist. On the linux fabric the fabric itself creates a machine's
//! namespace and veths with its ports ([`FabricMachines`]); another dataplane (an OVN sandbox's
//! hypervisors) plugs them itself through its own [`MachinePlace`], and the provisioner —
//! booting, power, DHCP supervision, cluster VIPs — stays the same.

use async_trait::async_trait;
use osac_backends::OpError;

use crate::cmd;
use crate::names::{MACHINE_NS_PREFIX, short_hash};

/// Where machines live and how their interfaces come to be.
#[async_trait]
pub trait MachinePlace: Send + Sync {
    /// The prefix every machine namespace starts with (the supervisor looks only at these).
    fn prefix(&self) -> &str;

    /// The namespace of machine `key` (a VM's instance id, an inventory host's id).
    fn namespace(&self, key: &str) -> String {
        format!("{}{}", self.prefix(), short_hash(key))
    }

    /// Makes machine `key`'s namespace and interfaces exist before its DHCP clients start.
    async fn prepare(&self, _key: &str) -> Result<(), OpError> {
        Ok(())
    }

    /// Brings every machine's interfaces in line with the network; runs before each pass of
    /// the DHCP supervisor (an idle cluster agent's port appears or moves without a
    /// provisioner call).
    async fn sync(&self) {}

    /// Removes machine `key`'s namespace and what joins it to the network.
    async fn remove(&self, key: &str) -> Result<(), OpError> {
        cmd::delete_netns(&self.namespace(key))
            .await
            .map_err(|e| OpError::backend_transient(e.to_string()))
    }
}

/// The machines of the linux fabric: namespaces `osac-m-…` it creates with their ports.
pub struct FabricMachines;

impl MachinePlace for FabricMachines {
    fn prefix(&self) -> &str {
        MACHINE_NS_PREFIX
    }
}
