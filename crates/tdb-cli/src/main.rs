//! `tdb`: the command-line face of tdb.

use clap::{Parser, Subcommand};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use tdb_cli::OutputFormat::{self, Csv, Json, Table};
use tdb_cli::{error_report, inspect, CliError};
use tdb_fragment::TimeWindow;

#[derive(Parser)]
#[command(
    name = "tdb",
    version,
    about = "Read, inspect and change TileDB arrays without the C++ library",
    after_help = "Exit status: 0 done (verify: the array is clean); 1 verify found problems; \
                  2 an error (its message says what to change).\n\
                  RUST_LOG=debug (or tdb_query=debug, tdb_object_store=debug, ...) logs \
                  commits, consolidation steps, read pieces and storage requests on stderr."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// No progress bars (they are drawn on stderr only when it is a
    /// terminal).
    #[arg(long, short, global = true)]
    quiet: bool,
    /// A storage setting for every path and URI the command opens,
    /// `KEY=VALUE`, repeatable: TileDB's config names
    /// (`vfs.s3.endpoint_override=host:port`, `vfs.s3.scheme=http`,
    /// `vfs.s3.aws_access_key_id=...`, `vfs.azure.storage_account_name=...`)
    /// or object_store's keys (`aws_endpoint=...`). Paths may be URIs:
    /// s3://, az://, abfs(s)://, gs://, http(s)://, file://; the environment
    /// (AWS_*, AZURE_*, GOOGLE_*) applies first.
    #[arg(long = "config", global = true, value_name = "KEY=VALUE")]
    config: Vec<String>,
}

/// The storage settings of this run (`--config`), set once at start.
static CONFIG: std::sync::OnceLock<tdb::StorageConfig> = std::sync::OnceLock::new();

fn config() -> &'static tdb::StorageConfig {
    CONFIG.get_or_init(tdb::StorageConfig::new)
}

/// The object (array or group) `path` is, or holds the file `path` is:
/// the nearest directory above it that is one, and the file's path there.
fn object_of(path: &std::path::Path) -> Result<(PathBuf, Option<String>), CliError> {
    let mut dir = path.to_path_buf();
    let mut rel: Vec<String> = Vec::new();
    loop {
        let s = storage(&dir)?;
        if matches!(tdb_fragment::object_kind(&s, ""), Ok(Some(_))) {
            let file = (!rel.is_empty()).then(|| {
                rel.reverse();
                rel.join("/")
            });
            return Ok((dir, file));
        }
        let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
            return Err(CliError::Usage(format!(
                "{} is not in a TileDB array or group (no directory above it holds \
                 __schema, __array_schema.tdb or __group)",
                path.display()
            )));
        };
        rel.push(name.to_string_lossy().into_owned());
        dir = parent.to_path_buf();
        if dir.as_os_str().is_empty() {
            dir = PathBuf::from(".");
        }
    }
}

/// The storage at a local path or URI, with this run's settings.
fn storage(path: &std::path::Path) -> Result<tdb::AnyStorage, CliError> {
    Ok(tdb::storage(path, config())?)
}

