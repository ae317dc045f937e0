//! TileDB arrays on a Ballista cluster: SQL whose scans run on many
//! machines, each executor reading its pieces straight from the array's
//! storage.
//!
//! A client plans a query over tdb-datafusion's tables and sends the
//! logical plan to the scheduler; the scheduler plans it physically (tdb's
//! scans split the subarray into partitions), cuts it into stages, and
//! ships each stage's tasks to the executors. Plans cross processes
//! through [`LogicalCodec`] and [`PhysicalCodec`], which carry a table as
//! its URI and the options that open it at the window the client saw
//! (pinned, so every process reads the same fragments), and a scan as
//! that and its fields, partitions' subarrays, pushed condition, limit and
//! budget. Every process registers them: [`connect`] on the client,
//! [`run_scheduler`] and [`run_executor`] on the servers (the `tdb
//! cluster` commands).
//!
//! The options shipped include what opens the array: an encryption key
//! and storage settings travel in the plan, over the cluster's own
//! connections. Credentials the environment gives each process do not.

mod codec;
mod spread;
mod wire;

pub use codec::{LogicalCodec, PhysicalCodec};
pub use spread::{PartScan, SpreadScans};

use ballista::prelude::{SessionConfigExt as _, SessionContextExt as _};
use ballista_core::config::TaskSchedulingPolicy;
use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What went wrong in a cluster's process.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bytes another process put in a plan are not a plan of tdb's.
    #[error("a plan from another process: {0}")]
    Decode(String),
    /// An address that names no socket.
    #[error("address {addr:?}: {why}")]
    Address {
        /// The address given.
        addr: String,
        /// Why it names none.
        why: String,
    },
    /// The scheduler could not start or stopped.
    #[error("scheduler: {0}")]
    Scheduler(String),
    /// The executor could not start or stopped.
    #[error("executor: {0}")]
    Executor(String),
    /// The client could not reach the scheduler.
    #[error("cluster at {url}: {source}")]
    Connect {
        /// The scheduler's URL.
        url: String,
        /// What DataFusion reported.
        source: datafusion::common::DataFusionError,
    },
}

/// How a scheduler runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SchedulerOptions {
    /// `HOST:PORT` to listen on (port 0: any free one).
    pub bind: String,
    /// An executor not heard from for this long is lost: its tasks run
    /// again on the others.
    pub executor_timeout: Duration,
}

impl SchedulerOptions {
    /// A scheduler on `bind`, Ballista's timeouts.
    pub fn new(bind: impl Into<String>) -> Self {
        SchedulerOptions {
            bind: bind.into(),
            executor_timeout: Duration::from_secs(180),
        }
    }
}

/// The first socket address `addr` names (`HOST:PORT`).
async fn resolve(addr: &str) -> Result<SocketAddr, Error> {
    let bad = |why: String| Error::Address {
        addr: addr.to_owned(),
        why,
    };
    tokio::net::lookup_host(addr)
        .await
        .map_err(|e| bad(e.to_string()))?
        .next()
        .ok_or_else(|| bad("resolves to nothing".into()))
}

/// Starts a scheduler with tdb's codecs: `ready` is called with the
/// address it listens on once it does, then it serves until it fails.
pub async fn run_scheduler(
    options: SchedulerOptions,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), Error> {
    let failed = |e: &dyn std::fmt::Display| Error::Scheduler(e.to_string());
    let listener = tokio::net::TcpListener::bind(resolve(&options.bind).await?)
        .await
        .map_err(|e| failed(&e))?;
    let addr = listener.local_addr().map_err(|e| failed(&e))?;
    let timeout = options.executor_timeout.as_secs().max(1);
    let config = SchedulerConfig {
        bind_host: addr.ip().to_string(),
        external_host: addr.ip().to_string(),
        bind_port: addr.port(),
        scheduling_policy: TaskSchedulingPolicy::PushStaged,
        executor_timeout_seconds: timeout,
        // Look for lost executors often enough to notice within the
        // timeout, and give a job without any that long to get one.
        expire_dead_executor_interval_seconds: (timeout / 4).clamp(1, 15),
        no_executors_grace_period_seconds: timeout,
        override_logical_codec: Some(Arc::new(LogicalCodec::default())),
        override_physical_codec: Some(Arc::new(PhysicalCodec::default())),
        override_session_builder: Some(Arc::new(|config| {
            let state = ballista_core::utils::default_session_builder(config)?;
            Ok(SessionStateBuilder::new_from_existing(state)
                .with_physical_optimizer_rule(Arc::new(SpreadScans))
                .build())
        })),
        ..Default::default()
    };
    config.validate().map_err(|e| failed(&e))?;
    let config = Arc::new(config);
    let cluster = BallistaCluster::new_from_config(&config)
        .await
        .map_err(|e| failed(&e))?;
    let scheduler = create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, config)
        .await
        .map_err(|e| failed(&e))?;
    ready(addr);
    start_grpc_service_with_listener(listener, scheduler)
        .await
        .map_err(|e| failed(&e))
}

