//! `tdb cluster`: a scheduler and two executors, each a process of its
//! own on loopback, over the fixtures in an S3 server (moto, started
//! here). The SQL suite answers through the cluster as on one machine
//! (TileDB's answers), with both executors taking part; a query whose
//! executor is killed in it answers exactly (its tasks run again on the
//! other); an `INSERT` through it writes a fragment a partition, all
//! committed at once, and one that fails leaves nothing readers see.

#![cfg(feature = "cluster")]

#[path = "../../tdb-datafusion/tests/sql/db.rs"]
mod db;

use std::path::{Path, PathBuf};
use tdb::{ObjectStorage, StorageConfig};
use tdb_storage::WritableStorage as _;
use tdb_test_servers::{Cluster, S3Server};

/// A scheduler and `executors` executors (`tasks` tasks each) of this
/// build's `tdb`, shuffling under `tmp`.
fn start(executors: usize, tasks: usize, tmp: &Path) -> Cluster {
    Cluster::start(Path::new(env!("CARGO_BIN_EXE_tdb")), executors, tasks, tmp)
        .unwrap_or_else(|e| panic!("cluster: {e}"))
}

/// Puts fixture `case`'s TileDB-written array under key `case`, byte for
/// byte.
fn upload(s: &ObjectStorage, case: &str) {
    let dir = tdb_testdata::root().join(case).join("array");
    for rel in tdb_testdata::files_in(&dir) {
        let bytes = std::fs::read(dir.join(&rel)).unwrap();
        s.write(&format!("{case}/{rel}"), bytes.into()).unwrap();
    }
}

/// `'key' 'value'` pairs of the settings that reach `server` through
/// `127.0.0.1:port` (the server's own port, or a proxy's in front of it).
fn s3_options(server: &S3Server, port: u16) -> Vec<String> {
    server
        .settings()
        .iter()
        .map(|(k, v)| match k.as_str() {
            "aws_endpoint_url" => format!("'{k}' 'http://127.0.0.1:{port}'"),
            _ => format!("'{k}' '{v}'"),
        })
        .collect()
}

fn s3_storage(server: &S3Server, bucket: &str) -> ObjectStorage {
    server.create_bucket(bucket).unwrap();
    let config: StorageConfig = server.settings().into_iter().collect();
    ObjectStorage::open(&format!("s3://{bucket}"), &config).unwrap()
}

