//! The client configuration file and connection resolution.
//!
//! Precedence for the URL and the token, each on its own: command-line flag, then the
//! environment (`OSAC_URL`, `OSAC_TOKEN`), then the config file (`--config`, `OSAC_CONFIG`,
//! default `~/.config/osac/config.json`, written by `osac login` with mode 0600).
//!
//! TLS: the CA file comes from `--ca-file`/`OSAC_CA_FILE`, else from the config file;
//! certificate verification is off when `--insecure-skip-tls-verify` is given or the config
//! file says so (`osac login --insecure-skip-tls-verify`).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use serde::{Deserialize, Serialize};

use super::tls::TlsOptions;

/// The config file: `{"url","token","ca_file","insecure_skip_tls_verify"}`.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// PEM CA certificates that sign the server's certificate (absolute path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Do not verify the server's certificate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_tls_verify: bool,
}

/// The file `osac server --dev` writes: `{"url","admin_token"}`, plus `ca_file` when the dev
/// server serves TLS with a certificate of a CA given by `--dev-ca-file`.
#[derive(Debug, Clone, Deserialize)]
pub struct DevCredentials {
    pub url: String,
    pub admin_token: String,
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

/// Where the server is, how to authenticate and how to check its certificate.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub token: String,
    pub tls: TlsOptions,
}

/// `~/.config/osac/config.json`, when `HOME` is set.
pub fn default_config_path() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| {
        PathBuf::from(h)
            .join(".config")
            .join("osac")
            .join("config.json")
    })
}

