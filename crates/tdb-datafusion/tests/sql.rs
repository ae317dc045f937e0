//! SQL over the fixtures: the sqllogictest suite (answers from TileDB's own
//! reads, `xtask/fixtures/gen_sql.py`), what EXPLAIN shows of the pushed
//! subarray and condition, and the bytes a dimension filter saves.

#[path = "sql/db.rs"]
mod db;

use datafusion::prelude::SessionContext;
use db::{cell, Db};
use sqllogictest::Runner;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tdb::{AnyStorage, Array as TdbArray, LocalStorage, OpenOptions};
use tdb_datafusion::{TableOptions, TileDbTable};
use tdb_storage::RecordingStorage;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_over_the_fixtures_gives_tiledbs_answers() {
    let mut runner = Runner::new(|| async {
        Ok(Db {
            ctx: tdb_datafusion::session(),
        })
    });
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sql/fixtures.slt");
    runner
        .run_file_async(&file)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

fn fixture(case: &str) -> PathBuf {
    tdb_testdata::root().join(case).join("array")
}

async fn explain(ctx: &SessionContext, sql: &str) -> String {
    let batches = ctx
        .sql(&format!("EXPLAIN {sql}"))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let mut out = String::new();
    for b in &batches {
        let plans = b.column(1);
        for r in 0..b.num_rows() {
            out.push_str(&cell(plans, r));
            out.push('\n');
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_names_the_pushed_subarray_and_condition() {
    let ctx = tdb_datafusion::session();
    let path = fixture("aggregates_sparse");
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS TILEDB LOCATION '{}'",
        path.display()
    ))
    .await
    .unwrap();
    let plan = explain(
        &ctx,
        "SELECT x, i FROM t WHERE x BETWEEN 2 AND 5 AND i > 3 AND s = 'k1' AND f > 0.5",
    )
    .await;
    let scan = plan
        .lines()
        .find(|l| l.contains("TileDbScan"))
        .unwrap_or_else(|| panic!("no scan in\n{plan}"));
    assert!(scan.contains("subarray=[x: [2, 5]]"), "{plan}");
    assert!(
        scan.contains("condition=(attr('i') > 3) and (attr('s') == 'k1')"),
        "{plan}"
    );
    // Exact filters are gone from the plan; the float one stays in DataFusion.
    assert!(plan.contains("f@") || plan.contains("f >"), "{plan}");
    assert!(!plan.contains("i@1 > 3"), "{plan}");

    // Filters no read can apply stay above the scan, which reads whole.
    let plan = explain(&ctx, "SELECT x FROM t WHERE x + y > 3").await;
    let scan = plan.lines().find(|l| l.contains("TileDbScan")).unwrap();
    assert!(
        !scan.contains("subarray") && !scan.contains("condition"),
        "{plan}"
    );

    // An empty range reads nothing.
    let got = ctx
        .sql("SELECT count(*) FROM t WHERE x > 5 AND x < 3")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(cell(got[0].column(0), 0), "0");
}

/// Tile bytes read by a query over a fixture opened on a recording
/// storage, and the query's first answer.
async fn bytes_read(case: &str, sql: &str) -> (u64, String) {
    let recording = Arc::new(RecordingStorage::new(LocalStorage::new(fixture(case))));
    let storage: AnyStorage = recording.clone();
    let array = TdbArray::open_in(storage, "", OpenOptions::new()).unwrap();
    let table = TileDbTable::new(array, case, &TableOptions::default()).unwrap();
    let ctx = tdb_datafusion::session();
    ctx.register_table("t", Arc::new(table)).unwrap();
    recording.take();
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    // Bytes of tiles read (data files), not of the fragment metadata each
    // partition's reader loads.
    let trace = recording.trace();
    let bytes = trace
        .lines()
        .filter(|l| {
            !l.contains("__fragment_metadata") && l.trim_start().starts_with("__fragments/")
        })
        .filter_map(|l| {
            l.rsplit(": ")
                .next()?
                .trim_end_matches(" arranged")
                .strip_suffix(" B")?
                .parse::<u64>()
                .ok()
        })
        .sum();
    let answer = cell(batches[0].column(0), 0);
    (bytes, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dimension_filter_reads_only_the_tiles_it_needs() {
    let (all, n_all) = bytes_read("sparse_many_tiles", "SELECT count(a) FROM t").await;
    let (some, n_some) =
        bytes_read("sparse_many_tiles", "SELECT count(a) FROM t WHERE x <= 100").await;
    assert!(n_some.parse::<u64>().unwrap() < n_all.parse::<u64>().unwrap());
    assert!(
        some * 4 < all,
        "a filter on x read {some} bytes of tiles, the whole array {all}"
    );
}

/// A backend answering batches of ranges a moment later, as an object
/// store does (the local disk answers at once, so reads side by side never
/// overlap their fetches).
#[derive(Debug)]
struct Later<S>(Arc<S>);

impl<S: tdb_storage::ReadableStorage + 'static> tdb_storage::ReadableStorage for Later<S> {
    fn read(&self, key: &str) -> tdb_storage::Result<Option<bytes::Bytes>> {
        self.0.read(key)
    }
    fn read_ranges(
        &self,
        requests: &[tdb_storage::RangeRequest],
    ) -> tdb_storage::Result<Vec<Option<tdb_storage::RangeRead>>> {
        self.0.read_ranges(requests)
    }
    fn size(&self, key: &str) -> tdb_storage::Result<Option<u64>> {
        self.0.size(key)
    }
    fn read_ranges_async(
        &self,
        requests: Vec<tdb_storage::RangeRequest>,
    ) -> tdb_storage::RangesFuture<'_> {
        Box::pin(async move {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            self.0.read_ranges(&requests)
        })
    }
}

impl<S: tdb_storage::ListableStorage> tdb_storage::ListableStorage for Later<S> {
    fn list_dir(&self, dir: &str) -> tdb_storage::Result<tdb_storage::Listing> {
        self.0.list_dir(dir)
    }
}

impl<S: tdb_storage::WritableStorage> tdb_storage::WritableStorage for Later<S> {
    fn write(&self, key: &str, data: bytes::Bytes) -> tdb_storage::Result<()> {
        self.0.write(key, data)
    }
    fn create(&self, key: &str, data: bytes::Bytes) -> tdb_storage::Result<()> {
        self.0.create(key, data)
    }
    fn upload<'a>(&'a self, key: &str) -> tdb_storage::Result<Box<dyn tdb_storage::Upload + 'a>> {
        self.0.upload(key)
    }
    fn delete(&self, key: &str) -> tdb_storage::Result<()> {
        self.0.delete(key)
    }
    fn delete_prefix(&self, dir: &str) -> tdb_storage::Result<()> {
        self.0.delete_prefix(dir)
    }
}

