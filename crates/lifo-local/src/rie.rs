//! Lambda as deployed: a function's real binary under AWS's own Runtime
//! Interface Emulator (`aws-lambda-rie`), the program that `sam local
//! invoke` runs inside its container. It serves Lambda's Runtime API to the
//! binary, takes invokes at `POST /2015-03-31/functions/function/invocations`,
//! prints START, END and REPORT as Lambda does, and refuses a response over
//! Lambda's payload limit. It ships inside the SAM CLI's Python package
//! (`samcli/local/rapid/aws-lambda-rie-<arch>`), which `make test`
//! installs into `.tools/sam`; no Docker is needed.

use anyhow::{Context, Result, anyhow};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// Where the SAM CLI ships the emulator for this machine's architecture,
/// under the workspace's `.tools/sam` (or `$LIFO_TOOLS/sam`).
pub fn locate() -> Result<PathBuf> {
    let arch = match std::env::consts::ARCH {
        "aarch64" => "arm64",
        _ => "x86_64",
    };
    let tools = crate::servers::Tools::locate()?;
    let lib = tools.root.join("sam/lib");
    let entries = std::fs::read_dir(&lib).with_context(|| {
        format!(
            "no {}: install the SAM CLI with `make tools` (scripts/setup-tools)",
            lib.display()
        )
    })?;
    for e in entries.flatten() {
        let rie = e
            .path()
            .join("site-packages/samcli/local/rapid")
            .join(format!("aws-lambda-rie-{arch}"));
        if rie.is_file() {
            return Ok(rie);
        }
    }
    Err(anyhow!(
        "no aws-lambda-rie-{arch} in {}: install the SAM CLI with `make tools`",
        lib.display()
    ))
}

/// A free loopback port (bound, then released).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// One function binary running under the emulator; stopped (by its PID)
/// when dropped.
pub struct Emulated {
    child: tokio::process::Child,
    address: String,
    /// Everything the emulator and the binary printed, line by line.
    output: Arc<Mutex<Vec<String>>>,
}

/// An invocation's answer, and the lines printed while it ran.
#[derive(Debug, Clone)]
pub struct Invoked {
    pub status: u16,
    pub body: String,
    pub lines: Vec<String>,
}

impl Emulated {
    /// Starts `binary` under the emulator at `rie`, with `env` (the
    /// function's environment as the template gives it, and the local
    /// stack's endpoints).
    pub async fn start(rie: &Path, binary: &Path, env: &[(String, String)]) -> Result<Self> {
        if !binary.is_file() {
            return Err(anyhow!(
                "no binary {}: build it with `cargo build --bins`",
                binary.display()
            ));
        }
        let (invoke_port, runtime_port) = (free_port()?, free_port()?);
        let address = format!("127.0.0.1:{invoke_port}");
        let mut child = tokio::process::Command::new(rie)
            .arg("--runtime-interface-emulator-address")
            .arg(&address)
            .arg("--runtime-api-address")
            .arg(format!("127.0.0.1:{runtime_port}"))
            .arg(binary)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", rie.display()))?;
        let output = Arc::new(Mutex::new(Vec::new()));
        if let Some(out) = child.stdout.take() {
            collect(out, output.clone());
        }
        if let Some(err) = child.stderr.take() {
            collect(err, output.clone());
        }
        let started = Instant::now();
        while tokio::net::TcpStream::connect(&address).await.is_err() {
            if started.elapsed() > Duration::from_secs(10) {
                return Err(anyhow!(
                    "the emulator did not listen on {address} within 10 s"
                ));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Ok(Self {
            child,
            address,
            output,
        })
    }

    /// Invokes the function with `event` (RequestResponse), waiting at most
    /// `limit`; the answer and the lines printed meanwhile.
    pub async fn invoke(&self, event: &[u8], limit: Duration) -> Result<Invoked> {
        let before = self.lines().len();
        let answer = tokio::time::timeout(limit, async {
            let mut conn = tokio::net::TcpStream::connect(&self.address).await?;
            let head = format!(
                "POST /2015-03-31/functions/function/invocations HTTP/1.1\r\nHost: {}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                self.address,
                event.len()
            );
            conn.write_all(head.as_bytes()).await?;
            conn.write_all(event).await?;
            let mut raw = Vec::new();
            conn.read_to_end(&mut raw).await?;
            anyhow::Ok(raw)
        })
        .await
        .map_err(|_| anyhow!("no answer within {limit:?}"))??;
        let text = String::from_utf8_lossy(&answer).into_owned();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .context("the emulator's answer has no header end")?;
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .context("the emulator's answer has no status")?;
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(body)
        } else {
            body.to_owned()
        };
        // REPORT comes right after the answer.
        let waited = Instant::now();
        while !self.lines()[before.min(self.lines().len())..]
            .iter()
            .any(|l| l.contains("REPORT RequestId"))
            && waited.elapsed() < Duration::from_secs(2)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let lines = self.lines()[before.min(self.lines().len())..].to_vec();
        Ok(Invoked {
            status,
            body,
            lines,
        })
    }

    fn lines(&self) -> Vec<String> {
        self.output.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Stops the emulator and the binary (by PID).
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

fn collect<R: tokio::io::AsyncRead + Unpin + Send + 'static>(
    from: R,
    into: Arc<Mutex<Vec<String>>>,
) {
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(from).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Ok(mut l) = into.lock() {
                l.push(line);
            }
        }
    });
}

/// A chunked HTTP/1.1 body, joined.
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_is_joined() {
        assert_eq!(
            dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "hello world"
        );
    }
}