/// Reads the config file; `None` when it does not exist.
pub fn load(path: &Path) -> anyhow::Result<Option<ConfigFile>> {
    match fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .with_context(|| format!("invalid config file {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow!("cannot read config file {}: {e}", path.display())),
    }
}

/// Writes the config file readable by its owner only (0600), creating its directory (0700).
pub fn save(path: &Path, cfg: &ConfigFile) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    create_private_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let text = serde_json::to_string_pretty(cfg)? + "\n";
    let file_name = path
        .file_name()
        .ok_or_else(|| anyhow!("config path {} is not a file name", path.display()))?;
    let mut tmp_name = file_name.to_os_string();
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let write = || -> std::io::Result<()> {
        let mut f = private_file(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        anyhow!("cannot write config file {}: {e}", path.display())
    })
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.set_permissions(fs::Permissions::from_mode(0o600))?;
    Ok(f)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<fs::File> {
    fs::File::create(path)
}

/// Reads a dev-credentials file.
pub fn load_dev_credentials(path: &Path) -> anyhow::Result<DevCredentials> {
    let text = fs::read_to_string(path)
        .map_err(|e| anyhow!("cannot read dev credentials {}: {e}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "invalid dev credentials {} (expected {{\"url\",\"admin_token\"}})",
            path.display()
        )
    })
}

/// Checks and normalises a server URL (no trailing `/`).
pub fn normalize_url(url: &str) -> anyhow::Result<String> {
    let url = url.trim();
    let parsed = osac_client::Url::parse(url).map_err(|e| anyhow!("invalid URL '{url}': {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.cannot_be_a_base() {
        bail!("invalid URL '{url}': expected http://HOST:PORT");
    }
    Ok(url.trim_end_matches('/').to_string())
}

const HINT: &str = "run `osac login --url URL --token TOKEN` or set OSAC_URL/OSAC_TOKEN";

/// Resolves the endpoint from flag/env values (already merged by clap) and the config file.
/// TLS: a flag's CA file wins over the config file's; verification is off when either says
/// so; the config file's TLS settings apply only to the config file's URL.
pub fn resolve_with_tls(
    url: Option<&str>,
    token: Option<&str>,
    tls: &TlsOptions,
    config: Option<&Path>,
) -> anyhow::Result<Endpoint> {
    let (url, token, tls) = resolve_parts(url, token, tls, config)?;
    match (url, token) {
        (Some(url), Some(token)) => Ok(Endpoint {
            url: normalize_url(&url)?,
            token,
            tls,
        }),
        (None, None) => bail!("not logged in: {HINT}"),
        (None, Some(_)) => bail!("no osac URL configured: {HINT}"),
        (Some(_), None) => bail!("no osac token configured: {HINT}"),
    }
}

/// The URL and TLS settings only (for calls that need no token, e.g. `osac version`).
pub fn resolve_url(
    url: Option<&str>,
    tls: &TlsOptions,
    config: Option<&Path>,
) -> anyhow::Result<Endpoint> {
    let (url, token, tls) = resolve_parts(url, None, tls, config)?;
    let Some(url) = url else {
        bail!("no osac URL configured: {HINT}");
    };
    Ok(Endpoint {
        url: normalize_url(&url)?,
        token: token.unwrap_or_default(),
        tls,
    })
}

type Parts = (Option<String>, Option<String>, TlsOptions);

fn resolve_parts(
    url: Option<&str>,
    token: Option<&str>,
    tls: &TlsOptions,
    config: Option<&Path>,
) -> anyhow::Result<Parts> {
    let nonempty = |s: Option<&str>| {
        s.map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let (mut url, mut token, mut tls) = (nonempty(url), nonempty(token), tls.clone());
    let file = match config.map(load) {
        Some(Ok(file)) => file,
        // Flags and environment say everything: a broken config file does not matter.
        Some(Err(_)) if url.is_some() && token.is_some() => None,
        Some(Err(e)) => return Err(e),
        None => None,
    };
    if let Some(file) = file {
        let file_url = nonempty(file.url.as_deref());
        url = url.or(file_url.clone());
        token = token.or(nonempty(file.token.as_deref()));
        // The file's TLS settings belong to the file's server, not to another URL.
        let same_server = match (&url, &file_url) {
            (Some(u), Some(f)) => u.trim_end_matches('/') == f.trim_end_matches('/'),
            _ => false,
        };
        if same_server {
            tls.ca_file = tls.ca_file.or(file.ca_file);
            tls.insecure_skip_verify |= file.insecure_skip_tls_verify;
        }
    }
    Ok((url, token, tls))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(
        url: Option<&str>,
        token: Option<&str>,
        config: Option<&Path>,
    ) -> anyhow::Result<Endpoint> {
        resolve_with_tls(url, token, &TlsOptions::default(), config)
    }

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("osac-cli-test-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn save_load_and_precedence() {
        let dir = tmpdir("cfg");
        let path = dir.join("sub").join("config.json");
        let cfg = ConfigFile {
            url: Some("http://file:1".into()),
            token: Some("tf".into()),
            ..Default::default()
        };
        save(&path, &cfg).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        assert_eq!(load(&path).unwrap(), Some(cfg));
        let e = resolve(None, None, Some(&path)).unwrap();
        assert_eq!(
            e,
            Endpoint {
                url: "http://file:1".into(),
                token: "tf".into(),
                ..Default::default()
            }
        );
        let e = resolve(Some("http://flag:2/"), None, Some(&path)).unwrap();
        assert_eq!(
            e,
            Endpoint {
                url: "http://flag:2".into(),
                token: "tf".into(),
                ..Default::default()
            }
        );
        let e = resolve(Some(""), Some("tok"), Some(&path)).unwrap();
        assert_eq!(e.url, "http://file:1");
        assert_eq!(e.token, "tok");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn tls_settings_of_the_file_belong_to_its_server() {
        let dir = tmpdir("tls");
        let path = dir.join("config.json");
        let cfg = ConfigFile {
            url: Some("https://osac:8443".into()),
            token: Some("t".into()),
            ca_file: Some("/etc/osac/ca.pem".into()),
            insecure_skip_tls_verify: true,
        };
        save(&path, &cfg).unwrap();
        assert_eq!(load(&path).unwrap(), Some(cfg));
        let none = TlsOptions::default();
        let e = resolve_with_tls(None, None, &none, Some(&path)).unwrap();
        assert_eq!(
            e.tls.ca_file.as_deref(),
            Some(Path::new("/etc/osac/ca.pem"))
        );
        assert!(e.tls.insecure_skip_verify);
        // Another server named by a flag does not inherit the file's CA or its insecurity.
        let e = resolve_with_tls(Some("https://other:1"), None, &none, Some(&path)).unwrap();
        assert_eq!(e.tls, TlsOptions::default());
        // A flag's CA file wins.
        let flag = TlsOptions {
            ca_file: Some("/tmp/flag.pem".into()),
            insecure_skip_verify: false,
        };
        let e = resolve_with_tls(None, None, &flag, Some(&path)).unwrap();
        assert_eq!(e.tls.ca_file.as_deref(), Some(Path::new("/tmp/flag.pem")));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn missing_credentials_are_explained() {
        let missing = tmpdir("none").join("config.json");
        let err = resolve(None, None, Some(&missing)).unwrap_err().to_string();
        assert!(err.contains("osac login --url"), "{err}");
        assert!(err.contains("OSAC_URL/OSAC_TOKEN"), "{err}");
        let err = resolve(Some("http://x:1"), None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no osac token"), "{err}");
        let err = resolve(Some("ftp://x"), Some("t"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid URL"), "{err}");
    }
}
