//! Real storage servers on loopback, for tests and `cargo xtask`: moto's
//! S3 server (from PyPI) and Azurite's blob service (from npm), each
//! installed on first use under `target/servers/` and started on a free
//! port of 127.0.0.1. A server stops when its handle drops.
//!
//! Installs are shared by every test process: the first takes a lock
//! directory, installs, and leaves a stamp; the others wait for the stamp
//! ([`install_once`], which xtask's TileDB venvs use too).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The S3 server's release, pinned so every machine runs the same one.
pub const MOTO: &str = "moto[server]==5.2.5";
/// The script that starts moto's server (`python -c MOTO_SERVER ARGS...`).
const MOTO_SERVER: &str = include_str!("moto_server.py");
/// Used only to create Azurite containers (object_store cannot).
pub const AZURE_BLOB: &str = "azure-storage-blob==12.31.1";
/// Azurite's release.
pub const AZURITE: &str = "azurite@3.35.0";

/// Azurite's well-known development account.
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
/// Azurite's well-known development key (public, in Azure's docs).
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// What went wrong starting a server.
pub type Error = String;

fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or(here)
}

/// `target/servers`, or `$TDB_SERVERS_DIR`.
pub fn servers_dir() -> PathBuf {
    std::env::var_os("TDB_SERVERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/servers"))
}

fn run(cmd: &mut Command) -> Result<(), Error> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// [`install_once`] into `target/servers/<name>`.
fn once(name: &str, install: impl FnOnce(&Path) -> Result<(), Error>) -> Result<PathBuf, Error> {
    let dir = servers_dir().join(name);
    install_once(&dir, install)?;
    Ok(dir)
}

/// Runs `install(dir)` once across processes, however many start at once
/// (CI runs the local and the S3 checks side by side, each needing the same
/// venvs): the first takes the lock directory `<dir>.lock` beside `dir`,
/// installs and leaves the stamp `dir/.installed`; the others wait for it.
pub fn install_once(
    dir: &Path,
    install: impl FnOnce(&Path) -> Result<(), Error>,
) -> Result<(), Error> {
    let stamp = dir.join(".installed");
    if stamp.exists() {
        return Ok(());
    }
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let mut lock = dir.as_os_str().to_owned();
    lock.push(".lock");
    let lock = PathBuf::from(lock);
    let start = Instant::now();
    loop {
        match std::fs::create_dir(&lock) {
            Ok(()) => break,
            Err(_) if stamp.exists() => return Ok(()),
            Err(_) if start.elapsed() > Duration::from_secs(600) => {
                return Err(format!(
                    "{}: another process has held it for 10 minutes (remove it if none runs)",
                    lock.display()
                ))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
    let done = if stamp.exists() {
        Ok(())
    } else {
        install(dir).and_then(|()| {
            std::fs::write(&stamp, b"").map_err(|e| format!("{}: {e}", stamp.display()))
        })
    };
    let _ = std::fs::remove_dir(&lock);
    done
}

/// The Python venv holding moto's server and Azure's client.
pub fn python_venv() -> Result<PathBuf, Error> {
    once("venv", |dir| {
        run(Command::new(python()?).args(["-m", "venv"]).arg(dir))?;
        run(Command::new(dir.join("bin/python")).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            MOTO,
            AZURE_BLOB,
        ]))
    })
}

/// A Python 3 to make the venv with: `$TDB_PYTHON`, `python3` on the
/// path, or the newest pyenv one.
fn python() -> Result<PathBuf, Error> {
    if let Some(p) = std::env::var_os("TDB_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    let works = |p: &Path| {
        Command::new(p)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if works(Path::new("python3")) {
        return Ok(PathBuf::from("python3"));
    }
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    let mut found: Vec<PathBuf> = pyenv
        .and_then(|p| std::fs::read_dir(p.join("versions")).ok())
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path().join("bin/python3")))
        .filter(|p| works(p))
        .collect();
    found.sort();
    found
        .pop()
        .ok_or_else(|| "no Python 3: set TDB_PYTHON, or put python3 on the path".to_owned())
}