/// The SQL suite with its arrays in `bucket` of `server`: every `LOCATION
/// '../../testdata/arrays/CASE/array'` becomes `s3://BUCKET/CASE`, with
/// the server's settings among the table's options (the processes that
/// read it have them from the plan alone), each case uploaded once.
fn suite_on_s3(server: &S3Server, bucket: &str, out: &Path) -> PathBuf {
    let suite =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tdb-datafusion/tests/sql/fixtures.slt");
    let storage = s3_storage(server, bucket);
    let settings = s3_options(server, server.port());
    let mut uploaded = std::collections::HashSet::new();
    let mut text = String::new();
    for line in std::fs::read_to_string(suite).unwrap().lines() {
        let local = line
            .split_once("LOCATION '../../testdata/arrays/")
            .and_then(|(head, rest)| {
                let (case, tail) = rest.split_once("/array'")?;
                Some((head, case, tail))
            });
        let Some((head, case, tail)) = local else {
            text.push_str(line);
            text.push('\n');
            continue;
        };
        if uploaded.insert(case.to_owned()) {
            upload(&storage, case);
        }
        let options = match tail.trim().strip_prefix("OPTIONS (") {
            Some(theirs) => format!("OPTIONS ({}, {theirs}", settings.join(", ")),
            None => format!("OPTIONS ({})", settings.join(", ")),
        };
        text.push_str(&format!(
            "{head}LOCATION 's3://{bucket}/{case}' {options}\n"
        ));
    }
    let path = out.join("fixtures_on_s3.slt");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sql_suite_answers_through_a_cluster_as_on_one_machine() {
    let tmp = tempfile::tempdir().unwrap();
    let server = S3Server::start().unwrap_or_else(|e| panic!("S3 server: {e}"));
    let suite = suite_on_s3(&server, "cluster", tmp.path());
    let cluster = start(2, 2, tmp.path());

    let scheduler = cluster.scheduler().to_owned();
    let mut runner = sqllogictest::Runner::new(move || {
        let scheduler = scheduler.clone();
        async move {
            let ctx = tdb_cluster::connect(&scheduler)
                .await
                .map_err(|e| datafusion::common::DataFusionError::External(Box::new(e)))?;
            Ok(db::Db { ctx })
        }
    });
    runner
        .run_file_async(&suite)
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // The scans ran on the executors: each shuffled rows of its tasks.
    for dir in cluster.work_dirs() {
        assert!(
            !tdb_testdata::files_in(dir).is_empty(),
            "{} ran no task",
            dir.display()
        );
    }
}

/// A copy of fixture sparse_2d_int under `tmp`, a cluster, and a
/// session of it with the copy as table `t`.
async fn cluster_with_a_table(
    tmp: &Path,
) -> (Cluster, PathBuf, datafusion::prelude::SessionContext) {
    let array = tmp.join("array");
    tdb_testdata::copy_dir(
        &tdb_testdata::root().join("sparse_2d_int").join("array"),
        &array,
    )
    .unwrap();
    let cluster = start(2, 2, tmp);
    let ctx = tdb_cluster::connect(cluster.scheduler()).await.unwrap();
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS TILEDB LOCATION '{}'",
        array.display()
    ))
    .await
    .unwrap();
    (cluster, array, ctx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insert_through_a_cluster_writes_a_fragment_a_partition() {
    let tmp = tempfile::tempdir().unwrap();
    let (_cluster, array, ctx) = cluster_with_a_table(tmp.path()).await;
    let before = tdb::Array::open(&array).unwrap().fragments().len();
    // Mirror the cells of x > 50 onto x < 51: new coordinates, none overwritten.
    let answer = ctx
        .sql("INSERT INTO t SELECT 101 - x, y, a, f FROM t WHERE x > 50")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(db::cell(answer[0].column(0), 0), "34");

    let after = tdb::Array::open(&array).unwrap();
    let written = after.fragments().len() - before;
    assert!(
        written > 1,
        "{written} fragments: the partitions were not written apart"
    );
    let local = tdb_datafusion::session();
    local
        .sql(&format!(
            "CREATE EXTERNAL TABLE t STORED AS TILEDB LOCATION '{}'",
            array.display()
        ))
        .await
        .unwrap();
    let check = |sql: &'static str| {
        let local = local.clone();
        async move {
            let batches = local.sql(sql).await.unwrap().collect().await.unwrap();
            db::cell(batches[0].column(0), 0)
        }
    };
    // Every cell once: the 60 there were and the 34 mirrored, the cells
    // below 51 now holding what the whole array held (-4203: TileDB's sum).
    assert_eq!(check("SELECT count(*) FROM t").await, "94");
    assert_eq!(check("SELECT sum(a) FROM t WHERE x < 51").await, "-4203");
    // The cluster's session sees them too: its table follows the array.
    let again = ctx
        .sql("SELECT count(*) FROM t")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(db::cell(again[0].column(0), 0), "94");
}

/// The rows of an answer, a line each.
fn rows(batches: &[datafusion::arrow::record_batch::RecordBatch]) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            let cells: Vec<String> = b.columns().iter().map(|c| db::cell(c, r)).collect();
            out.push(cells.join(" "));
        }
    }
    out
}

