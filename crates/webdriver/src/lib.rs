//! A minimal W3C WebDriver client (<https://www.w3.org/TR/webdriver2/>) for the console's
//! browser test and its first-paint benchmark: [`Browser::start`] runs `chromedriver` on a free
//! local port with headless Chromium in a fresh profile, and the methods send the few commands
//! they need (navigate, execute script, find and click, type, screenshot) over HTTP.
//!
//! The binaries are `/usr/bin/chromium` and `/usr/bin/chromedriver` (Debian packages
//! `chromium` and `chromium-driver`), or the paths in `OSAC_CHROMIUM` / `OSAC_CHROMEDRIVER`.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

/// The key of an element reference in WebDriver answers.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// The W3C WebDriver code points of the special keys [`Browser::press`] types.
pub mod keys {
    pub const TAB: &str = "\u{E004}";
    pub const ENTER: &str = "\u{E007}";
    pub const ESCAPE: &str = "\u{E00C}";
}

/// Chromium flags that work in containers, also as root.
const CHROMIUM_FLAGS: [&str; 9] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
];

/// Why the browser could not be driven.
#[derive(Debug, thiserror::Error)]
pub enum WebDriverError {
    #[error("{0}")]
    Unavailable(String),
    #[error("cannot start chromedriver: {0}")]
    Spawn(#[from] std::io::Error),
    #[error("WebDriver request failed: {0}")]
    Http(#[from] reqwest::Error),
    #[error("WebDriver {command}: {error}: {message}")]
    Command {
        command: String,
        error: String,
        message: String,
    },
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, String),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("bad screenshot data: {0}")]
    Screenshot(#[from] base64::DecodeError),
}

pub type Result<T> = std::result::Result<T, WebDriverError>;

/// The Chromium and chromedriver binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub chromium: PathBuf,
    pub chromedriver: PathBuf,
}

/// The binaries, or why they are not there (the message names the packages to install).
pub fn binaries() -> std::result::Result<Binaries, String> {
    let pick = |var: &str, default: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(default))
    };
    let found = Binaries {
        chromium: pick("OSAC_CHROMIUM", "/usr/bin/chromium"),
        chromedriver: pick("OSAC_CHROMEDRIVER", "/usr/bin/chromedriver"),
    };
    for path in [&found.chromium, &found.chromedriver] {
        if !path.is_file() {
            return Err(format!(
                "{} not found (install the Debian packages chromium and chromium-driver, or set \
                 OSAC_CHROMIUM and OSAC_CHROMEDRIVER)",
                path.display()
            ));
        }
    }
    Ok(found)
}