fn azurite_install() -> Result<PathBuf, Error> {
    once("azurite", |dir| {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        run(Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
            .arg(dir)
            .arg(AZURITE))
    })
}

fn free_port() -> Result<u16, Error> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

fn wait_for(addr: SocketAddr, child: &mut Child, what: &str) -> Result<(), Error> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("{what} exited at start: {status}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("{what} did not listen on {addr} within 60 s"))
}

/// A server process, stopped on drop, and by a watchdog when this process
/// ends without dropping it (servers kept in statics for a whole test
/// binary are never dropped).
#[derive(Debug)]
struct Process(Child);

impl Process {
    /// Starts `cmd` (a server for 127.0.0.1:`port`, logging to
    /// `target/servers/<name>-<port>.log`) and waits until it listens.
    fn serve(mut cmd: Command, name: &str, port: u16) -> Result<Process, Error> {
        let log = std::fs::File::create(servers_dir().join(format!("{name}-{port}.log")))
            .map_err(|e| e.to_string())?;
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{name}: {e}"))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if let Err(e) = wait_for(addr, &mut child, name) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok(Process::new(child))
    }

    fn new(child: Child) -> Process {
        let script = format!(
            "while kill -0 {} 2>/dev/null; do sleep 1; done; kill {} 2>/dev/null",
            std::process::id(),
            child.id()
        );
        // Best effort: without a shell the server lives until killed.
        let _ = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        Process(child)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// moto's S3 server on loopback. Any key pair signs requests to it.
#[derive(Debug)]
pub struct S3Server {
    _process: Process,
    port: u16,
}

impl S3Server {
    /// Installs (once) and starts a server.
    pub fn start() -> Result<S3Server, Error> {
        let venv = python_venv()?;
        let port = free_port()?;
        // moto's S3 application alone, LISTs looking only under their
        // prefix (`moto_server.py` says why).
        let mut cmd = Command::new(venv.join("bin/python"));
        cmd.args([
            "-c",
            MOTO_SERVER,
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ]);
        Ok(S3Server {
            _process: Process::serve(cmd, "moto", port)?,
            port,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT`, as TileDB's `vfs.s3.endpoint_override` takes it.
    pub fn host_port(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Creates a bucket (moto takes unsigned requests).
    pub fn create_bucket(&self, bucket: &str) -> Result<(), Error> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        write!(
            s,
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )
        .map_err(|e| e.to_string())?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
        if answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200") {
            Ok(())
        } else {
            Err(format!(
                "creating bucket {bucket}: {}",
                answer.lines().next().unwrap_or("")
            ))
        }
    }

    /// TileDB's config (a JSON object) for an S3 server at 127.0.0.1:`port`
    /// (this one's, or a proxy's in front of it).
    pub fn tiledb_config_for(port: u16) -> String {
        format!(
            "{{\"vfs.s3.endpoint_override\": \"127.0.0.1:{port}\", \"vfs.s3.scheme\": \"http\", \
             \"vfs.s3.use_virtual_addressing\": \"false\", \"vfs.s3.region\": \"us-east-1\", \
             \"vfs.s3.aws_access_key_id\": \"testing\", \"vfs.s3.aws_secret_access_key\": \"testing\"}}"
        )
    }

    /// The same as object_store's keys (lowercase), for settings passed in
    /// code rather than through the environment.
    pub fn settings(&self) -> Vec<(String, String)> {
        self.env()
            .into_iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect()
    }

    /// The environment object_store (and tdb) read to reach this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", "testing".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "testing".to_owned()),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
        ]
    }
}

/// Azurite's blob service on loopback, with its development account.
#[derive(Debug)]
pub struct Azurite {
    _process: Process,
    _data: PathBuf,
    port: u16,
}

impl Azurite {
    /// Installs (once) and starts a server, keeping its data in a fresh
    /// directory under `target/servers`.
    pub fn start() -> Result<Azurite, Error> {
        let dir = azurite_install()?;
        let port = free_port()?;
        let data = servers_dir().join(format!("azurite-data-{port}"));
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(dir.join("node_modules/.bin/azurite-blob"));
        cmd.args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
            .arg("--location")
            .arg(&data)
            .args(["--skipApiVersionCheck", "--loose"]);
        Ok(Azurite {
            _process: Process::serve(cmd, "azurite", port)?,
            _data: data,
            port,
        })
    }

    /// The account's blob endpoint, `http://127.0.0.1:PORT/devstoreaccount1`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{AZURITE_ACCOUNT}", self.port)
    }

    /// Creates a container, through Azure's Python client.
    pub fn create_container(&self, name: &str) -> Result<(), Error> {
        let venv = python_venv()?;
        let conn = format!(
            "DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};BlobEndpoint={};",
            self.endpoint()
        );
        run(Command::new(venv.join("bin/python")).args([
            "-c",
            "import sys; from azure.storage.blob import BlobServiceClient as C; \
             C.from_connection_string(sys.argv[1]).create_container(sys.argv[2])",
            &conn,
            name,
        ]))
    }

    /// The settings (object_store keys) that reach this server.
    pub fn config(&self) -> Vec<(&'static str, String)> {
        vec![
            ("azure_storage_account_name", AZURITE_ACCOUNT.to_owned()),
            ("azure_storage_account_key", AZURITE_KEY.to_owned()),
            ("azure_storage_endpoint", self.endpoint()),
            ("allow_http", "true".to_owned()),
        ]
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self._data);
    }
}

/// A TCP proxy on loopback in front of a server that holds each HTTP
/// request back for a fixed latency (what a request to a remote object
/// store costs) and counts the requests. A request starts when a client
/// sends after the server has answered (or first, on a new connection):
/// HTTP/1.1 without pipelining, as the object store clients speak it.
#[derive(Debug)]
pub struct LatencyProxy {
    port: u16,
    requests: std::sync::Arc<std::sync::atomic::AtomicU64>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl LatencyProxy {
    /// Starts a proxy to `127.0.0.1:upstream` adding `latency` per request.
    pub fn start(upstream: u16, latency: Duration) -> Result<LatencyProxy, Error> {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::Arc;
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let requests = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, halt) = (requests.clone(), stop.clone());
        std::thread::Builder::new()
            .name("latency-proxy".into())
            .spawn(move || {
                for client in listener.incoming() {
                    if halt.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                        continue;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    // Set when the server has sent since the client last did.
                    let answered = Arc::new(AtomicBool::new(true));
                    let (c2, s2) = match (client.try_clone(), server.try_clone()) {
                        (Ok(c), Ok(s)) => (c, s),
                        _ => continue,
                    };
                    let (up_answered, up_count) = (answered.clone(), count.clone());
                    std::thread::spawn(move || {
                        pump(client, s2, |_| {
                            if up_answered.swap(false, Ordering::SeqCst) {
                                up_count.fetch_add(1, Ordering::Relaxed);
                                std::thread::sleep(latency);
                            }
                        })
                    });
                    std::thread::spawn(move || {
                        pump(server, c2, |_| answered.store(true, Ordering::SeqCst))
                    });
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(LatencyProxy {
            port,
            requests,
            stop,
        })
    }

    /// The proxy's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Requests seen so far; `reset` counts again from zero.
    pub fn requests(&self, reset: bool) -> u64 {
        use std::sync::atomic::Ordering;
        if reset {
            self.requests.swap(0, Ordering::Relaxed)
        } else {
            self.requests.load(Ordering::Relaxed)
        }
    }
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies `from` to `to` until either closes, calling `seen` before
/// forwarding each read.
fn pump(mut from: TcpStream, mut to: TcpStream, seen: impl Fn(usize)) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                seen(n);
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
    let _ = from.shutdown(std::net::Shutdown::Both);
}

impl S3Server {
    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }
}

/// A cluster of `tdb` processes on loopback (`tdb cluster scheduler` and
/// its executors), each stopped on drop: for the cluster tests and the
/// interop pass that writes through one.
#[derive(Debug)]
pub struct Cluster {
    scheduler: String,
    processes: Vec<Process>,
    work_dirs: Vec<PathBuf>,
}

impl Cluster {
    /// Starts `tdb`'s scheduler on a port it picks and `executors`
    /// executors, each running `tasks` tasks at once and shuffling in a
    /// directory of its own under `work`. A lost executor is noticed after
    /// 5 s (the tests kill one), so executors beat every second.
    pub fn start(
        tdb: &Path,
        executors: usize,
        tasks: usize,
        work: &Path,
    ) -> Result<Cluster, Error> {
        let mut scheduler = Command::new(tdb)
            .args(["cluster", "scheduler", "--bind", "127.0.0.1:0"])
            .args(["--executor-timeout", "5"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", tdb.display()))?;
        let stdout = scheduler.stdout.take();
        let scheduler = Process::new(scheduler);
        let mut line = String::new();
        if let Some(out) = stdout {
            use std::io::BufRead as _;
            std::io::BufReader::new(out)
                .read_line(&mut line)
                .map_err(|e| e.to_string())?;
        }
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .ok_or_else(|| format!("the scheduler said {line:?}"))?
            .to_owned();
        let mut cluster = Cluster {
            scheduler: addr,
            processes: vec![scheduler],
            work_dirs: Vec::new(),
        };
        for i in 0..executors {
            let dir = work.join(format!("executor-{i}"));
            let executor = Command::new(tdb)
                .args(["cluster", "executor", "--scheduler", &cluster.scheduler])
                .args(["--port", "0", "--grpc-port", "0"])
                .args(["--tasks", &tasks.to_string()])
                .args(["--heartbeat", "1", "--work-dir"])
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| format!("{}: {e}", tdb.display()))?;
            cluster.processes.push(Process::new(executor));
            cluster.work_dirs.push(dir);
        }
        Ok(cluster)
    }

    /// The scheduler's `HOST:PORT`.
    pub fn scheduler(&self) -> &str {
        &self.scheduler
    }

    /// Each executor's work directory (its shuffle files), by number.
    pub fn work_dirs(&self) -> &[PathBuf] {
        &self.work_dirs
    }

    /// Kills executor `i` (SIGKILL: no goodbye to the scheduler) and
    /// waits for it to end.
    pub fn kill_executor(&mut self, i: usize) -> Result<(), Error> {
        let p = &mut self.processes[i + 1].0;
        p.kill().map_err(|e| e.to_string())?;
        p.wait().map_err(|e| e.to_string())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::install_once;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn one_install_runs_however_many_ask_at_once_and_a_failed_one_runs_again() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let root = std::env::temp_dir().join(format!(
            "tdb-install-once-{}-{}",
            std::process::id(),
            now.as_nanos()
        ));
        let dir = root.join("venv");
        let runs = AtomicUsize::new(0);
        // The first install fails: no stamp, the lock given back.
        let failed = install_once(&dir, |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            Err("pip failed".to_owned())
        });
        assert_eq!(failed, Err("pip failed".to_owned()));
        assert!(!dir.join(".installed").exists());
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    install_once(&dir, |d| {
                        runs.fetch_add(1, Ordering::SeqCst);
                        // Long enough for the others to find the lock taken.
                        std::thread::sleep(Duration::from_millis(300));
                        std::fs::create_dir_all(d).map_err(|e| e.to_string())
                    })
                    .unwrap();
                });
            }
        });
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert!(dir.join(".installed").exists());
        assert!(!root.join("venv.lock").exists());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
