//! `ssl:` connections: TLS with a client certificate, the way Open vSwitch and OVN secure their
//! databases (`ovn-nbctl --private-key=… --certificate=… --ca-cert=…`, `ovs-pki`).
//!
//! The server's certificate must chain to the configured CA certificate. Its host name is
//! **not** compared with the address, as Open vSwitch's own clients do: certificates made by
//! `ovs-pki` name a role (`CN=ovnnb`), not a host, and the CA of an OVN deployment signs only
//! its own members. The client always presents its certificate (OVSDB servers with `ssl:` or
//! `pssl:` remotes require one).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// The files of an `ssl:` connection, in PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The client's private key.
    pub private_key: PathBuf,
    /// The client's certificate (with its chain, if any).
    pub certificate: PathBuf,
    /// The CA certificate(s) the server's certificate must chain to.
    pub ca_certificate: PathBuf,
}

/// A TLS setting that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM item.
    #[error("{what} {}: {detail}", path.display())]
    File {
        /// Which file (`private key`, `certificate`, `CA certificate`).
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// The files do not make a TLS configuration (e.g. the key does not match the certificate).
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// A loaded client TLS configuration for `ssl:` addresses.
#[derive(Clone)]
pub struct Tls {
    pub(crate) config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::File {
        what,
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(what, path)?;
    let file_err = |detail: String| TlsError::File {
        what,
        path: path.to_path_buf(),
        detail,
    };
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(e.to_string()))?;
    if certs.is_empty() {
        return Err(file_err("no PEM certificate in it".into()));
    }
    Ok(certs)
}

impl Tls {
    /// Loads the key, the certificate and the CA certificate.
    pub fn load(files: &TlsFiles) -> Result<Tls, TlsError> {
        let key_pem = read("private key", &files.private_key)?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::File {
            what: "private key",
            path: files.private_key.clone(),
            detail: e.to_string(),
        })?;
        let chain = certificates("certificate", &files.certificate)?;
        let mut roots = RootCertStore::empty();
        for ca in certificates("CA certificate", &files.ca_certificate)? {
            roots.add(ca).map_err(|e| TlsError::File {
                what: "CA certificate",
                path: files.ca_certificate.clone(),
                detail: e.to_string(),
            })?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
            .with_client_auth_cert(chain, key)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        Ok(Tls {
            config: Arc::new(config),
        })
    }
}

/// Checks the server's chain, validity and signatures like WebPKI, without the host name.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            // The name is checked last: a certificate refused only for its name chains to the CA.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