/// A headless Chromium session driven through its chromedriver; [`Browser::quit`] ends both
/// (dropping the value ends them too, best effort).
pub struct Browser {
    http: reqwest::Client,
    driver: tokio::process::Child,
    addr: SocketAddr,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free port and opens a session with a `width`×`height` window.
    pub async fn start(width: u32, height: u32) -> Result<Browser> {
        let bin = binaries().map_err(WebDriverError::Unavailable)?;
        let addr = free_port()?;
        let profile = tempfile::tempdir()?;
        let driver = tokio::process::Command::new(&bin.chromedriver)
            .arg(format!("--port={}", addr.port()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()?;
        let mut browser = Browser {
            http,
            driver,
            addr,
            session: String::new(),
            _profile: profile,
        };
        browser.wait_for_driver().await?;
        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|f| f.to_string()).collect();
        args.push(format!("--window-size={width},{height}"));
        args.push(format!(
            "--user-data-dir={}",
            browser._profile.path().display()
        ));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": bin.chromium, "args": args},
        }}});
        let answer = browser.command("POST", "/session", caps).await?;
        browser.session = answer["sessionId"].as_str().unwrap_or_default().to_string();
        Ok(browser)
    }

    async fn wait_for_driver(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let url = format!("http://{}/status", self.addr);
        loop {
            if let Ok(r) = self.http.get(&url).send().await
                && let Ok(v) = r.json::<Value>().await
                && v["value"]["ready"] == true
            {
                return Ok(());
            }
            if let Ok(Some(status)) = self.driver.try_wait() {
                return Err(WebDriverError::Unavailable(format!(
                    "chromedriver exited at start: {status}"
                )));
            }
            if Instant::now() > deadline {
                return Err(WebDriverError::Timeout(
                    Duration::from_secs(20),
                    "chromedriver to be ready".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// One WebDriver command; answers its `value`.
    async fn command(&self, method: &str, path: &str, body: Value) -> Result<Value> {
        let url = format!("http://{}{path}", self.addr);
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body),
        };
        let answer: Value = req.send().await?.json().await?;
        let value = answer.get("value").cloned().unwrap_or(Value::Null);
        if let Some(error) = value.get("error").and_then(Value::as_str) {
            return Err(WebDriverError::Command {
                command: format!("{method} {path}"),
                error: error.to_string(),
                message: value["message"].as_str().unwrap_or_default().to_string(),
            });
        }
        Ok(value)
    }

    fn session_path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    /// Opens `url` and waits until the page has loaded.
    pub async fn goto(&self, url: &str) -> Result<()> {
        self.command("POST", &self.session_path("/url"), json!({"url": url}))
            .await
            .map(|_| ())
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and answers what it returns.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Result<Value> {
        self.command(
            "POST",
            &self.session_path("/execute/sync"),
            json!({"script": script, "args": args}),
        )
        .await
    }

    /// Polls the JavaScript expression `expr` until it is truthy; answers its value.
    pub async fn wait_for(&self, expr: &str, timeout: Duration) -> Result<Value> {
        let deadline = Instant::now() + timeout;
        let script = format!("try {{ return ({expr}); }} catch (e) {{ return null; }}");
        loop {
            let v = self.execute(&script, vec![]).await?;
            let truthy =
                !matches!(&v, Value::Null | Value::Bool(false)) && v != json!(0) && v != json!("");
            if truthy {
                return Ok(v);
            }
            if Instant::now() > deadline {
                return Err(WebDriverError::Timeout(timeout, expr.to_string()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn element(&self, css: &str) -> Result<String> {
        let v = self
            .command(
                "POST",
                &self.session_path("/element"),
                json!({"using": "css selector", "value": css}),
            )
            .await?;
        v[ELEMENT_KEY]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| WebDriverError::Command {
                command: format!("find {css}"),
                error: "no element reference".into(),
                message: v.to_string(),
            })
    }

    /// Clicks the first element matching `css`, as a user would (pointer events included).
    pub async fn click(&self, css: &str) -> Result<()> {
        let id = self.element(css).await?;
        self.command(
            "POST",
            &self.session_path(&format!("/element/{id}/click")),
            json!({}),
        )
        .await
        .map(|_| ())
    }

    /// Types `text` into the first element matching `css`.
    pub async fn type_into(&self, css: &str, text: &str) -> Result<()> {
        let id = self.element(css).await?;
        self.command(
            "POST",
            &self.session_path(&format!("/element/{id}/value")),
            json!({"text": text}),
        )
        .await
        .map(|_| ())
    }

    /// Types `keys` into whichever element has the focus, as keystrokes (so Tab moves the focus
    /// and Enter submits): special keys are the W3C code points, see [`keys`].
    pub async fn press(&self, text: &str) -> Result<()> {
        let active = self
            .command("GET", &self.session_path("/element/active"), Value::Null)
            .await?;
        let id = active[ELEMENT_KEY]
            .as_str()
            .ok_or_else(|| WebDriverError::Command {
                command: "active element".into(),
                error: "no element reference".into(),
                message: active.to_string(),
            })?
            .to_string();
        self.command(
            "POST",
            &self.session_path(&format!("/element/{id}/value")),
            json!({"text": text}),
        )
        .await
        .map(|_| ())
    }

    /// Resizes the window (the page's layout follows, as when a user narrows the window).
    pub async fn resize(&self, width: u32, height: u32) -> Result<()> {
        self.command(
            "POST",
            &self.session_path("/window/rect"),
            json!({"width": width, "height": height}),
        )
        .await
        .map(|_| ())
    }

    /// Writes a PNG screenshot of the window to `path`.
    pub async fn screenshot(&self, path: &Path) -> Result<()> {
        let v = self
            .command("GET", &self.session_path("/screenshot"), Value::Null)
            .await?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default().as_bytes())?;
        std::fs::write(path, png).map_err(|source| WebDriverError::Write {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Ends the session (Chromium exits) and chromedriver.
    pub async fn quit(mut self) -> Result<()> {
        let ended = self
            .command("DELETE", &self.session_path(""), Value::Null)
            .await;
        self.session.clear();
        let _ = self.driver.kill().await;
        ended.map(|_| ())
    }
}

impl Drop for Browser {
    /// A test that failed before [`Browser::quit`] still ends its Chromium: the session is
    /// deleted with a plain blocking request (chromedriver itself is killed on drop).
    fn drop(&mut self) {
        if self.session.is_empty() {
            return;
        }
        if let Ok(mut conn) = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)) {
            let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
            let request = format!(
                "DELETE /session/{} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                self.session, self.addr
            );
            if conn.write_all(request.as_bytes()).is_ok() {
                let _ = std::io::Read::read(&mut conn, &mut [0u8; 512]);
            }
        }
    }
}

/// A local port nobody listens on (bound and released; chromedriver binds it next).
fn free_port() -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}