/// Partitions started side by side on a cold snapshot load the fragment
/// metadata they need once between them (each fetched every section
/// before, where fetches take a while).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_on_a_cold_snapshot_fetch_each_section_once() {
    let case = "sparse_many_tiles";
    let recording = Arc::new(RecordingStorage::new(LocalStorage::new(fixture(case))));
    let storage: AnyStorage = Arc::new(Later(recording.clone()));
    let array = TdbArray::open_in(storage, "", OpenOptions::new()).unwrap();
    let table = TileDbTable::new(array, case, &TableOptions::default()).unwrap();
    let config = datafusion::prelude::SessionConfig::new().with_target_partitions(4);
    let ctx = tdb_datafusion::session_with(config);
    ctx.register_table("t", Arc::new(table)).unwrap();
    let sql = "SELECT count(a) FROM t";
    let plan = explain(&ctx, sql).await;
    assert!(plan.contains("partitions=4"), "{plan}");
    recording.take();
    let got = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    assert_ne!(cell(got[0].column(0), 0), "0");
    let mut fetched = std::collections::HashSet::new();
    for r in recording.take() {
        let tdb_storage::Request::ReadRanges { ranges, .. } = r else {
            continue;
        };
        for (file, range, _) in ranges {
            if file.ends_with("__fragment_metadata.tdb") {
                assert!(
                    fetched.insert((file.clone(), range)),
                    "{file} {range:?} again"
                );
            }
        }
    }
    assert!(!fetched.is_empty(), "no section fetched");
}

