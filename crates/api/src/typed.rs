//! API objects as their proto messages: [`Object`] holds the message of one kind, and is what a
//! create enters the service with (gRPC hands over the decoded message; REST parses its JSON
//! body once with [`Object::from_json`]). The per-kind rules in `resources` take the message of
//! their kind; JSON is produced only where the store needs it ([`Object::to_json`]), and where
//! an update applies the message to the stored object ([`Object::request_json`]). The size
//! limits are checked on the message itself ([`Object::check_bounds`]).

use osac_model::bounds::{MessageError, check_message};
use osac_model::{Kind, pb};
use serde_json::Value;

use crate::error::{ApiError, ApiResult, Code};
use crate::object::{UserMetadata, parse};

macro_rules! objects {
    ($($kind:ident => $msg:ty),* $(,)?) => {
        /// One API object as the proto message of its kind (a variant per [`Kind`]).
        #[derive(Debug, Clone, PartialEq)]
        pub enum Object {
            $($kind($msg),)*
        }

        impl Object {
            /// The kind of the object.
            pub fn kind(&self) -> Kind {
                match self {
                    $(Object::$kind(_) => Kind::$kind,)*
                }
            }

            /// Parses the JSON object of a request (proto field names, enums by name, unknown
            /// fields and wrong types INVALID_ARGUMENT naming the field).
            pub fn from_json(kind: Kind, value: Value) -> ApiResult<Self> {
                Ok(match kind {
                    $(Kind::$kind => Object::$kind(parse(kind, value)?),)*
                })
            }

            /// The object's JSON form (`{"id","metadata",…}`): proto-JSON, defaults omitted.
            fn serialize(&self) -> serde_json::Result<Value> {
                match self {
                    $(Object::$kind(m) => serde_json::to_value(m),)*
                }
            }

            /// The object's `metadata` as sent.
            pub fn metadata(&self) -> Option<&pb::Metadata> {
                match self {
                    $(Object::$kind(m) => m.metadata.as_ref(),)*
                }
            }

            /// Checks the size limits of [`osac_model::bounds`] on an object a client sent, as its
            /// JSON form would be checked but without writing it; a message without a JSON form is
            /// INVALID_ARGUMENT.
            pub fn check_bounds(&self) -> ApiResult<()> {
                let checked = match self {
                    $(Object::$kind(m) => check_message(m),)*
                };
                checked.map_err(|e| match e {
                    MessageError::Invalid(invalid) => invalid.into(),
                    MessageError::Unserializable(message) => ApiError::invalid(message),
                })
            }
        }

        $(impl From<$msg> for Object {
            fn from(message: $msg) -> Self {
                Object::$kind(message)
            }
        })*
    };
}

objects!(
    NetworkClass => pb::NetworkClass,
    ExternalIpPool => pb::ExternalIpPool,
    HostType => pb::HostType,
    BareMetalTemplate => pb::BareMetalTemplate,
    BareMetalInstanceType => pb::BareMetalInstanceType,
    Host => pb::Host,
    Tenant => pb::Tenant,
    VirtualNetwork => pb::VirtualNetwork,
    Subnet => pb::Subnet,
    SecurityGroup => pb::SecurityGroup,
    ExternalIp => pb::ExternalIp,
    ComputeInstance => pb::ComputeInstance,
    BareMetalInstance => pb::BareMetalInstance,
    Cluster => pb::Cluster,
    ExternalIpAttachment => pb::ExternalIpAttachment,
    NatGateway => pb::NatGateway,
    Event => pb::Event,
);

impl Object {
    /// The user-settable metadata of the object (empty strings count as unset).
    pub fn user_metadata(&self) -> UserMetadata {
        let Some(m) = self.metadata() else {
            return UserMetadata::default();
        };
        let set = |s: &String| (!s.is_empty()).then(|| s.clone());
        UserMetadata {
            name: set(&m.name),
            tenant: set(&m.tenant),
            labels: m
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            annotations: m
                .annotations
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            version: (m.version != 0).then_some(m.version),
        }
    }

    /// The object's JSON form (`{"id","metadata",…}`): proto-JSON, defaults omitted.
    pub fn to_json(&self) -> ApiResult<Value> {
        self.serialize()
            .map_err(|e| ApiError::new(Code::Internal, e.to_string()))
    }

    /// The JSON form of an object as a client sent it: a message without one (an enum field
    /// holding a number that names no value) is INVALID_ARGUMENT.
    pub fn request_json(&self) -> ApiResult<Value> {
        self.serialize()
            .map_err(|e| ApiError::invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_json_object_parses_into_the_message_of_its_kind() {
        let body = json!({
            "metadata": {"name": "web", "tenant": "acme", "labels": {"tier": "front"}},
            "spec": {"virtual_network": "vn-1", "ipv4_cidr": "10.0.1.0/24"}
        });
        let obj = Object::from_json(Kind::Subnet, body).expect("a valid subnet");
        assert_eq!(obj.kind(), Kind::Subnet);
        let Object::Subnet(s) = &obj else {
            panic!("not a subnet: {obj:?}")
        };
        assert_eq!(
            s.spec.as_ref().map(|s| s.ipv4_cidr.as_str()),
            Some("10.0.1.0/24")
        );
        let meta = obj.user_metadata();
        assert_eq!(meta.name.as_deref(), Some("web"));
        assert_eq!(meta.tenant.as_deref(), Some("acme"));
        assert_eq!(meta.labels.get("tier").map(String::as_str), Some("front"));
        assert_eq!(meta.version, None);
    }

    #[test]
    fn unknown_fields_and_wrong_types_name_the_field() {
        let e = Object::from_json(Kind::Subnet, json!({"spec": {"cidr": "10.0.0.0/24"}}))
            .expect_err("unknown field");
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(e.message.starts_with("spec.cidr: unknown field"), "{e}");
        assert!(e.message.ends_with("(in Subnet object)"), "{e}");
        let e = Object::from_json(Kind::Tenant, json!({"metadata": {"labels": {"a": 1}}}))
            .expect_err("a number as a label");
        assert!(
            e.message.starts_with("metadata.labels.a: invalid type"),
            "{e}"
        );
    }

    #[test]
    fn an_enum_number_naming_no_value_is_invalid_argument() {
        let vn = pb::VirtualNetwork {
            status: Some(pb::VirtualNetworkStatus {
                state: 99,
                ..Default::default()
            }),
            ..Default::default()
        };
        let obj = Object::from(vn);
        let e = obj.check_bounds().expect_err("no JSON form");
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(e.message.contains("Invalid variant 99"), "{e}");
        assert_eq!(
            obj.request_json().map_err(|e| e.code),
            Err(Code::InvalidArgument)
        );
    }

    #[test]
    fn bounds_are_checked_on_the_message() {
        let labels: serde_json::Map<String, Value> =
            (0..65).map(|i| (format!("k{i}"), json!("v"))).collect();
        let obj = Object::from_json(
            Kind::VirtualNetwork,
            json!({"metadata": {"labels": labels}}),
        )
        .expect("parses");
        let e = obj.check_bounds().expect_err("65 labels");
        assert!(e.message.contains("65 labels"), "{e}");
    }
}
