//! Server certificate verification against a CA file that also accepts a certificate pinned
//! by that file.
//!
//! A certificate made the usual way for a single server (`openssl req -x509 …`) is
//! self-signed with `CA:TRUE`. Given as the CA file, WebPKI refuses it as the server's own
//! certificate (`CaUsedAsEndEntity`): a CA is not a server. curl and kubectl accept it, since
//! the user named that exact certificate. This verifier does the same, narrowly: the chain is
//! verified by WebPKI as usual, and only when WebPKI's sole objection is `CaUsedAsEndEntity`
//! (its validity dates were checked before that) and the certificate presented is byte for
//! byte one of the file's, it is accepted, after its names are checked against the server's
//! host name like any other.

use std::sync::Arc;

use rustls::DigitallySignedStruct;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, Error, OtherError, SignatureScheme};

/// WebPKI against the file's certificates, plus an exact match of a certificate of the file.
#[derive(Debug)]
pub(super) struct PinnedOrCa {
    pinned: Vec<CertificateDer<'static>>,
    webpki: Arc<WebPkiServerVerifier>,
    provider: Arc<CryptoProvider>,
}

impl PinnedOrCa {
    pub(super) fn new(
        pinned: Vec<CertificateDer<'static>>,
        webpki: Arc<WebPkiServerVerifier>,
        provider: Arc<CryptoProvider>,
    ) -> Self {
        PinnedOrCa {
            pinned,
            webpki,
            provider,
        }
    }
}

/// Whether WebPKI refused a certificate only for being a CA.
fn is_ca_used_as_end_entity(e: &Error) -> bool {
    match e {
        Error::InvalidCertificate(CertificateError::Other(OtherError(inner))) => matches!(
            inner.downcast_ref::<webpki::Error>(),
            Some(webpki::Error::CaUsedAsEndEntity)
        ),
        _ => false,
    }
}

impl ServerCertVerifier for PinnedOrCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(e)
                if is_ca_used_as_end_entity(&e)
                    && self
                        .pinned
                        .iter()
                        .any(|p| p.as_ref() == end_entity.as_ref()) =>
            {
                let cert = ParsedCertificate::try_from(end_entity)?;
                rustls::client::verify_server_name(&cert, server_name)?;
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