#[test]
fn statistics_give_row_counts_and_dimension_bounds() {
    use datafusion::catalog::TableProvider;
    use datafusion::common::stats::Precision;
    use datafusion::common::ScalarValue;
    let path = fixture("sparse_2d_int");
    let table = TileDbTable::open(path.to_str().unwrap(), &TableOptions::default()).unwrap();
    let ned = table.array().non_empty_domain().unwrap().unwrap();
    let stats = table.statistics().unwrap();
    let cells: u64 = table
        .array()
        .fragments()
        .iter()
        .map(|f| f.metadata.cell_num(table.array().schema()).unwrap())
        .sum();
    assert_eq!(stats.num_rows, Precision::Inexact(cells as usize));
    for (d, r) in ned.iter().enumerate() {
        let (lo, hi) = r.bounds();
        let int = |b: &[u8]| ScalarValue::Int32(Some(i32::from_le_bytes(b.try_into().unwrap())));
        let c = &stats.column_statistics[d];
        assert_eq!(c.min_value, Precision::Inexact(int(lo)));
        assert_eq!(c.max_value, Precision::Inexact(int(hi)));
        assert_eq!(c.null_count, Precision::Exact(0));
    }
    // A dense table's rows are its non-empty domain's cells, exactly.
    let dense = fixture("dense_2d_row_row");
    let table = TileDbTable::open(dense.to_str().unwrap(), &TableOptions::default()).unwrap();
    let ned = table.array().non_empty_domain().unwrap().unwrap();
    let side = |r: &tdb::Range| {
        let (lo, hi) = r.bounds();
        let v = |b: &[u8]| i32::from_le_bytes(b.try_into().unwrap()) as usize;
        v(hi) - v(lo) + 1
    };
    assert_eq!(
        table.statistics().unwrap().num_rows,
        Precision::Exact(side(&ned[0]) * side(&ned[1]))
    );
}

/// Attribute statistics hold TileDB's own min and max of each attribute
/// (its aggregate answers over the whole array in expected.json); a
/// non-nullable attribute has no nulls, a nullable one's are estimated.
#[test]
fn attribute_statistics_hold_tiledbs_min_and_max() {
    use datafusion::catalog::TableProvider;
    use datafusion::common::stats::Precision;
    use datafusion::common::ScalarValue;
    let case = tdb_testdata::root().join("aggregates_sparse");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(case.join("expected.json")).unwrap())
            .unwrap();
    let table = TileDbTable::open(
        case.join("array").to_str().unwrap(),
        &TableOptions::default(),
    )
    .unwrap();
    let stats = table.statistics().unwrap();
    let schema = table.schema();
    let whole = expected["queries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| {
            q["aggregates"].is_object()
                && q["subarray"].is_null()
                && q["condition"].is_null()
                && q["timestamp"].is_null()
        })
        .unwrap();
    let mut bounded = 0;
    for (name, answer) in whole["aggregates"].as_object().unwrap() {
        let i = schema.index_of(name).unwrap();
        let c = &stats.column_statistics[i];
        let attr = table
            .array()
            .schema()
            .attributes
            .iter()
            .find(|a| &a.name == name)
            .unwrap();
        if !attr.nullable {
            assert_eq!(c.null_count, Precision::Exact(0), "{name}");
        }
        let (Precision::Inexact(min), Precision::Inexact(max)) = (&c.min_value, &c.max_value)
        else {
            continue;
        };
        let t = schema.field(i).data_type();
        let value = |v: &serde_json::Value| ScalarValue::try_from_string(v.to_string(), t).unwrap();
        let (lo, hi) = (value(&answer["min"]), value(&answer["max"]));
        assert!(
            min <= &lo && &hi <= max,
            "{name}: [{min}, {max}] against TileDB's [{lo}, {hi}]"
        );
        bounded += 1;
    }
    // i, u, f and n (s is a string: TileDB keeps no bounds of UTF-8).
    assert_eq!(bounded, 4);
}