/// Runs `query` on a cluster of two executors (one task at a time each)
/// over fixture sparse_2d_int in S3 as table `t` (8 partitions, every
/// request held back 100 ms), and SIGKILLs executor 0 once it has finished
/// a task (its output is on its disk, lost with it): the answer, and the
/// S3 server (bucket `killed`, the array at `sparse_2d_int`).
async fn killing_an_executor_in(
    query: &'static str,
    tmp: &Path,
) -> (Vec<datafusion::arrow::record_batch::RecordBatch>, S3Server) {
    use std::time::{Duration, Instant};
    let server = S3Server::start().unwrap_or_else(|e| panic!("S3 server: {e}"));
    upload(&s3_storage(&server, "killed"), "sparse_2d_int");
    // A task takes a while, so the kill lands while the query runs.
    let proxy =
        tdb_test_servers::LatencyProxy::start(server.port(), Duration::from_millis(100)).unwrap();
    let mut cluster = start(2, 1, tmp);
    let ctx = tdb_cluster::connect(cluster.scheduler()).await.unwrap();
    ctx.sql("SET datafusion.execution.target_partitions = 8")
        .await
        .unwrap();
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS TILEDB LOCATION 's3://killed/sparse_2d_int' OPTIONS ({})",
        s3_options(&server, proxy.port()).join(", ")
    ))
    .await
    .unwrap();
    let answer = tokio::spawn({
        let ctx = ctx.clone();
        async move { ctx.sql(query).await?.collect().await }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while tdb_testdata::files_in(&cluster.work_dirs()[0]).is_empty() {
        assert!(
            !answer.is_finished(),
            "the query ended before the executor ran a task"
        );
        assert!(
            Instant::now() < deadline,
            "the executor ran no task in a minute"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cluster.kill_executor(0).unwrap();
    assert!(!answer.is_finished(), "the query ended before the kill");
    let got = tokio::time::timeout(Duration::from_secs(120), answer)
        .await
        .expect("the query ends within two minutes of the kill")
        .unwrap()
        .unwrap();
    (got, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_whose_executor_is_killed_answers_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let query = "SELECT x, count(*), sum(a) FROM t GROUP BY x ORDER BY x";
    let (got, _server) = killing_an_executor_in(query, tmp.path()).await;
    let local = tdb_datafusion::session();
    local
        .sql(&format!(
            "CREATE EXTERNAL TABLE t STORED AS TILEDB LOCATION '{}'",
            tdb_testdata::root().join("sparse_2d_int/array").display()
        ))
        .await
        .unwrap();
    let want = local.sql(query).await.unwrap().collect().await.unwrap();
    assert_eq!(rows(&got), rows(&want));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insert_whose_executor_is_killed_writes_every_cell_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (got, server) = killing_an_executor_in(
        "INSERT INTO t SELECT 101 - x, y, a, f FROM t WHERE x > 50",
        tmp.path(),
    )
    .await;
    assert_eq!(rows(&got), ["34"]);
    // The kill lands in a task (its rows still being read): the task runs
    // again on the other executor, and each cell shows once.
    let local = tdb_datafusion::session();
    local
        .sql(&format!(
            "CREATE EXTERNAL TABLE t STORED AS TILEDB LOCATION 's3://killed/sparse_2d_int' OPTIONS ({})",
            s3_options(&server, server.port()).join(", ")
        ))
        .await
        .unwrap();
    let check = local
        .sql("SELECT count(*), sum(a) FILTER (WHERE x < 51) FROM t")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(rows(&check), ["94 -4203"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insert_that_fails_leaves_nothing_readers_see() {
    let tmp = tempfile::tempdir().unwrap();
    let (_cluster, array, ctx) = cluster_with_a_table(tmp.path()).await;
    let before = tdb::Array::open(&array).unwrap().fragments().len();
    // The partitions of x > 90 put cells outside the domain [1, 100]: their
    // writes fail, the others' succeed, and none may show.
    let failed = async {
        ctx.sql("INSERT INTO t SELECT CASE WHEN x > 90 THEN 1000 ELSE x END, y, a, f FROM t")
            .await?
            .collect()
            .await
    }
    .await;
    let e = failed
        .expect_err("an insert outside the domain")
        .to_string();
    assert!(e.contains("domain"), "{e}");
    let after = tdb::Array::open(&array).unwrap();
    assert_eq!(after.fragments().len(), before);
    let cells = after.read_all(tdb::ReadSpec::new(["a"])).unwrap().num_cells;
    assert_eq!(cells, 60);
}
