//! TLS on the one port: REST and gRPC, untrusted clients refused, plain HTTP on the TLS port,
//! certificate rotation without restart, client certificates (mTLS).

use std::time::{Duration, Instant};

use osac_api::TransportConfig;
use osac_api::tls::TlsConfig;
use osac_proto::admin::v1 as admin;
use serde_json::{Value, json};
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

use crate::common::PRIV;
use crate::common::pki::*;

fn tls_transport(cert: std::path::PathBuf, key: std::path::PathBuf) -> TransportConfig {
    TransportConfig {
        tls: Some(TlsConfig {
            cert,
            key,
            client_ca: None,
        }),
        ..TransportConfig::default()
    }
}

async fn tls_server(ca: &Ca) -> LimitedServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = LimitedServer::tls_files(dir.path(), &ca.server());
    LimitedServer::start(dir, tls_transport(cert, key)).await
}

async fn grpc_channel(url: &str, ca_pem: &str) -> Result<Channel, tonic::transport::Error> {
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca_pem))
        .domain_name("localhost");
    Channel::from_shared(url.to_string())
        .expect("uri")
        .tls_config(tls)?
        .connect()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_and_grpc_over_tls() {
    let ca = Ca::new("test CA");
    let s = tls_server(&ca).await;
    let url = s.url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    // REST (HTTP/1.1 over TLS): a write and a read with the admin token.
    let http = https_client(&ca.pem(), None);
    let r = http
        .post(format!("{url}{PRIV}/tenants"))
        .bearer_auth(&s.admin_token)
        .json(&json!({"metadata": {"name": "acme"}}))
        .send()
        .await
        .expect("POST over TLS");
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    let r = http
        .get(format!("{url}{PRIV}/tenants/acme"))
        .bearer_auth(&s.admin_token)
        .send()
        .await
        .expect("GET over TLS");
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["metadata"]["name"], "acme");
    let version: Value = http
        .get(format!("{url}/version"))
        .send()
        .await
        .expect("version")
        .json()
        .await
        .expect("json");
    assert_eq!(version["version"], env!("CARGO_PKG_VERSION"));

    // gRPC (h2 by ALPN) on the same port.
    let channel = grpc_channel(&url, &ca.pem()).await.expect("gRPC connect");
    let mut tenants = admin::tenants_client::TenantsClient::new(channel);
    let mut req = tonic::Request::new(osac_proto::v1::GetRequest { id: "acme".into() });
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {}", s.admin_token).parse().expect("header"),
    );
    let tenant = tenants
        .get(req)
        .await
        .expect("gRPC Get over TLS")
        .into_inner();
    assert_eq!(tenant.metadata.expect("metadata").name, "acme");

    // Clients that do not trust the server's CA are refused by their own TLS check.
    let other = Ca::new("another CA");
    let err = https_client(&other.pem(), None)
        .get(format!("{url}/healthz"))
        .send()
        .await
        .expect_err("untrusted server certificate");
    assert!(format!("{err:?}").contains("UnknownIssuer"), "{err:?}");
    let system_roots = reqwest::Client::builder().build().expect("client");
    assert!(
        system_roots
            .get(format!("{url}/healthz"))
            .send()
            .await
            .is_err()
    );
    assert!(grpc_channel(&url, &other.pem()).await.is_err());

    // Plain HTTP to the TLS port fails fast, and the server keeps serving TLS.
    let plain = format!("http://{}/healthz", s.server.addr);
    let answer = tokio::time::timeout(Duration::from_secs(5), reqwest::get(&plain)).await;
    assert!(matches!(answer, Ok(Err(_))), "plain HTTP got {answer:?}");
    let ok = http
        .get(format!("{url}/healthz"))
        .send()
        .await
        .expect("healthz");
    assert_eq!(ok.status(), 200);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_certificate_is_served_without_restart() {
    let old_ca = Ca::new("old CA");
    let s = tls_server(&old_ca).await;
    let url = s.url();
    let dir = s.dir.path().to_path_buf();
    let new_ca = Ca::new("new CA");
    let new = new_ca.server();
    let new_client = https_client(&new_ca.pem(), None);
    // Held open across the rotation: an established connection keeps working.
    let old_client = https_client(&old_ca.pem(), None);
    assert_eq!(
        old_client
            .get(format!("{url}/healthz"))
            .send()
            .await
            .expect("old")
            .status(),
        200
    );
    assert!(
        new_client
            .get(format!("{url}/healthz"))
            .send()
            .await
            .is_err()
    );

    replace_file(&dir.join("server.key"), &new.key_pem);
    replace_file(&dir.join("server.crt"), &new.cert_pem);
    let start = Instant::now();
    loop {
        // A new client: a new connection, a new handshake.
        let fresh = https_client(&new_ca.pem(), None);
        if let Ok(r) = fresh.get(format!("{url}/healthz")).send().await {
            assert_eq!(r.status(), 200);
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "new certificate never served"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The certificate a raw handshake sees is the new one.
    let peer = peer_certificate(s.server.addr, &new_ca.pem()).await;
    assert_eq!(peer, der_of(&new.cert_pem));

    // A broken new file is not loaded: the last good certificate stays in service.
    replace_file(
        &dir.join("server.crt"),
        "-----BEGIN CERTIFICATE-----\nbroken\n",
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let peer = peer_certificate(s.server.addr, &new_ca.pem()).await;
    assert_eq!(peer, der_of(&new.cert_pem));
    s.finish().await;
}

async fn peer_certificate(addr: std::net::SocketAddr, ca_pem: &str) -> Vec<u8> {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let connector = tokio_rustls::TlsConnector::from(rustls_client(ca_pem));
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let tls = connector.connect(name, tcp).await.expect("handshake");
    tls.get_ref()
        .1
        .peer_certificates()
        .expect("peer certificates")[0]
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_with_a_client_ca() {
    let server_ca = Ca::new("server CA");
    let client_ca = Ca::new("client CA");
    let intruder_ca = Ca::new("intruder CA");
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = LimitedServer::tls_files(dir.path(), &server_ca.server());
    let ca_file = dir.path().join("client-ca.crt");
    replace_file(&ca_file, &client_ca.pem());
    let mut transport = tls_transport(cert, key);
    if let Some(tls) = transport.tls.as_mut() {
        tls.client_ca = Some(ca_file);
    }
    let s = LimitedServer::start(dir, transport).await;
    let url = format!("{}/healthz", s.url());

    // No client certificate: the handshake is refused.
    let err = https_client(&server_ca.pem(), None)
        .get(&url)
        .send()
        .await
        .expect_err("no client certificate");
    let text = format!("{err:?}");
    // TLS 1.3: the client may finish its side of the handshake before the server refuses it;
    // it then sees the server's alert, or only the connection closing under the request.
    assert!(
        text.contains("CertificateRequired")
            || text.contains("HandshakeFailure")
            || text.contains("connection was not ready")
            || text.contains("connection closed"),
        "{text}"
    );
    // A certificate from a CA the server does not trust: refused.
    let foreign = intruder_ca.client("mallory");
    let err = https_client(&server_ca.pem(), Some(&foreign))
        .get(&url)
        .send()
        .await
        .expect_err("foreign client certificate");
    let text = format!("{err:?}");
    // As above, the refusal may reach the client as the alert or as the connection closing.
    assert!(
        text.contains("UnknownCA")
            || text.contains("BadCertificate")
            || text.contains("DecryptError")
            || text.contains("connection was not ready")
            || text.contains("connection closed"),
        "{text}"
    );
    // The right certificate: served.
    let good = client_ca.client("alice");
    let r = https_client(&server_ca.pem(), Some(&good))
        .get(&url)
        .send()
        .await
        .expect("client certificate accepted");
    assert_eq!(r.status(), 200);
    s.finish().await;
}
