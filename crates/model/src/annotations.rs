//! Bookkeeping annotations: the controllers write them on objects for themselves, the API hides
//! them from clients and keeps them across updates. Both read the names from here.

pub use crate::labels::HOSTING_CLUSTER_ANNOTATION;

/// Annotation holding the hash of the spec the controller last acted on with a final outcome
/// (READY or FAILED): a resync with an unchanged spec skips the manager call.
pub const APPLIED_SPEC_ANNOTATION: &str = crate::defaults::reserved_key!("applied-spec");

/// Annotation of an ExternalIPAttachment: the VirtualNetwork its DNAT was programmed in, so the
/// delete can undo it even after the target is gone.
pub const VIRTUAL_NETWORK_ANNOTATION: &str = crate::defaults::reserved_key!("virtual-network");

/// Annotation of a parked host: the interface that is on the parking network.
pub const PARKED_ANNOTATION: &str = crate::defaults::reserved_key!("parked");

/// Annotation counting failed undo attempts of a deleted object; the cleanup of a deleted
/// workload gives up on one of its auto-provisioned objects after `cleanup_retry_limit`.
pub const DELETE_FAILURES_ANNOTATION: &str = crate::defaults::reserved_key!("delete-failures");

/// Whether `key` is one of the controllers' bookkeeping annotations (hidden from clients, kept
/// across updates).
pub fn is_internal(key: &str) -> bool {
    [
        APPLIED_SPEC_ANNOTATION,
        VIRTUAL_NETWORK_ANNOTATION,
        HOSTING_CLUSTER_ANNOTATION,
        PARKED_ANNOTATION,
        DELETE_FAILURES_ANNOTATION,
    ]
    .contains(&key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookkeeping_annotations_are_internal_and_user_ones_are_not() {
        assert!(is_internal(APPLIED_SPEC_ANNOTATION));
        assert!(is_internal(HOSTING_CLUSTER_ANNOTATION));
        assert!(is_internal(DELETE_FAILURES_ANNOTATION));
        assert!(!is_internal("osac.openshift.io/other"));
        assert!(!is_internal("team"));
    }
}