/// A copy of fixture `case` under `tmp` as table `t` of a session of 4
/// partitions.
async fn a_table(case: &str, tmp: &Path) -> (PathBuf, SessionContext) {
    let array = tmp.join("array");
    tdb_testdata::copy_dir(&fixture(case), &array).unwrap();
    let ctx = tdb_datafusion::session_with(
        datafusion::prelude::SessionConfig::new().with_target_partitions(4),
    );
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS TILEDB LOCATION '{}'",
        array.display()
    ))
    .await
    .unwrap();
    (array, ctx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insert_writes_a_fragment_a_partition_committed_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (array, ctx) = a_table("sparse_2d_int", tmp.path()).await;
    let commits = |dir: &Path| std::fs::read_dir(dir.join("__commits")).unwrap().count();
    let (fragments, before) = (
        TdbArray::open(&array).unwrap().fragments().len(),
        commits(&array),
    );
    // The cells of x > 50 mirrored onto x < 51, where none lies yet.
    let answer = ctx
        .sql("INSERT INTO t SELECT 101 - x, y, a, f FROM t WHERE x > 50")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(cell(answer[0].column(0), 0), "34");
    let after = TdbArray::open(&array).unwrap();
    assert!(
        after.fragments().len() > fragments + 1,
        "one fragment a partition"
    );
    assert_eq!(commits(&array), before + 1, "one commit for them all");
    let batches = ctx
        .sql("SELECT count(*), sum(a) FILTER (WHERE x < 51) FROM t")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    // Every cell once; below 51 what the whole array held (TileDB's sum).
    assert_eq!(cell(batches[0].column(0), 0), "94");
    assert_eq!(cell(batches[0].column(1), 0), "-4203");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insert_over_its_budget_writes_a_partition_as_several_fragments() {
    let tmp = tempfile::tempdir().unwrap();
    let (array, ctx) = a_table("sparse_2d_int", tmp.path()).await;
    // A 4 KiB budget: a partition holds 1 KiB of rows, less than a batch
    // of 64.
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE small STORED AS TILEDB LOCATION '{}' OPTIONS ('budget' '4096')",
        array.display()
    ))
    .await
    .unwrap();
    ctx.sql("SET datafusion.execution.batch_size = 64")
        .await
        .unwrap();
    let commits = |dir: &Path| std::fs::read_dir(dir.join("__commits")).unwrap().count();
    let (fragments, before) = (
        TdbArray::open(&array).unwrap().fragments().len(),
        commits(&array),
    );
    let one = |sql: &'static str| {
        let ctx = ctx.clone();
        async move {
            let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
            cell(batches[0].column(0), 0)
        }
    };
    // 1,000 cells, each coordinate once, marked by a >= 1,000,000.
    let insert = "INSERT INTO small SELECT CAST(value % 100 + 1 AS INT), \
                  CAST(value / 100 + 1 AS INT), value + 1000000, CAST(value AS FLOAT) \
                  FROM range(0, 1000)";
    assert_eq!(one(insert).await, "1000");
    let written = TdbArray::open(&array).unwrap().fragments().len() - fragments;
    assert!(written > 4, "{written} fragments: no partition was split");
    assert_eq!(commits(&array), before + 1, "one commit for them all");
    assert_eq!(
        one("SELECT count(*) FROM t WHERE a >= 1000000").await,
        "1000"
    );
    assert_eq!(
        one("SELECT sum(a - 1000000) FROM t WHERE a >= 1000000").await,
        "499500"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dense_insert_writes_a_box_a_partition() {
    let tmp = tempfile::tempdir().unwrap();
    let (array, ctx) = a_table("dense_2d_row_row", tmp.path()).await;
    let one = |sql: &'static str| {
        let ctx = ctx.clone();
        async move {
            let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
            cell(batches[0].column(0), 0)
        }
    };
    let before = one("SELECT sum(CAST(a AS BIGINT)) FROM t").await;
    let fragments = TdbArray::open(&array).unwrap().fragments().len();
    // Every cell again, one more: each partition of the scan is a box of
    // rows, and each box a dense fragment.
    assert_eq!(
        one("INSERT INTO t SELECT r, c, a + 1, f FROM t").await,
        "35"
    );
    let after = TdbArray::open(&array).unwrap();
    assert!(
        after.fragments().len() > fragments + 1,
        "one fragment a partition"
    );
    let want = before.parse::<i64>().unwrap() + 35;
    assert_eq!(
        one("SELECT sum(CAST(a AS BIGINT)) FROM t").await,
        want.to_string()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dense_insert_with_holes_fails_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (array, ctx) = a_table("dense_2d_row_row", tmp.path()).await;
    let commits = std::fs::read_dir(array.join("__commits")).unwrap().count();
    // Column 3 left out: no partition's rows fill a box.
    let failed = async {
        ctx.sql("INSERT INTO t SELECT r, c, a, f FROM t WHERE c <> 3")
            .await?
            .collect()
            .await
    }
    .await;
    let e = failed.expect_err("rows that fill no box").to_string();
    assert!(e.contains("box"), "{e}");
    assert_eq!(
        std::fs::read_dir(array.join("__commits")).unwrap().count(),
        commits,
        "nothing committed"
    );
}
