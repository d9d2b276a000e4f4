use super::*;

fn doc() -> Value {
    document(osac_proto::FILE_DESCRIPTOR_SET).expect("document")
}

#[test]
fn routes_come_from_the_services() {
    let d = doc();
    let paths = &d["paths"];
    let subnets = &paths["/api/fulfillment/v1/subnets"];
    assert!(subnets["get"].is_object() && subnets["post"].is_object());
    let item = &paths["/api/fulfillment/v1/subnets/{id}"];
    for m in ["get", "patch", "delete"] {
        assert!(item[m].is_object(), "subnets/{{id}} {m}");
    }
    // Read-only on the public surface.
    let classes = &paths["/api/fulfillment/v1/network_classes"];
    assert!(classes["get"].is_object() && classes.get("post").is_none());
    assert!(
        paths["/api/fulfillment/v1/events/{id}"]
            .get("delete")
            .is_none()
    );
    // Provider only.
    assert!(paths.get("/api/fulfillment/v1/tenants").is_none());
    assert!(paths["/api/private/v1/tenants"]["post"].is_object());
    assert!(paths["/api/private/v1/tokens"]["post"].is_object());
    let revoke = &paths["/api/private/v1/tokens/{id}"]["delete"]["parameters"];
    assert!(
        revoke
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["name"] == "force" && p["in"] == "query")),
        "{revoke}"
    );
    assert_eq!(
        subnets["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/osacnet.v1.SubnetListResponse"
    );
}

#[test]
fn schemas_follow_proto_json_and_carry_comments() {
    let d = doc();
    let s = &d["components"]["schemas"];
    let status = &s["osacnet.v1.SubnetStatus"]["properties"];
    assert_eq!(
        status["segment_id"]["type"],
        json!(["string", "integer"]),
        "int64 as string (numbers read)"
    );
    assert_eq!(
        status["state"]["anyOf"][0]["$ref"],
        "#/components/schemas/osacnet.v1.SubnetState"
    );
    assert!(
        s["osacnet.v1.SubnetState"]["enum"]
            .as_array()
            .is_some_and(|e| e.contains(&json!("SUBNET_STATE_READY")))
    );
    let meta = &s["osacnet.v1.Metadata"]["properties"];
    assert_eq!(meta["labels"]["type"], "object");
    assert_eq!(meta["labels"]["additionalProperties"]["type"], "string");
    assert_eq!(meta["creation_timestamp"]["format"], "date-time");
    assert_eq!(s["osacnet.v1.Subnet"]["additionalProperties"], false);
    // Comments become descriptions.
    assert!(
        s["osacnet.admin.v1.CreateTokenRequest"]["properties"]["role"]["description"]
            .as_str()
            .is_some_and(|t| t.contains("tenant-admin"))
    );
    // Only what routes reach: gRPC-only request messages are absent.
    assert!(s.get("osacnet.v1.SubnetUpdateRequest").is_none());
    assert!(s.get("osacnet.v1.ListRequest").is_none());
}

#[test]
fn garbage_is_an_error() {
    assert!(matches!(
        document(b"\xff\xff\xff"),
        Err(OpenApiError::Decode(_))
    ));
}