/// How an executor runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ExecutorOptions {
    /// The scheduler's `HOST:PORT`.
    pub scheduler: String,
    /// The host to listen on (an IP address).
    pub bind_host: String,
    /// The port results and shuffles are fetched from (Arrow Flight; 0:
    /// a free one).
    pub port: u16,
    /// The port the scheduler launches tasks on (0: a free one).
    pub grpc_port: u16,
    /// Where shuffle files go (one directory an executor).
    pub work_dir: PathBuf,
    /// Tasks run at once (0: one a core).
    pub tasks: usize,
    /// How often it tells the scheduler it lives.
    pub heartbeat: Duration,
}

impl ExecutorOptions {
    /// An executor of the scheduler at `scheduler`, on Ballista's ports,
    /// shuffling into `work_dir`.
    pub fn new(scheduler: impl Into<String>, work_dir: impl Into<PathBuf>) -> Self {
        ExecutorOptions {
            scheduler: scheduler.into(),
            bind_host: "127.0.0.1".into(),
            port: 50051,
            grpc_port: 50052,
            work_dir: work_dir.into(),
            tasks: 0,
            heartbeat: Duration::from_secs(60),
        }
    }
}

/// Starts an executor with tdb's codecs and serves until the scheduler
/// stops it, it is interrupted, or it fails.
pub async fn run_executor(options: ExecutorOptions) -> Result<(), Error> {
    let failed = |e: &dyn std::fmt::Display| Error::Executor(e.to_string());
    let (host, port) = options
        .scheduler
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
        .ok_or_else(|| Error::Address {
            addr: options.scheduler.clone(),
            why: "not HOST:PORT".into(),
        })?;
    std::fs::create_dir_all(&options.work_dir).map_err(|e| failed(&e))?;
    let port_on = |port: u16| free_port(&options.bind_host, port);
    let (flight, grpc) = (port_on(options.port)?, port_on(options.grpc_port)?);
    let config = ExecutorProcessConfig {
        bind_host: options.bind_host.clone(),
        external_host: Some(options.bind_host.clone()),
        port: flight,
        grpc_port: grpc,
        scheduler_host: host.to_owned(),
        scheduler_port: port,
        // Retry while the scheduler starts.
        scheduler_connect_timeout_seconds: 30,
        vcores: options.tasks,
        task_scheduling_policy: TaskSchedulingPolicy::PushStaged,
        work_dir: Some(options.work_dir.to_string_lossy().into_owned()),
        executor_heartbeat_interval_seconds: options.heartbeat.as_secs().max(1),
        override_logical_codec: Some(Arc::new(LogicalCodec::default())),
        override_physical_codec: Some(Arc::new(PhysicalCodec::default())),
        ..Default::default()
    };
    start_executor_process(Arc::new(config))
        .await
        .map_err(|e| failed(&e))
}

/// `port`, or for 0 one free on `host` now. Ballista tells the scheduler
/// the port it was given, not the one it bound: 0 would reach the
/// scheduler as the port to call.
fn free_port(host: &str, port: u16) -> Result<u16, Error> {
    if port != 0 {
        return Ok(port);
    }
    let bad = |e: std::io::Error| Error::Address {
        addr: format!("{host}:0"),
        why: e.to_string(),
    };
    let listener = std::net::TcpListener::bind((host, 0)).map_err(bad)?;
    Ok(listener.local_addr().map_err(bad)?.port())
}

/// A session whose queries run on the cluster whose scheduler is at
/// `HOST:PORT`: `STORED AS TILEDB` and tdb-datafusion's tables work as in
/// [`tdb_datafusion::session`], their scans on the executors.
pub async fn connect(scheduler: &str) -> Result<SessionContext, Error> {
    let url = format!("df://{scheduler}");
    // The adaptive planner plans stages with rules of its own, without
    // [`SpreadScans`]: every task would read every partition of a scan.
    let config = SessionConfig::new_with_ballista()
        .with_ballista_adaptive_query_planner(false)
        .with_ballista_logical_extension_codec(Arc::new(LogicalCodec::default()))
        .with_ballista_physical_extension_codec(Arc::new(PhysicalCodec::default()));
    let state = tdb_datafusion::session_with(config).state();
    SessionContext::remote_with_state(&url, state)
        .await
        .map_err(|source| Error::Connect { url, source })
}