#[derive(Subcommand)]
enum Command {
    /// Show what tdb can see of an array or group directory: every file
    /// classified with its generic tile headers; for arrays the fragments a
    /// read sees, vacuum candidates, delete commits and metadata; for groups
    /// members and metadata.
    ///
    /// Example: tdb inspect --at 2 testdata/arrays/consolidated_before_vacuum/array
    Inspect {
        /// The array or group directory.
        path: PathBuf,
        #[command(flatten)]
        report: ReportFormat,
        /// Open at this time: `T` (everything written by T) or `T1..T2`
        /// (ms since the epoch, inclusive); default: now.
        #[arg(long)]
        at: Option<String>,
        /// The AES-256-GCM key of an encrypted array, exactly as TileDB's
        /// `sm.encryption_key` takes it: 32 bytes.
        #[arg(long)]
        key: Option<String>,
    },
    /// Draw an array's fragments: each one's non-empty domain and tiles
    /// over two dimensions (or bars over one), coloured by timestamp, the
    /// fragments the next consolidation merges (TileDB's default settings)
    /// dashed, vacuum leftovers grey. SVG on stdout, or to --out.
    ///
    /// Example: tdb plot my_array --dims rows,cols --out fragments.png
    Plot {
        /// The array directory or URI.
        path: PathBuf,
        /// Write here: `.svg` or `.png` (rendered by resvg); default: SVG
        /// on stdout.
        #[arg(long)]
        out: Option<PathBuf>,
        /// The dimensions to draw, comma-separated: one (bars) or two
        /// (the first down, the second across); default: the first two.
        #[arg(long, value_delimiter = ',')]
        dims: Option<Vec<String>>,
        /// Open at this time: `T` or `T1..T2` (ms since the epoch).
        #[arg(long)]
        at: Option<String>,
        /// The AES-256-GCM key of an encrypted array (32 bytes).
        #[arg(long)]
        key: Option<String>,
        /// Width of the plot area in pixels (a legend is added beside it).
        #[arg(long, default_value_t = 800)]
        width: u32,
        /// Height in pixels (bars: as tall as the fragments need).
        #[arg(long, default_value_t = 600)]
        height: u32,
    },
    /// Explain every byte of a file, or of every file of an array or group:
    /// each field's offset, length, type, path and value, as the parsers
    /// that read it found it; generic tiles' decoded contents beneath their
    /// headers; bytes no field explains listed last.
    ///
    /// Example: tdb dissect my_array/__schema/__1_1_0123456789abcdef0123456789abcdef --format json
    Dissect {
        /// A file of an array or group, or the array or group itself.
        path: PathBuf,
        #[command(flatten)]
        report: ReportFormat,
        /// The AES-256-GCM key of an encrypted array (32 bytes).
        #[arg(long)]
        key: Option<String>,
    },
    /// Check an array from end to end: every file the format knows, every
    /// fragment committed, every commit with its fragment, every tile
    /// readable and agreeing with its metadata. Prints each problem with its
    /// file (and tile); exits 0 only when the array is clean.
    ///
    /// Example: tdb verify my_array && echo clean
    Verify {
        /// The array directory.
        path: PathBuf,
        #[command(flatten)]
        report: ReportFormat,
        /// The AES-256-GCM key of an encrypted array (32 bytes).
        #[arg(long)]
        key: Option<String>,
    },
    /// Read cells and print them as JSON (the conformance format's result
    /// shape, on one line) or CSV (a header row, then one row per cell,
    /// printed batch by batch; multi-value cells are their values joined by
    /// spaces, null cells are empty, blobs base64).
    ///
    /// Example: tdb export my_array --subarray '1:4;*' --fields a,b --format csv > cells.csv
    Export {
        /// The array directory.
        path: PathBuf,
        #[command(flatten)]
        read: ReadArgs,
        /// Result order: row-major, col-major, global-order or unordered.
        #[arg(long, default_value = "row-major")]
        layout: String,
        /// Fields to print, comma-separated; default: every dimension, then
        /// every attribute.
        #[arg(long)]
        fields: Option<String>,
        /// Output format: json, csv, arrow (an Arrow IPC file of record
        /// batches, tdb-arrow's types) or parquet (the same batches in a
        /// Parquet file, ZSTD-compressed).
        #[arg(long, default_value = "json")]
        format: String,
    },
    /// Aggregate an array's cells as TileDB does: prints
    /// `{field: {op: value}}` as JSON (`null` where the answer is
    /// undefined, e.g. the min of no cell).
    ///
    /// Example: tdb aggregate my_array --agg a:sum,mean --condition 'a > 0'
    Aggregate {
        /// The array directory.
        path: PathBuf,
        /// What to compute: `FIELD:OP[,OP...]`, ops among count, sum, min,
        /// max, mean, null_count; repeat for more fields.
        /// Example: --agg a:sum,mean --agg n:null_count
        #[arg(long = "agg", required = true, verbatim_doc_comment)]
        aggs: Vec<String>,
        #[command(flatten)]
        read: ReadArgs,
        /// The read's order: row-major, col-major, global-order or
        /// unordered; default TileDB-Py's (unordered for a sparse array,
        /// row-major for a dense one). It decides which tiles TileDB
        /// answers from their metadata, which holds the values as written
        /// (before a lossy filter such as FLOAT_SCALE).
        #[arg(long)]
        layout: Option<String>,
        /// json (`{field: {op: value}}`, the default), table or csv (a row
        /// per field and op).
        #[arg(long, default_value = "json")]
        format: String,
    },
    /// Copy an array into a new one at the current format version (v22),
    /// fragment by fragment with the same timestamps, keeping schemas,
    /// array metadata and deletes, so every read (time travel included)
    /// answers the same. Also upgrades old arrays and re-encrypts. A group
    /// is copied with its metadata and member history, and the member
    /// arrays and groups stored inside it. The copy keeps SRC's encryption
    /// unless --to-key or --decrypt says otherwise.
    ///
    /// Example: tdb copy old_array s3://bucket/new_array --to-key 0123456789abcdeF0123456789abcdeF
    Copy {
        /// The array or group to copy.
        src: PathBuf,
        /// Where the copy goes (must not hold an array or group).
        dst: PathBuf,
        /// The AES-256-GCM key of an encrypted SRC (32 bytes); the copy is
        /// encrypted with it too.
        #[arg(long)]
        key: Option<String>,
        /// Encrypt the copy with this key (32 bytes) instead.
        #[arg(long, conflicts_with = "decrypt")]
        to_key: Option<String>,
        /// Write the copy of an encrypted SRC unencrypted.
        #[arg(long)]
        decrypt: bool,
    },
    /// Print an array's metadata as JSON (`[{key, datatype, value_num,
    /// value}]`, TileDB's order), or change it: each change is one
    /// metadata file, committed whole.
    ///
    /// Example: tdb metadata my_array set unit '"meters"'
    Metadata {
        /// The array directory.
        path: PathBuf,
        #[command(subcommand)]
        action: Option<MetadataAction>,
        /// Read as of this timestamp `T` (ms since the epoch); changes are
        /// stamped with it. Default: now.
        #[arg(long, global = true)]
        at: Option<u64>,
        /// The AES-256-GCM key of an encrypted array (32 bytes).
        #[arg(long, global = true)]
        key: Option<String>,
    },
    /// Delete the cells where a TileDB-Py QueryCondition holds, as TileDB's
    /// delete queries do (sparse arrays): reads from now on (or from
    /// `--at`) no longer see them; older reads still do.
    ///
    /// Example: tdb delete my_array --condition 'a < 0'
    Delete {
        /// The array directory.
        path: PathBuf,
        /// The cells to delete, e.g. "a < 0 or s == 'x'".
        #[arg(long)]
        condition: String,
        /// Stamp the delete with this timestamp (ms since the epoch).
        #[arg(long)]
        at: Option<u64>,
        /// The AES-256-GCM key of an encrypted array (32 bytes).
        #[arg(long)]
        key: Option<String>,
    },
    /// Consolidate an array as TileDB does. `--mode commits`: every commit
    /// into one `.con` file (deletes embedded); `--mode array_meta`: the
    /// array metadata files the window sees into one file spanning their
    /// timestamps, and a vacuum list naming them; `--mode fragment_meta`:
    /// the footers of the fragments the window sees into one `.meta` file;
    /// `--mode group_meta` (PATH a group): its metadata files into one, the
    /// vacuum list naming them by absolute URI as TileDB's.
    /// `--mode fragments` (the default): fragments of the window chosen by
    /// TileDB's rule (or `--fragments`) into one, sparse ones keeping every
    /// cell's timestamp, dense ones merged over whole tiles. Readers see
    /// the same array.
    ///
    /// Example: tdb consolidate my_array --step-max-frags 8 && tdb vacuum my_array
    Consolidate {
        /// The array directory (a group's with `--mode group_meta`).
        path: PathBuf,
        /// fragments, commits, fragment_meta, array_meta or group_meta.
        #[arg(long, default_value = "fragments")]
        mode: String,
        /// The window to consolidate: `T` (up to T) or `T1..T2`
        /// (ms since the epoch); default: everything.
        #[arg(long)]
        at: Option<String>,
        /// The AES-256-GCM key of an encrypted array (32 bytes).
        #[arg(long)]
        key: Option<String>,
        /// Memory for merging fragments, in bytes (default 1 GiB): a larger
        /// array takes more batches, not more memory.
        #[arg(long)]
        budget: Option<u64>,
        /// Fragments: consolidation steps at most (TileDB's
        /// `sm.consolidation.steps`; default: until one run is left).
        #[arg(long)]
        steps: Option<u32>,
        /// Fragments: fewest fragments a step merges (`step_min_frags`).
        #[arg(long)]
        step_min_frags: Option<u32>,
        /// Fragments: most fragments a step merges (`step_max_frags`).
        #[arg(long)]
        step_max_frags: Option<u32>,
        /// Fragments: smallest size ratio of adjacent fragments a step
        /// merges, in [0, 1] (`step_size_ratio`; default 0).
        #[arg(long)]
        step_size_ratio: Option<f32>,
        /// Fragments: the most cells a dense merge may write per cell its
        /// inputs hold (`amplification`; default 1).
        #[arg(long)]
        amplification: Option<f32>,
        /// Fragments: drop the cells delete commits removed instead of
        /// keeping them with when they were deleted (`purge_deleted_cells`;
        /// reads before the delete no longer see them).
        #[arg(long)]
        purge_deleted_cells: bool,
        /// Fragments: write the merge as several fragments of at most this
        /// many bytes of filtered tiles each, as TileDB's
        /// `max_fragment_size` (dense ones rectangles of whole tiles; a
        /// split dense merge ends the consolidation; default: one
        /// fragment).
        #[arg(long)]
        max_fragment_size: Option<u64>,
        /// Fragments: merge exactly these fragments (names, comma-separated)
        /// instead of choosing.
        #[arg(long, value_delimiter = ',')]
        fragments: Vec<String>,
    },
    /// Remove what consolidation replaced, as TileDB's vacuum does (`--mode
    /// fragments`: the replaced fragments' commits and directories, then the
    /// vacuum lists; `--mode commits`: the commit files `.con` files list, then redundant `.con`
    /// and `.ign` files; `--mode array_meta`: the metadata files vacuum
    /// lists name, then the lists; `--mode fragment_meta`: every `.meta`
    /// file but the latest; `--mode group_meta`: a group's metadata files
    /// its vacuum lists name, then the lists).
    ///
    /// Example: tdb vacuum my_array --mode commits
    Vacuum {
        /// The array directory (a group's with `--mode group_meta`).
        path: PathBuf,
        /// fragments, commits, fragment_meta, array_meta or group_meta.
        #[arg(long, default_value = "fragments")]
        mode: String,
        /// The AES-256-GCM key of an encrypted array (32 bytes).
        #[arg(long)]
        key: Option<String>,
        /// Also remove fragment directories no commit makes visible (writes
        /// that stopped before committing: `tdb verify` reports them) whose
        /// names end more than SECONDS ago (younger ones may be writes
        /// still in progress), and files a killed write left in progress
        /// unchanged that long. With `--mode fragments`, or with `--mode
        /// group_meta` for what killed writes left in a group's directory.
        #[arg(long, value_name = "SECONDS")]
        uncommitted_older_than: Option<u64>,
    },
    /// Create an empty array from a JSON schema: the summary `tdb schema
    /// --json` prints (keys left out take TileDB's defaults), or a
    /// conformance case's expected.json. Written at format v22.
    ///
    /// Example: tdb schema other_array --json > schema.json && tdb create new_array --schema schema.json
    Create {
        /// Where the array goes (must not hold an array or group).
        path: PathBuf,
        /// The schema file.
        #[arg(long)]
        schema: PathBuf,
        /// Encrypt the array with this AES-256-GCM key (32 bytes).
        #[arg(long)]
        key: Option<String>,
    },
    /// Write cells from a file into an array as one new fragment: CSV or
    /// JSON as `tdb export` prints them (CSV: a header row of field names,
    /// one row per cell; an empty field of a nullable attribute is null).
    /// Sparse arrays take cells in any order; dense arrays take cells that
    /// cover a box of coordinates, each once.
    ///
    /// Example: tdb import new_array cells.csv
    Import {
        /// The array directory.
        path: PathBuf,
        /// The cells: FILE.csv, FILE.json, FILE.arrow (an Arrow IPC file) or
        /// FILE.parquet, columns named as the array's fields.
        file: PathBuf,
        /// The input format; default: from FILE's extension.
        #[arg(long)]
        format: Option<String>,
        /// Stamp the fragment with this timestamp (ms since the epoch).
        #[arg(long)]
        at: Option<u64>,
        /// The AES-256-GCM key of an encrypted array (32 bytes).
        #[arg(long)]
        key: Option<String>,
    },
    /// tdb end to end: create a dense and a sparse array under DIR from
    /// generated data (a few million cells each), print their schemas,
    /// read slices back (each checked against the data) with timings.
    ///
    /// Example: tdb demo /tmp/tdb-demo
    Demo {
        /// Where the two arrays go (DIR/dense, DIR/sparse; must not exist).
        dir: PathBuf,
        /// About this many cells per array.
        #[arg(long, default_value_t = 4_000_000)]
        cells: u64,
    },
    /// Run SQL over arrays (DataFusion): each `--table NAME=URI` is a
    /// table whose columns are the array's dimensions, then attributes (a
    /// dense array's rows: the cells of its non-empty domain). Filters on
    /// dimensions and attributes, projections and limits go into the reads.
    ///
    /// Example: tdb sql "SELECT x, sum(a) FROM t WHERE x < 10 GROUP BY x" --table t=my_array
    #[cfg(feature = "sql")]
    Sql {
        /// The query.
        query: String,
        /// A table: `NAME=URI` (a path or URI), repeatable.
        #[arg(long = "table", value_name = "NAME=URI", required = true)]
        tables: Vec<String>,
        /// Open every table as it was at this time (ms since the epoch).
        #[arg(long)]
        at: Option<u64>,
        /// The AES-256-GCM key of the arrays (32 bytes).
        #[arg(long)]
        key: Option<String>,
        /// Output: table, csv, or json (one array of row objects).
        #[arg(long, default_value = "table")]
        format: String,
        /// Run the query on the cluster whose scheduler is at HOST:PORT
        /// (`tdb cluster`): scans and inserts run on its executors, which
        /// read and write the arrays' storage themselves.
        #[cfg(feature = "cluster")]
        #[arg(long, value_name = "HOST:PORT")]
        cluster: Option<String>,
    },
    /// Run a process of a cluster (Ballista) that runs `tdb sql
    /// --cluster` queries: the scheduler, or one of its executors. Each
    /// executor reads and writes the arrays of its tasks in their storage.
    ///
    /// Example: tdb cluster scheduler --bind 0.0.0.0:50050
    #[cfg(feature = "cluster")]
    Cluster {
        #[command(subcommand)]
        role: ClusterRole,
    },
    /// Print an array's schema: a readable dump, or the conformance JSON
    /// summary.
    ///
    /// Example: tdb schema my_array --json
    Schema {
        /// The array directory.
        path: PathBuf,
        #[command(flatten)]
        report: ReportFormat,
        /// The schema a read opened at this timestamp (ms since the epoch)
        /// uses: the last one written by then, else the first; default: the
        /// latest.
        #[arg(long)]
        at: Option<u64>,
        /// The AES-256-GCM key of an encrypted array, exactly as TileDB's
        /// `sm.encryption_key` takes it: 32 bytes.
        #[arg(long)]
        key: Option<String>,
    },
    /// Print a shell's completion script for tdb.
    ///
    /// Example: tdb completions bash > /etc/bash_completion.d/tdb
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

/// A process of a cluster.
#[cfg(feature = "cluster")]
#[derive(Subcommand)]
enum ClusterRole {
    /// The scheduler: plans queries and hands their tasks to executors.
    /// Prints `listening on ADDR` once it listens.
    Scheduler {
        /// HOST:PORT to listen on (port 0: any free one).
        #[arg(long, default_value = "127.0.0.1:50050")]
        bind: String,
        /// Seconds without word from an executor after which it is lost
        /// and its tasks run again on the others.
        #[arg(long, default_value_t = 180)]
        executor_timeout: u64,
    },
    /// An executor: runs the tasks its scheduler launches.
    Executor {
        /// The scheduler's HOST:PORT.
        #[arg(long, default_value = "127.0.0.1:50050")]
        scheduler: String,
        /// The address to listen on (an IP address).
        #[arg(long, default_value = "127.0.0.1")]
        bind: String,
        /// The port results are fetched from (Arrow Flight; 0: a free one).
        #[arg(long, default_value_t = 50051)]
        port: u16,
        /// The port the scheduler launches tasks on (0: a free one).
        #[arg(long, default_value_t = 50052)]
        grpc_port: u16,
        /// Where shuffled rows go (default: a directory under the
        /// system's temporary one).
        #[arg(long)]
        work_dir: Option<PathBuf>,
        /// Tasks run at once (0: one a core).
        #[arg(long, default_value_t = 0)]
        tasks: usize,
        /// Seconds between the heartbeats it sends the scheduler.
        #[arg(long, default_value_t = 60)]
        heartbeat: u64,
    },
}

/// A change to array metadata.
#[derive(Subcommand)]
enum MetadataAction {
    /// Print one key's entry (or every entry without KEY).
    Get {
        /// The key.
        name: Option<String>,
        /// json (the default: the conformance format's entries), table or
        /// csv (key, datatype, value count, value).
        #[arg(long, default_value = "json")]
        format: String,
    },
    /// Set KEY to VALUE: JSON (a number, a list of numbers, a string,
    /// `{"b64": ...}`) or plain text; stored as --type, or as TileDB-Py
    /// stores it (INT64, FLOAT64 or STRING_UTF8).
    Set {
        /// The key.
        name: String,
        /// The value.
        value: String,
        /// A TileDB datatype name, e.g. INT32, FLOAT32, BLOB.
        #[arg(long = "type")]
        datatype: Option<String>,
    },
    /// Remove KEY.
    Delete {
        /// The key.
        name: String,
    },
}

/// `println!` to stdout that fails with [`CliError`] where `println!`
/// panics (stdout closed: `tdb export ... | head`).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*).map_err(CliError::output)?
    }};
}

/// `print!` as [`outln!`] does it.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*).map_err(CliError::output)?
    }};
}

/// Progress bars on stderr (drawn only when it is a terminal, never with
/// `--quiet`).
mod progress {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    static QUIET: AtomicBool = AtomicBool::new(false);

    /// `--quiet`: no bar from now on.
    pub fn quiet() {
        QUIET.store(true, Ordering::Relaxed);
    }

    fn new(total: Option<u64>, what: &'static str) -> ProgressBar {
        let bar = match total {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::new_spinner(),
        };
        if QUIET.load(Ordering::Relaxed) {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        bar.with_message(what)
    }

    /// A bar over `total` bytes.
    pub fn bytes(total: u64, what: &'static str) -> ProgressBar {
        let bar = new(Some(total), what);
        if let Ok(style) = ProgressStyle::with_template(
            "{msg:>8} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    }

    /// A bar over `total` cells.
    pub fn cells(total: u64, what: &'static str) -> ProgressBar {
        let bar = new(Some(total), what);
        if let Ok(style) =
            ProgressStyle::with_template("{msg} [{bar:30}] {human_pos}/{human_len} cells ({eta})")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    }

    /// A spinner for work of unknown length.
    pub fn spinner(what: &'static str) -> ProgressBar {
        let bar = new(None, what);
        // Drawn at once: a terminal shows what runs, however short.
        bar.tick();
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }
}

/// The consolidation modes TileDB knows.
fn known_mode(mode: &str) -> Result<(), CliError> {
    match mode {
        "fragments" | "array_meta" | "commits" | "fragment_meta" | "group_meta" => Ok(()),
        other => Err(CliError::Usage(format!(
            "--mode takes fragments, commits, fragment_meta, array_meta or group_meta, not {other:?}"
        ))),
    }
}

/// Opens an array for a change: at `at` if given, with `key`.
fn open_for_change(
    path: &std::path::Path,
    at: Option<u64>,
    key: Option<&str>,
) -> Result<tdb::Array, CliError> {
    let mut options = open_options(None, key)?;
    if let Some(t) = at {
        options = options.at(t);
    }
    Ok(tdb::Array::open_with(path, options)?)
}

/// Open options from `--at` (`T` or `T1..T2`) and `--key`.
fn open_options(at: Option<&str>, key: Option<&str>) -> Result<tdb::OpenOptions, CliError> {
    let mut options = tdb::OpenOptions::new().storage_config(config().clone());
    if at.is_some() {
        let w = window(at)?;
        options = options.between(w.start, w.end);
    }
    if let Some(k) = key_bytes(key)? {
        options = options.key(&k)?;
    }
    Ok(options)
}

/// `--format table|json` of a command that prints a report, and `--json`,
/// its older spelling.
#[derive(clap::Args)]
struct ReportFormat {
    /// table (the readable report, the default) or json; dissect also
    /// takes csv (a row per field).
    #[arg(long, default_value = "table")]
    format: String,
    /// The same as `--format json`.
    #[arg(long)]
    json: bool,
}

impl ReportFormat {
    fn json(&self) -> Result<bool, CliError> {
        Ok(self.pick(&[Table, Json])? == Json)
    }

    /// The format asked for, among those the command takes.
    fn pick(&self, allowed: &[OutputFormat]) -> Result<OutputFormat, CliError> {
        if self.json {
            return Ok(Json);
        }
        OutputFormat::parse(&self.format, allowed)
    }
}

/// Which cells a read or an aggregate sees.
#[derive(clap::Args)]
struct ReadArgs {
    /// Cells to read: per dimension (schema order) separated by `;`,
    /// `*` or empty for the whole dimension, else ranges separated by
    /// `,`, each `lo:hi` (inclusive) or one value; dimensions left out
    /// are whole. String bounds are the text as is (no `:`, `,`, `;`).
    /// Example: "1:4,7;*;apple:kiwi".
    #[arg(long, verbatim_doc_comment)]
    subarray: Option<String>,
    /// Cells whose dimension label NAME lies in RANGES (as one --subarray
    /// entry: `lo:hi` or one value, separated by `,`), as TileDB's label
    /// ranges; repeatable, one label per dimension, on dimensions
    /// --subarray leaves whole. Example: --label 'time=0.5:2.5'.
    #[arg(long = "label", value_name = "NAME=RANGES")]
    labels: Vec<String>,
    /// Open at this time: `T` (everything written by T) or `T1..T2`
    /// (ms since the epoch, inclusive); default: now.
    #[arg(long)]
    at: Option<String>,
    /// Keep cells where this TileDB-Py QueryCondition holds, e.g.
    /// "a > 5 and s == 'x'" (dense reads return fill values for others).
    #[arg(long)]
    condition: Option<String>,
    /// The AES-256-GCM key of an encrypted array (32 bytes).
    #[arg(long)]
    key: Option<String>,
    /// Memory budget of the read in bytes (tiles and one batch of
    /// results at a time).
    #[arg(long)]
    budget: Option<u64>,
}

impl ReadArgs {
    /// Opens the array at `path` as these options say, and the read over
    /// `fields`.
    fn open(
        &self,
        path: &std::path::Path,
        fields: Option<&str>,
    ) -> Result<(tdb::Array, tdb::ReadSpec), CliError> {
        let options = open_options(self.at.as_deref(), self.key.as_deref())?;
        let array = tdb::Array::open_with(path, options)?;
        let schema = array.schema();
        let fields = match fields {
            Some(f) => tdb_cli::export::parse_fields(schema, f)?,
            None => tdb_cli::export::default_fields(schema),
        };
        let mut spec = tdb::ReadSpec::new(fields);
        if let Some(s) = &self.subarray {
            spec = spec.with_subarray(tdb_cli::export::parse_subarray(schema, s)?);
        }
        for l in &self.labels {
            let (name, ranges) = tdb_cli::export::parse_label(schema, l)?;
            for r in ranges {
                spec.subarray.add_label_range(&name, r);
            }
        }
        if let Some(c) = &self.condition {
            spec = spec.with_condition(c.clone());
        }
        if let Some(b) = self.budget {
            spec = spec.with_budget(b);
        }
        Ok((array, spec))
    }
}

fn key_bytes(key: Option<&str>) -> Result<Option<[u8; 32]>, CliError> {
    key.map(|k| {
        k.as_bytes().try_into().map_err(|_| {
            CliError::Usage(format!(
                "--key must be 32 bytes (TileDB's AES-256 key), not {}",
                k.len()
            ))
        })
    })
    .transpose()
}

/// A `--layout` value.
fn parse_layout(name: &str) -> Result<tdb::ResultLayout, CliError> {
    tdb::ResultLayout::from_name(name).ok_or_else(|| {
        CliError::Usage(format!(
            "--layout takes row-major, col-major, global-order or unordered, not {name:?}"
        ))
    })
}

/// Prints `v` as pretty JSON on stdout.
fn print_json(v: &impl serde::Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(v).map_err(|e| CliError::Output(e.to_string()))?;
    outln!("{text}");
    Ok(())
}

/// `T` (everything written by T) or `T1..T2`.
fn window(at: Option<&str>) -> Result<TimeWindow, CliError> {
    let Some(at) = at else {
        return Ok(TimeWindow::ALL);
    };
    let number = |s: &str| {
        s.trim().parse::<u64>().map_err(|_| {
            CliError::Usage(format!(
                "--at takes T or T1..T2 (ms since the epoch), not {at:?}"
            ))
        })
    };
    match at.split_once("..") {
        Some((t1, t2)) => {
            let (t1, t2) = (number(t1)?, number(t2)?);
            if t1 > t2 {
                return Err(CliError::Usage(format!(
                    "--at {at}: the window ends before it starts"
                )));
            }
            Ok(TimeWindow::new(t1, t2))
        }
        None => Ok(TimeWindow::until(number(at)?)),
    }
}

/// Runs a command; `Ok(false)` when it worked but found the object unclean.
fn run(cli: Cli) -> Result<bool, CliError> {
    if cli.quiet {
        progress::quiet();
    }
    if std::env::var_os("RUST_LOG").is_some() {
        // Logs go to stderr, beside the bars; stdout stays the output.
        use std::io::IsTerminal as _;
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .try_init();
    }
    let mut settings = tdb::StorageConfig::new();
    for pair in &cli.config {
        settings = settings.parse_pair(pair).map_err(tdb::Error::Storage)?;
    }
    let _ = CONFIG.set(settings);
    match cli.command {
        Command::Verify { path, report, key } => {
            let json = report.json()?;
            let key = key_bytes(key.as_deref())?;
            let storage = storage(&path)?;
            let mut problems = Vec::new();
            let bar = progress::spinner("verifying");
            let summary = tdb_fragment::verify_array(&storage, "", key.as_ref(), &mut |p| {
                if !json {
                    // A closed stdout stops the command at its summary.
                    use std::io::Write as _;
                    bar.suspend(|| {
                        let _ = writeln!(std::io::stdout().lock(), "{p}");
                    });
                }
                problems.push(p);
            });
            bar.finish_and_clear();
            let summary = summary?;
            if json {
                print_json(&tdb_cli::verify::json(&summary, &problems))?;
            } else {
                outln!(
                    "{}: {} files, {} fragments, {} tiles, {} bytes read: {}",
                    path.display(),
                    summary.files,
                    summary.fragments,
                    summary.tiles,
                    summary.bytes_read,
                    match summary.problems {
                        0 => "clean".to_owned(),
                        1 => "1 problem".to_owned(),
                        n => format!("{n} problems"),
                    }
                );
            }
            Ok(summary.problems == 0)
        }
        Command::Dissect { path, report, key } => {
            let format = report.pick(&[Table, Json, Csv])?;
            let json = format == Json;
            let key = key_bytes(key.as_deref())?;
            let (root, file) = object_of(&path)?;
            let storage = storage(&root)?;
            let whole = file.is_none();
            if json && whole {
                outln!("[");
            }
            if format == Csv {
                out!(
                    "{}",
                    Csv.rows(&[tdb_cli::dissect::CSV_HEADER.map(String::from).to_vec()])
                );
            }
            let mut first = true;
            let mut failed: Option<CliError> = None;
            let mut print = |d: tdb_fragment::Dissection| {
                if failed.is_some() {
                    return;
                }
                let shown: Result<(), CliError> = (|| {
                    if json {
                        let text = serde_json::to_string_pretty(&tdb_cli::dissect::json(&d))
                            .map_err(|e| CliError::Output(e.to_string()))?;
                        let sep = if whole && !first { "," } else { "" };
                        outln!("{sep}{text}");
                    } else if format == Csv {
                        out!("{}", Csv.rows(&tdb_cli::dissect::csv_rows(&d)));
                    } else {
                        out!("{}", tdb_cli::dissect::text(&d));
                    }
                    Ok(())
                })();
                first = false;
                failed = shown.err();
            };
            tdb_fragment::dissect(&storage, "", key.as_ref(), file.as_deref(), &mut print)?;
            if let Some(e) = failed {
                return Err(e);
            }
            if json && whole {
                outln!("]");
            }
            Ok(true)
        }
        Command::Completions { shell } => {
            use clap::CommandFactory as _;
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "tdb", &mut buf);
            use std::io::Write as _;
            std::io::stdout()
                .lock()
                .write_all(&buf)
                .map_err(CliError::output)?;
            Ok(true)
        }
        Command::Plot {
            path,
            out,
            dims,
            at,
            key,
            width,
            height,
        } => {
            let options = open_options(at.as_deref(), key.as_deref())?;
            let candidates = tdb::Array::open_with(&path, options)?
                .consolidation_candidates(&tdb::FragmentSelection::default())?;
            let key = key_bytes(key.as_deref())?;
            let storage = storage(&path)?;
            let mut plot = tdb_cli::plot::Plot::load(
                &storage,
                "",
                window(at.as_deref())?,
                key.as_ref(),
                dims.as_deref(),
                &candidates,
            )?;
            plot.title = path.display().to_string();
            let svg = plot.svg(width.max(200), height.max(150));
            match out {
                None => out!("{svg}"),
                Some(file) => {
                    let png = file
                        .extension()
                        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
                    let bytes = if png {
                        tdb_cli::plot::png(&svg)?
                    } else {
                        svg.into_bytes()
                    };
                    std::fs::write(&file, bytes)
                        .map_err(|e| CliError::Output(format!("{}: {e}", file.display())))?;
                }
            }
            Ok(true)
        }
        Command::Inspect {
            path,
            report,
            at,
            key,
        } => {
            let json = report.json()?;
            let key = key_bytes(key.as_deref())?;
            let window = window(at.as_deref())?;
            let storage = storage(&path)?;
            let report =
                inspect::inspect(&storage, "", window, key.as_ref()).map_err(|e| match e {
                    CliError::NotAnObject(_) => CliError::NotAnObject(path.display().to_string()),
                    other => other,
                })?;
            if json {
                print_json(&report)?;
            } else {
                out!("{report}");
            }
            Ok(true)
        }
        Command::Export {
            path,
            read,
            layout,
            fields,
            format,
        } => {
            let format = tdb_cli::export::Format::from_name(&format)?;
            let layout = parse_layout(&layout)?;
            let (array, mut spec) = read.open(&path, fields.as_deref())?;
            // Unlocked (a Parquet writer needs a `Send` sink): buffered, the
            // lock is taken once per flush.
            let mut out = std::io::BufWriter::new(std::io::stdout());
            let schema = array.schema();
            // A dense read with no subarray covers the whole domain, fill
            // values included (TileDB's rule), which can be billions of
            // cells around the few written: export reads what was written.
            let mut total = None;
            if schema.array_type == tdb_format::ArrayType::Dense && read.subarray.is_none() {
                let whole: Option<Vec<tdb::Range>> = schema
                    .domain
                    .dimensions
                    .iter()
                    .map(|d| {
                        d.bounds()
                            .map(|(lo, hi)| tdb::Range::from_bounds(lo, hi, false))
                    })
                    .collect();
                let count = |nd: &Vec<tdb::Range>| tdb_index::dense::cell_count(&schema.domain, nd);
                let whole = whole.and_then(|w| count(&w));
                let Some(ned) = array.non_empty_domain()? else {
                    eprintln!(
                        "tdb: nothing was written to this array: no cells (--subarray '*' reads \
                         the whole domain's fill values)"
                    );
                    tdb_cli::export::export_nothing(&array, &spec.fields, format, &mut out)?;
                    return Ok(true);
                };
                let cells = count(&ned);
                if cells != whole {
                    eprintln!(
                        "tdb: reading the non-empty domain ({} cells of the domain's {}); \
                         --subarray '*' reads the whole domain, fill values included",
                        cells.map_or("?".to_owned(), |c| c.to_string()),
                        whole.map_or("?".to_owned(), |c| c.to_string()),
                    );
                }
                if let Some(sub) = array.non_empty_subarray()? {
                    // Dimensions with label ranges keep them alone.
                    let labelled: Vec<usize> = (spec.subarray.label_ranges().iter())
                        .filter_map(|(l, _)| {
                            let l = schema.dimension_labels.iter().find(|d| &d.name == l)?;
                            Some(l.dimension as usize)
                        })
                        .collect();
                    let mut ranges = tdb::Subarray::new(sub.dim_num());
                    for d in (0..sub.dim_num()).filter(|d| !labelled.contains(d)) {
                        for r in sub.ranges(d) {
                            ranges.add_range(d, r.clone());
                        }
                    }
                    for (l, rs) in spec.subarray.label_ranges() {
                        for r in rs {
                            ranges.add_label_range(l, r.clone());
                        }
                    }
                    spec = spec.with_subarray(ranges);
                }
                // (Label ranges narrow the read: its size is known later.)
                total = if spec.subarray.label_ranges().is_empty() {
                    cells
                } else {
                    None
                };
            }
            let bar = match total {
                Some(n) => progress::cells(n, "export"),
                None => progress::spinner("export"),
            };
            let mut advance = |n: u64| bar.inc(n);
            tdb_cli::export::export(
                &array,
                spec.with_layout(layout),
                format,
                &mut out,
                &mut advance,
            )?;
            bar.finish_and_clear();
            Ok(true)
        }
        Command::Aggregate {
            path,
            aggs,
            read,
            layout,
            format,
        } => {
            let format = OutputFormat::parse(&format, &[Json, Table, Csv])?;
            let (array, spec) = read.open(&path, None)?;
            let layout = match layout {
                Some(name) => parse_layout(&name)?,
                None if array.schema().array_type == tdb::ArrayType::Sparse => {
                    tdb::ResultLayout::Unordered
                }
                None => tdb::ResultLayout::RowMajor,
            };
            let spec = spec.with_layout(layout);
            let requests = tdb_cli::export::parse_aggregates(array.schema(), &aggs)?;
            let results = array.aggregate(spec, &requests)?;
            let answer = tdb_cli::export::aggregates_json(array.schema(), &results);
            match format {
                Json => print_json(&answer)?,
                Table | Csv => out!("{}", tdb_cli::export::aggregates_rows(&answer, format)),
            }
            Ok(true)
        }
        Command::Copy {
            src,
            dst,
            key,
            to_key,
            decrypt,
        } => {
            let options = open_options(None, key.as_deref())?;
            // A copy keeps its source's encryption unless asked otherwise.
            let to_key = match (to_key, decrypt) {
                (Some(k), _) => key_bytes(Some(&k))?,
                (None, true) => None,
                (None, false) => key_bytes(key.as_deref())?,
            };
            let encryption = if to_key.is_some() {
                "encrypted"
            } else {
                "unencrypted"
            };
            let from = storage(&src)?;
            if tdb_fragment::object_kind(&from, "")? == Some(tdb_fragment::ObjectKind::Group) {
                let group = tdb::Group::open_in(from, "", options)?;
                let bar = progress::spinner("copying");
                let s = tdb::copy_group(&group, &storage(&dst)?, "", to_key.as_ref());
                bar.finish_and_clear();
                let s = s?;
                outln!(
                    "{} -> {}: {} member arrays, {} subgroups, {} member commits, {} metadata \
                     files; {encryption}",
                    src.display(),
                    dst.display(),
                    s.arrays.len(),
                    s.groups.len(),
                    s.details_files,
                    s.metadata_files
                );
                return Ok(true);
            }
            let array = tdb::Array::open_with(&src, options)?;
            let bar = progress::spinner("copying");
            let summary = tdb::copy(&array, &storage(&dst)?, "", to_key.as_ref());
            bar.finish_and_clear();
            let summary = summary?;
            let cells: u64 = summary.fragments.iter().map(|(_, c)| c).sum();
            outln!(
                "{} -> {}: {} schemas, {} fragments ({cells} cells), {} metadata files, {} deletes, \
                 {} vacuum lists; {encryption}",
                src.display(),
                dst.display(),
                summary.schemas,
                summary.fragments.len(),
                summary.metadata_files,
                summary.deletes,
                summary.vacuum_lists
            );
            Ok(true)
        }
        Command::Metadata {
            path,
            action,
            at,
            key,
        } => {
            let array = open_for_change(&path, at, key.as_deref())?;
            let action = action.unwrap_or(MetadataAction::Get {
                name: None,
                format: "json".into(),
            });
            match action {
                MetadataAction::Get { name, format } => {
                    let format = OutputFormat::parse(&format, &[Json, Table, Csv])?;
                    let md = array.metadata()?;
                    let mut entries = inspect::metadata(&md);
                    if let Some(n) = name {
                        entries.retain(|e| e.key == n);
                        if entries.is_empty() {
                            return Err(CliError::Usage(format!("no metadata key {n:?}")));
                        }
                    }
                    if format == Json {
                        print_json(&entries)?;
                    } else {
                        out!("{}", tdb_cli::metadata::rows(&entries, format));
                    }
                }
                MetadataAction::Set {
                    name,
                    value,
                    datatype,
                } => {
                    let v = tdb_cli::metadata::parse_value(&value, datatype.as_deref())?;
                    array.put_metadata(&name, v)?;
                }
                MetadataAction::Delete { name } => array.delete_metadata(&name)?,
            }
            Ok(true)
        }
        Command::Delete {
            path,
            condition,
            at,
            key,
        } => {
            let array = open_for_change(&path, at, key.as_deref())?;
            let commit = array.delete(&condition)?;
            outln!("{}: committed {commit}", path.display());
            Ok(true)
        }
        Command::Consolidate {
            path,
            mode,
            at,
            key,
            budget,
            steps,
            step_min_frags,
            step_max_frags,
            step_size_ratio,
            amplification,
            purge_deleted_cells,
            max_fragment_size,
            fragments,
        } => {
            known_mode(&mode)?;
            let options = open_options(at.as_deref(), key.as_deref())?;
            if mode == "group_meta" {
                let group = tdb::Group::open_in(storage(&path)?, "", options)?;
                match group.consolidate_metadata()? {
                    Some(c) => outln!(
                        "{}: {} group metadata files consolidated; vacuum list {}",
                        path.display(),
                        c.replaced.len(),
                        c.vacuum_list
                    ),
                    None => outln!(
                        "{}: fewer than two metadata files, nothing to do",
                        path.display()
                    ),
                }
                return Ok(true);
            }
            let array = tdb::Array::open_with(&path, options)?;
            if mode == "fragments" {
                let budget = budget.unwrap_or(tdb::DEFAULT_BUDGET);
                let bar = progress::spinner("consolidating fragments");
                let mut selection = tdb::FragmentSelection::default();
                selection.steps = steps.unwrap_or(selection.steps);
                selection.min_frags = step_min_frags.unwrap_or(selection.min_frags);
                selection.max_frags = step_max_frags.unwrap_or(selection.max_frags);
                selection.size_ratio = step_size_ratio.unwrap_or(selection.size_ratio);
                selection.amplification = amplification.unwrap_or(selection.amplification);
                selection.purge_deleted_cells = purge_deleted_cells;
                selection.max_fragment_size = max_fragment_size;
                let done = if fragments.is_empty() {
                    array.consolidate_fragments(&selection, budget)?
                } else {
                    let names: Vec<&str> = fragments.iter().map(String::as_str).collect();
                    array
                        .consolidate_fragment_list(&names, &selection, budget)?
                        .into_iter()
                        .collect()
                };
                bar.finish_and_clear();
                if done.is_empty() {
                    outln!("{}: no fragments to merge, nothing to do", path.display());
                }
                for step in done {
                    let into: Vec<String> = step
                        .written
                        .fragments
                        .iter()
                        .map(|f| f.to_string())
                        .collect();
                    outln!(
                        "{}: {} fragments consolidated into {}; vacuum list {}",
                        path.display(),
                        step.replaced.len(),
                        into.join(", "),
                        step.vacuum_list
                    );
                }
                return Ok(true);
            }
            if mode == "commits" {
                match array.consolidate_commits()? {
                    Some(con) => outln!("{}: commits consolidated into {con}", path.display()),
                    None => outln!("{}: no commit, nothing to do", path.display()),
                }
                return Ok(true);
            }
            if mode == "fragment_meta" {
                match array.consolidate_fragment_metadata()? {
                    Some(meta) => outln!(
                        "{}: fragment metadata consolidated into {meta}",
                        path.display()
                    ),
                    None => outln!(
                        "{}: fewer than two fragments, nothing to do",
                        path.display()
                    ),
                }
                return Ok(true);
            }
            match array.consolidate_metadata()? {
                Some(done) => outln!(
                    "{}: {} metadata files consolidated into {}; vacuum list {}",
                    path.display(),
                    done.replaced.len(),
                    done.file.as_deref().unwrap_or("no file (no key left)"),
                    done.vacuum_list
                ),
                None => outln!(
                    "{}: fewer than two metadata files, nothing to do",
                    path.display()
                ),
            }
            Ok(true)
        }
        Command::Vacuum {
            path,
            mode,
            key,
            uncommitted_older_than,
        } => {
            known_mode(&mode)?;
            let grace = uncommitted_older_than.map(std::time::Duration::from_secs);
            let removed_uncommitted = |gone: Vec<String>| -> Result<(), CliError> {
                for d in &gone {
                    outln!("{}: removed uncommitted {d}", path.display());
                }
                Ok(())
            };
            if mode == "group_meta" {
                let options = open_options(None, key.as_deref())?;
                let group = tdb::Group::open_in(storage(&path)?, "", options)?;
                if let Some(grace) = grace {
                    removed_uncommitted(group.vacuum_uncommitted(grace)?)?;
                }
                let n = group.vacuum_metadata()?;
                outln!("{}: {n} files removed", path.display());
                return Ok(true);
            }
            let array = open_for_change(&path, None, key.as_deref())?;
            if let Some(grace) = grace {
                if mode != "fragments" {
                    return Err(CliError::Usage(
                        "--uncommitted-older-than goes with --mode fragments or group_meta"
                            .to_owned(),
                    ));
                }
                removed_uncommitted(array.vacuum_uncommitted(grace)?)?;
            }
            let n = match mode.as_str() {
                "fragments" => array.vacuum_fragments()?,
                "commits" => array.vacuum_commits()?,
                "fragment_meta" => array.vacuum_fragment_metadata()?,
                _ => array.vacuum_metadata()?,
            };
            outln!("{}: {n} files removed", path.display());
            Ok(true)
        }
        Command::Create { path, schema, key } => {
            let file = schema.display().to_string();
            let text = std::fs::read_to_string(&schema).map_err(|e| CliError::Input {
                file: file.clone(),
                reason: e.to_string(),
            })?;
            let (schema, enumerations) = tdb_cli::schema::from_json(&file, &text)?;
            let options = open_options(None, key.as_deref())?;
            tdb::Array::create_in(storage(&path)?, "", &schema, &enumerations, options)?;
            outln!("{}: created", path.display());
            Ok(true)
        }
        Command::Import {
            path,
            file,
            format,
            at,
            key,
        } => {
            let name = file.display().to_string();
            let format = match format.as_deref() {
                Some(f) => f,
                None => file.extension().and_then(|e| e.to_str()).unwrap_or(""),
            };
            let format = tdb_cli::export::Format::from_name(format)?;
            let array = open_for_change(&path, at, key.as_deref())?;
            let input = |reason: String| CliError::Input {
                file: name.clone(),
                reason,
            };
            let handle = std::fs::File::open(&file).map_err(|e| input(e.to_string()))?;
            let started = std::time::Instant::now();
            let written = if format.is_arrow() {
                // An Arrow or Parquet file: its record batches, written whole.
                #[cfg(feature = "sql")]
                {
                    let spinner = progress::spinner("writing");
                    let written = if format == tdb_cli::export::Format::Parquet {
                        tdb_cli::parquet_files::import(&array, &name, handle)?
                    } else {
                        tdb_cli::arrow_ipc::import(&array, &name, handle)?
                    };
                    spinner.finish_and_clear();
                    written
                }
                #[cfg(not(feature = "sql"))]
                return Err(tdb_cli::export::no_arrow());
            } else {
                let size = handle.metadata().map(|m| m.len()).unwrap_or(0);
                let bar = progress::bytes(size, "reading");
                let schema = array.schema();
                let fields = if format == tdb_cli::export::Format::Csv {
                    tdb_cli::import::read_csv(
                        schema,
                        std::io::BufReader::new(bar.wrap_read(handle)),
                    )
                } else {
                    let mut text = String::new();
                    bar.wrap_read(handle)
                        .read_to_string(&mut text)
                        .map_err(|e| input(e.to_string()))?;
                    tdb_cli::import::read_json(schema, &text)
                }
                .map_err(input)?;
                bar.finish_and_clear();
                let spec = tdb_cli::import::write_spec(schema, fields).map_err(input)?;
                let spinner = progress::spinner("writing");
                let written = array.write(spec)?;
                spinner.finish_and_clear();
                written
            };
            outln!(
                "{}: {} cells in fragment {} ({:.2?})",
                path.display(),
                written.cells,
                written.fragment,
                started.elapsed()
            );
            Ok(true)
        }
        Command::Demo { dir, cells } => {
            let mut bar: Option<indicatif::ProgressBar> = None;
            let mut phase = "";
            let stdout = std::io::stdout();
            tdb_cli::demo::run(&dir, cells, &mut stdout.lock(), &mut |what, done| {
                if what != phase {
                    if let Some(b) = bar.take() {
                        b.finish_and_clear();
                    }
                    phase = what;
                    bar = match done {
                        _ if what.is_empty() => None,
                        Some((_, total)) => Some(progress::cells(total, what)),
                        None => Some(progress::spinner(what)),
                    };
                }
                if let (Some(b), Some((n, _))) = (&bar, done) {
                    b.set_position(n);
                }
            })?;
            if let Some(b) = bar {
                b.finish_and_clear();
            }
            Ok(true)
        }
        #[cfg(feature = "sql")]
        Command::Sql {
            query,
            tables,
            at,
            key,
            format,
            #[cfg(feature = "cluster")]
            cluster,
        } => {
            #[cfg(not(feature = "cluster"))]
            let cluster: Option<String> = None;
            let format = OutputFormat::parse(&format, &[Table, Csv, Json])?;
            let tables = tables
                .iter()
                .map(|t| match t.split_once('=') {
                    Some((name, uri)) if !name.is_empty() && !uri.is_empty() => {
                        Ok((name.to_owned(), uri.to_owned()))
                    }
                    _ => Err(CliError::Usage(format!(
                        "--table takes NAME=URI, not {t:?}"
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut options = tdb_datafusion::TableOptions::default();
            options.timestamp = at;
            options.key = key;
            options.config = config().clone();
            let spinner = progress::spinner("query");
            let batches = tdb_cli::sql::run(&query, &tables, &options, cluster.as_deref())?;
            spinner.finish_and_clear();
            tdb_cli::sql::print(&batches, format, &mut std::io::stdout().lock())?;
            Ok(true)
        }
        #[cfg(feature = "cluster")]
        Command::Cluster { role } => {
            match role {
                ClusterRole::Scheduler {
                    bind,
                    executor_timeout,
                } => {
                    let mut options = tdb_cluster::SchedulerOptions::new(bind);
                    options.executor_timeout = std::time::Duration::from_secs(executor_timeout);
                    tdb_cli::cluster::scheduler(options)?;
                }
                ClusterRole::Executor {
                    scheduler,
                    bind,
                    port,
                    grpc_port,
                    work_dir,
                    tasks,
                    heartbeat,
                } => {
                    let work_dir = work_dir.unwrap_or_else(|| {
                        std::env::temp_dir().join(format!("tdb-executor-{}", std::process::id()))
                    });
                    let mut options = tdb_cluster::ExecutorOptions::new(scheduler, work_dir);
                    options.bind_host = bind;
                    options.port = port;
                    options.grpc_port = grpc_port;
                    options.tasks = tasks;
                    options.heartbeat = std::time::Duration::from_secs(heartbeat);
                    tdb_cli::cluster::executor(options)?;
                }
            }
            Ok(true)
        }
        Command::Schema {
            path,
            report,
            at,
            key,
        } => {
            let json = report.json()?;
            let key = key_bytes(key.as_deref())?;
            let storage = storage(&path)?;
            let (entry, enumerations) = tdb_cli::schema::load(&storage, at, key.as_ref())?;
            let schema = entry.schema;
            if json {
                print_json(&tdb_cli::schema::summary(&schema, &enumerations)?)?;
            } else {
                out!("{schema}");
            }
            Ok(true)
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(true) | Err(CliError::OutputClosed) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprint!("{}", error_report(&e));
            ExitCode::from(2)
        }
    }
}
