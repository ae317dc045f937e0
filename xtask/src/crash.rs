//! `cargo xtask crash [--runs N] [--seed S] [--tiledb] [--storage s3]`: crash injection on the real
//! filesystem. A child process (`xtask crash-child OP DIR`) changes a copy
//! of a small group and the array in it — writes a fragment, deletes
//! cells, puts metadata, evolves the schema, consolidates (every mode) or
//! vacuums (every mode) the array; changes the group's members or
//! metadata, consolidates or vacuums its metadata — and is SIGKILLed after
//! a seeded random delay within the operation's measured duration, counted
//! from when the child has opened what it changes (it says so on stdout;
//! opening writes nothing). After each kill:
//! - the array and the group open;
//! - `verify_array` reports nothing but leftovers vacuum may remove
//!   (uncommitted fragment directories, files of no known pattern);
//! - they answer (every cell now and at a time inside the array's history,
//!   its fields and its metadata; the group's members and metadata) as
//!   before the operation or as after it;
//! - where they answer as before, running the operation again completes it
//!   and they then answer as after; a vacuum run again leaves no leftover.
//!
//! Half the runs also tear what the kill left unfinished (files in
//! progress, files of fragments never committed) at random lengths. Every
//! survivor then must come clean: a vacuum of uncommitted work leaves
//! nothing `verify_array` or TileDB could trip on, and changes no answer.
//!
//! With `--tiledb`, every tenth survivor, and every one whose kill left
//! files behind (in progress or uncommitted), is also kept as two
//! conformance cases (`target/crash/tiledb/`; on S3 under
//! `target/crash-s3/`): real TileDB (expect.py) answers their queries (the
//! array's cells now and at a time in its history, metadata, fragments; the
//! group's members and metadata, and its member array's cells), and tdb
//! must read them as TileDB did.
//!
//! With `--storage s3` every run happens in a loopback S3 server (moto,
//! started by `tdb-test-servers`; children reach it through `AWS_*`):
//! the base is uploaded for each run, and the same checks follow, but for
//! tearing (an object store has no partial objects) and files in progress
//! (an unfinished multipart upload shows nowhere). Kept cases are
//! downloaded for TileDB.
//!
//! The group and array are built fresh each time by tdb (six fragments,
//! metadata, a delete, then every kind of consolidation, and newer
//! fragments and metadata beside them; group metadata consolidated, newer
//! beside it), so every operation has work to do.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tdb::{
    AnyStorage, Array, ArraySchema, AttributeBuilder, Datatype, DimensionBuilder, FieldBuffer,
    FragmentSelection, Group, LocalStorage, MemberChange, MetadataEntry, MetadataValue,
    OpenOptions, ReadSpec, SchemaEvolution, StorageConfig, WriteSpec,
};
use tdb_format::ArrayType;
use tdb_fragment::ProblemKind;
use tdb_storage::{ListableStorage, ReadableStorage, WritableStorage};
use tdb_testdata::XorShift;

/// The operations a child runs, each from the same base array.
const OPS: &[&str] = &[
    "write",
    "delete",
    "metadata",
    "evolve",
    "consolidate-fragments",
    "consolidate-commits",
    "consolidate-fragment-meta",
    "consolidate-array-meta",
    "vacuum-fragments",
    "vacuum-commits",
    "vacuum-fragment-meta",
    "vacuum-array-meta",
    "group-members",
    "group-metadata",
    "consolidate-group-meta",
    "vacuum-group-meta",
];

/// The array's directory inside the group every run starts from (the
/// group's member `arr`).
const ARRAY: &str = "arr";

/// Where a copy of the base lives: a local directory, or a prefix of the
/// S3 server's bucket (`s3://…`).
#[derive(Debug, Clone)]
struct Loc(String);

/// The storage settings of this process: the S3 server's in the parent,
/// the environment's in a child.
static CONFIG: OnceLock<StorageConfig> = OnceLock::new();
/// The environment children reach the S3 server through.
static CHILD_ENV: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();

impl Loc {
    fn local(path: &Path) -> Loc {
        Loc(path.display().to_string())
    }

    /// The directory, for a local place.
    fn path(&self) -> Option<&Path> {
        (!self.0.contains("://")).then(|| Path::new(&self.0))
    }

    fn join(&self, name: &str) -> Loc {
        Loc(format!("{}/{name}", self.0.trim_end_matches('/')))
    }

    /// The array inside the group.
    fn array(&self) -> Loc {
        self.join(ARRAY)
    }

    fn storage(&self) -> Result<AnyStorage, Err> {
        tdb::storage(&self.0, CONFIG.get_or_init(StorageConfig::new)).map_err(err)
    }
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Timestamps of the base array's writes; reads at `HISTORY` see the
/// first fragments only, whatever consolidation did since.
const FIRST_T: u64 = 1_000;
const HISTORY: u64 = FIRST_T + 3;

type Err = String;

fn err(e: tdb::Error) -> Err {
    crate::conformance::chain(&e)
}

/// What a reader can observe of the array: its fields, every cell now and
/// at `HISTORY` (rows of each cell's bytes, sorted), and its metadata; and
/// of the group holding it: its members and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    fields: Vec<String>,
    now: Vec<Vec<u8>>,
    history: Vec<Vec<u8>>,
    metadata: Metadata,
    members: Vec<String>,
    group_metadata: Metadata,
}

type Metadata = BTreeMap<String, (Datatype, Vec<u8>)>;

fn metadata_map(m: &tdb::ArrayMetadata) -> Metadata {
    m.iter()
        .map(|(k, v)| (k.to_owned(), (v.datatype, v.bytes.clone())))
        .collect()
}

fn cells(array: &Array<AnyStorage>) -> Result<Vec<Vec<u8>>, Err> {
    // The base schema's fields only: an added attribute is part of
    // `fields`, and reads of the others must not change.
    let fields = ["x", "y", "a", "s"];
    let batch = array.read_all(ReadSpec::new(fields)).map_err(err)?;
    let buffers: Vec<&FieldBuffer> = fields
        .iter()
        .map(|f| batch.field(f).ok_or(format!("no field {f} in the batch")))
        .collect::<Result<_, _>>()?;
    let n = buffers[0].column().len();
    let mut rows: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let mut row = Vec::new();
            for b in &buffers {
                let cell = b.column().cell(i);
                row.extend_from_slice(&(cell.len() as u32).to_le_bytes());
                row.extend_from_slice(cell);
                if let Some(v) = &b.validity {
                    row.push(u8::from(v.is_valid(i)));
                }
            }
            row
        })
        .collect();
    rows.sort();
    Ok(rows)
}

fn state(dir: &Loc) -> Result<State, Err> {
    let storage = dir.array().storage()?;
    let now = Array::open_in(storage.clone(), "", OpenOptions::new()).map_err(err)?;
    let then = Array::open_in(storage, "", OpenOptions::new().at(HISTORY)).map_err(err)?;
    let group = Group::open_in(dir.storage()?, "", OpenOptions::new()).map_err(err)?;
    let mut members: Vec<String> = group.members().iter().map(|m| format!("{m:?}")).collect();
    members.sort();
    Ok(State {
        fields: now.schema().fields().map(str::to_owned).collect(),
        now: cells(&now)?,
        history: cells(&then)?,
        metadata: metadata_map(&now.metadata().map_err(err)?),
        members,
        group_metadata: metadata_map(group.metadata()),
    })
}

fn column_i64(name: &str, values: impl Iterator<Item = i64>) -> FieldBuffer {
    let mut b = FieldBuffer::new(name, Datatype::Int64, 1, false);
    b.data = values.flat_map(i64::to_le_bytes).collect();
    b
}

/// One fragment of `n` cells on a diagonal band from `from`, values `k`.
fn fragment(k: i64, from: i64, n: i64) -> WriteSpec {
    let coords = from..from + n;
    let mut a = FieldBuffer::new("a", Datatype::Int32, 1, false);
    let mut s = FieldBuffer::new("s", Datatype::StringUtf8, tdb::VAR_NUM, true);
    for c in coords.clone() {
        a.push(&((c * 7 + k) as i32).to_le_bytes(), true);
        s.push(format!("v{k}-{c}").as_bytes(), c % 5 != 0);
    }
    WriteSpec::new(vec![
        column_i64("x", coords.clone()),
        column_i64("y", coords.map(|c| (c * 3) % 97)),
        a,
        s,
    ])
}

fn put<S: tdb::Storage>(array: &Array<S>, key: &str, v: i64) -> Result<(), Err> {
    let value = MetadataValue::new(Datatype::Int64, 1, v.to_le_bytes().to_vec())
        .map_err(|e| e.to_string())?;
    array.put_metadata(key, value).map_err(err)
}

/// A change of one group metadata key.
fn group_put(key: &str, v: i64) -> Result<MetadataEntry, Err> {
    Ok(MetadataEntry::Put {
        key: key.into(),
        value: MetadataValue::new(Datatype::Int64, 1, v.to_le_bytes().to_vec())
            .map_err(|e| e.to_string())?,
    })
}

fn add_member(name: &str) -> MemberChange {
    MemberChange::Add {
        uri: name.into(),
        relative: true,
        name: Some(name.into()),
    }
}

/// The base every run starts from: a group of the array and an empty
/// subgroup (a second waits beside them), with metadata of its own.
fn build_base(dir: &Path) -> Result<(), Err> {
    let _ = fs::remove_dir_all(dir);
    let storage = LocalStorage::new(dir);
    let group = Group::create_in(&storage, "", OpenOptions::new()).map_err(err)?;
    for sub in ["sub1", "sub2"] {
        Group::create_in(&storage, sub, OpenOptions::new()).map_err(err)?;
    }
    build_array(&dir.join(ARRAY))?;
    group
        .change_members(&[add_member(ARRAY), add_member("sub1")])
        .map_err(err)?;
    for k in 0..3 {
        group
            .write_metadata([group_put(&format!("g{k}"), k)?])
            .map_err(err)?;
    }
    let group = Group::open_in(&storage, "", OpenOptions::new()).map_err(err)?;
    group.consolidate_metadata().map_err(err)?;
    group.write_metadata([group_put("g3", 3)?]).map_err(err)?;
    Ok(())
}

/// The array of the base group.
fn build_array(dir: &Path) -> Result<(), Err> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", 0i64..=9_999).tile_extent(100i64))
        .dimension(DimensionBuilder::range("y", 0i64..=99).tile_extent(10i64))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .attribute(
            AttributeBuilder::new("s", Datatype::StringUtf8)
                .var()
                .nullable(true),
        )
        .capacity(64)
        .build()
        .map_err(|e| e.to_string())?;
    let storage = LocalStorage::new(dir);
    let at = |t: u64| OpenOptions::new().at(t);
    Array::create_in(&storage, "", &schema, &[], at(FIRST_T - 1)).map_err(err)?;
    for k in 0..6u64 {
        let a = Array::open_in(&storage, "", at(FIRST_T + k)).map_err(err)?;
        a.write(fragment(k as i64, k as i64 * 40, 200).at(FIRST_T + k))
            .map_err(err)?;
        put(
            &Array::open_in(&storage, "", at(FIRST_T + k)).map_err(err)?,
            &format!("k{k}"),
            k as i64,
        )?;
    }
    let a = Array::open_in(&storage, "", at(FIRST_T + 6)).map_err(err)?;
    a.delete("a < 300").map_err(err)?;
    let a = Array::open_in(&storage, "", OpenOptions::new()).map_err(err)?;
    a.consolidate_fragments(&FragmentSelection::default(), tdb::DEFAULT_BUDGET)
        .map_err(err)?;
    a.consolidate_commits().map_err(err)?;
    a.consolidate_metadata().map_err(err)?;
    a.consolidate_fragment_metadata().map_err(err)?;
    // Newer work beside the consolidated: the consolidations of the runs
    // have something to merge.
    for k in 6..9i64 {
        let a = Array::open_in(&storage, "", OpenOptions::new()).map_err(err)?;
        a.write(fragment(k, k * 30, 150)).map_err(err)?;
        put(&a, &format!("k{k}"), k)?;
    }
    Ok(())
}

/// Runs `op` on the group at `dir` or its array to its end (the child's
/// work), calling `ready` once it is open: what comes after changes it.
fn run_op(op: &str, dir: &Loc, ready: &mut dyn FnMut()) -> Result<(), Err> {
    let storage = dir.storage()?;
    if op.contains("group") {
        let g = Group::open_in(&storage, "", OpenOptions::new()).map_err(err)?;
        ready();
        match op {
            // One details file: a reader sees both changes or neither.
            "group-members" => {
                g.change_members(&[add_member("sub2"), MemberChange::Remove("sub1".into())])
            }
            "group-metadata" => g.write_metadata([
                group_put("g0", -1)?,
                group_put("gnew", 42)?,
                MetadataEntry::Delete { key: "g1".into() },
            ]),
            "consolidate-group-meta" => g.consolidate_metadata().map(drop),
            "vacuum-group-meta" => g.vacuum_metadata().map(drop),
            other => return Err(format!("crash: no operation {other}")),
        }
        .map_err(err)?;
        return Ok(());
    }
    let storage = dir.array().storage()?;
    let a = Array::open_in(&storage, "", OpenOptions::new()).map_err(err)?;
    ready();
    match op {
        "write" => drop(a.write(fragment(9, 500, 400)).map_err(err)?),
        "delete" => drop(a.delete("a > 2000").map_err(err)?),
        "metadata" => {
            // One metadata file: a reader sees all three changes or none.
            let value = |v: i64| {
                MetadataValue::new(Datatype::Int64, 1, v.to_le_bytes().to_vec())
                    .map_err(|e| e.to_string())
            };
            a.write_metadata([
                MetadataEntry::Put {
                    key: "k0".into(),
                    value: value(-1)?,
                },
                MetadataEntry::Put {
                    key: "new".into(),
                    value: value(42)?,
                },
                MetadataEntry::Delete { key: "k1".into() },
            ])
            .map_err(err)?;
        }
        "evolve" => {
            let evolution =
                SchemaEvolution::new().add_attribute(AttributeBuilder::new("c", Datatype::Int64));
            a.evolve(&evolution).map_err(err)?;
        }
        "consolidate-fragments" => {
            a.consolidate_fragments(&FragmentSelection::default(), tdb::DEFAULT_BUDGET)
                .map_err(err)?;
        }
        "consolidate-commits" => drop(a.consolidate_commits().map_err(err)?),
        "consolidate-fragment-meta" => drop(a.consolidate_fragment_metadata().map_err(err)?),
        "consolidate-array-meta" => drop(a.consolidate_metadata().map_err(err)?),
        "vacuum-fragments" => drop(a.vacuum_fragments().map_err(err)?),
        "vacuum-commits" => drop(a.vacuum_commits().map_err(err)?),
        "vacuum-fragment-meta" => drop(a.vacuum_fragment_metadata().map_err(err)?),
        "vacuum-array-meta" => drop(a.vacuum_metadata().map_err(err)?),
        other => return Err(format!("crash: no operation {other}")),
    }
    Ok(())
}

/// `xtask crash-child OP DIR`.
pub fn child(args: &[String]) -> Result<(), Err> {
    let [op, dir] = args else {
        return Err("usage: xtask crash-child OP DIR".into());
    };
    // The parent starts its clock at this line.
    run_op(op, &Loc(dir.clone()), &mut || {
        use std::io::Write;
        let mut out = std::io::stdout();
        let _ = writeln!(out, "ready");
        let _ = out.flush();
    })
}

/// Problems `verify_array` finds that are not leftovers vacuum may remove.
fn damage(dir: &Loc) -> Result<Vec<String>, Err> {
    let storage = dir.array().storage()?;
    let mut found = Vec::new();
    tdb_fragment::verify_array(&storage, "", None, &mut |p| {
        if !matches!(
            p.kind,
            ProblemKind::UncommittedFragment | ProblemKind::UnknownFile
        ) {
            found.push(format!("{:?} {}: {}", p.kind, p.file, p.detail));
        }
    })
    .map_err(|e| e.to_string())?;
    Ok(found)
}

/// Every problem `verify_array` finds, leftovers included.
fn problems(dir: &Loc) -> Result<Vec<String>, Err> {
    let storage = dir.array().storage()?;
    let mut found = Vec::new();
    tdb_fragment::verify_array(&storage, "", None, &mut |p| {
        found.push(format!("{:?} {}", p.kind, p.file));
    })
    .map_err(|e| e.to_string())?;
    Ok(found)
}

/// Whether a kill left files a finished operation would not have: what
/// `verify_array` calls leftovers, or a file in progress (which tdb never
/// lists, but TileDB lists every file).
fn left_files(dir: &Loc) -> Result<bool, Err> {
    Ok(!problems(dir)?.is_empty() || !in_progress(dir)?.is_empty())
}

/// Files in progress below a local place (none show on an object store).
fn in_progress(dir: &Loc) -> Result<Vec<String>, Err> {
    match dir.path() {
        Some(p) => temporary_files(p).map_err(|e| format!("{dir}: {e}")),
        None => Ok(Vec::new()),
    }
}

/// Files in progress (`LocalStorage`'s temporary names) anywhere below `dir`.
fn temporary_files(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut found = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            found.extend(temporary_files(&e.path())?);
        } else if e
            .file_name()
            .to_string_lossy()
            .starts_with(tdb_storage::LOCAL_TEMP_PREFIX)
        {
            found.push(e.path().display().to_string());
        }
    }
    Ok(found)
}

/// Cuts every file the kill left unfinished (files in progress, and the
/// files of fragments never committed) to a random length; whether there
/// was any. Committed files are never torn: tdb syncs a file before its
/// name appears, and the commit comes last.
fn tear(dir: &Loc, rng: &mut XorShift) -> Result<bool, Err> {
    // An object store has no partial objects.
    let Some(dir) = dir.path() else {
        return Ok(false);
    };
    let array = dir.join(ARRAY);
    let storage = LocalStorage::new(&array);
    let mut unfinished: Vec<PathBuf> = Vec::new();
    tdb_fragment::verify_array(&storage, "", None, &mut |p| {
        if p.kind == ProblemKind::UncommittedFragment {
            unfinished.push(array.join(&p.file));
        }
    })
    .map_err(|e| e.to_string())?;
    let mut files: Vec<PathBuf> = temporary_files(dir)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(PathBuf::from)
        .collect();
    for d in unfinished {
        for e in fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            files.push(e.map_err(|e| e.to_string())?.path());
        }
    }
    // A file in progress already linked to its name (killed between the
    // link and the removal of the old name) was synced before the link.
    files.retain(|f| fs::metadata(f).is_ok_and(|m| m.nlink() == 1));
    for f in &files {
        let len = fs::metadata(f)
            .map_err(|e| format!("{}: {e}", f.display()))?
            .len();
        let cut = rng.next_u64() % (len + 1);
        fs::OpenOptions::new()
            .write(true)
            .open(f)
            .and_then(|h| h.set_len(cut))
            .map_err(|e| format!("{}: {e}", f.display()))?;
    }
    Ok(!files.is_empty())
}

fn spawn_child(op: &str, dir: &Loc) -> Result<std::process::Child, Err> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let env = CHILD_ENV.get().map(Vec::as_slice).unwrap_or_default();
    Command::new(exe)
        .arg("crash-child")
        .arg(op)
        .arg(&dir.0)
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("crash-child: {e}"))
}

/// Waits until the child has opened what it changes (its "ready" line);
/// an error if it ended first.
fn wait_ready(child: &mut std::process::Child) -> Result<(), Err> {
    use std::io::BufRead;
    let out = child.stdout.take().ok_or("the child has no stdout")?;
    let mut line = String::new();
    std::io::BufReader::new(out)
        .read_line(&mut line)
        .map_err(|e| format!("the child's stdout: {e}"))?;
    if line.trim() == "ready" {
        Ok(())
    } else {
        Err("the child ended before it opened the array".into())
    }
}

struct Reference {
    after: State,
    duration: Duration,
}

pub fn crash(args: &[String]) -> Result<(), Err> {
    let mut runs = 1_000u64;
    let mut seed = 1u64;
    let mut tiledb = false;
    let mut s3 = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut number = |what: &str| crate::number_arg(&mut it, what);
        match a.as_str() {
            "--runs" => runs = number("--runs")?,
            "--seed" => seed = number("--seed")?,
            "--tiledb" => tiledb = true,
            "--storage" => match it.next().map(String::as_str) {
                Some("s3") => s3 = true,
                Some("local") => s3 = false,
                other => return Err(format!("crash: --storage local|s3, not {other:?}")),
            },
            other => return Err(format!("crash: unknown argument {other}")),
        }
    }
    let root = crate::workspace_root();
    // Its own scratch directory per storage: CI runs the two side by side.
    let work = root.join(if s3 {
        "target/crash-s3"
    } else {
        "target/crash"
    });
    let cases = work.join("tiledb");
    let _ = fs::remove_dir_all(&cases);
    let base_dir = work.join("base");
    build_base(&base_dir)?;
    let base = Loc::local(&base_dir);
    // The server lives until the end of this function.
    let server = if s3 {
        let server = tdb_test_servers::S3Server::start()?;
        server.create_bucket("tdb")?;
        let _ = CONFIG.set(server.settings().into_iter().collect());
        let _ = CHILD_ENV.set(server.env());
        Some(server)
    } else {
        None
    };
    let place = match server {
        Some(_) => Loc("s3://tdb".into()),
        None => Loc::local(&work),
    };
    let before = state(&base)?;
    if !problems(&base)?.is_empty() {
        return Err(format!(
            "the base array has problems: {:?}",
            problems(&base)?
        ));
    }
    // Each operation run whole in a child, for its answers and duration.
    let mut reference = BTreeMap::new();
    for op in OPS {
        let dir = place.join(&format!("ref-{op}"));
        copy_fresh(&base, &dir)?;
        let mut child = spawn_child(op, &dir)?;
        wait_ready(&mut child).map_err(|e| format!("{op}: {e}"))?;
        // From the open on: what a kill can interrupt.
        let started = Instant::now();
        let status = child.wait().map_err(|e| e.to_string())?;
        let duration = started.elapsed();
        if !status.success() {
            return Err(format!("{op} run whole failed: {status}"));
        }
        // Consolidations change nothing a reader sees; the other
        // operations may, and a vacuum of fragments changes time travel.
        let after = state(&dir)?;
        eprintln!(
            "{op:<26} {:>6.1} ms after opening",
            duration.as_secs_f64() * 1e3
        );
        reference.insert(*op, Reference { after, duration });
    }
    let mut rng = XorShift::new(seed);
    // Per operation: runs read as before, as after, failed, and runs
    // whose kill left files behind.
    let mut tally: BTreeMap<&str, [u64; 5]> = BTreeMap::new();
    let mut failures = Vec::new();
    let run_dir = place.join("run");
    let started = Instant::now();
    for run in 0..runs {
        // A run on S3 takes seconds: say how far it is.
        if run > 0 && run % 10 == 0 {
            eprintln!(
                "crash: {run} of {runs} runs in {:.0} s, {} failed so far",
                started.elapsed().as_secs_f64(),
                failures.len()
            );
        }
        let op = OPS[(rng.next_u64() % OPS.len() as u64) as usize];
        let r = &reference[op];
        // From the open to 20% past the operation's time, so some runs
        // finish.
        let span = r.duration.as_micros() as u64 * 6 / 5;
        let delay = Duration::from_micros(rng.next_u64() % span.max(1));
        copy_fresh(&base, &run_dir)?;
        let mut child = spawn_child(op, &run_dir)?;
        let ready = wait_ready(&mut child);
        if let Err(e) = ready {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("run {run} ({op}): {e}"));
        }
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        // Half the runs also tear what the kill left unfinished, as a
        // machine that lost power before those bytes reached the disk may.
        let context = |e: Err| format!("run {run} ({op}, killed after {delay:?}): {e}");
        let torn = rng.next_u64() % 2 == 0 && tear(&run_dir, &mut rng).map_err(context)?;
        if tiledb && (run % 10 == 0 || left_files(&run_dir).map_err(context)?) {
            keep_case(&run_dir, &cases.join(format!("run-{run}-{op}")))?;
        }
        let outcome = check_run(op, &run_dir, &before, &r.after);
        let t = tally.entry(op).or_default();
        match outcome {
            Ok((seen, leftovers)) => {
                t[if matches!(seen, Seen::Before) { 0 } else { 1 }] += 1;
                t[3] += u64::from(leftovers);
                t[4] += u64::from(torn);
            }
            Err(e) => {
                t[2] += 1;
                let kept = work.join(format!("failed-{run}-{op}"));
                copy_fresh(&run_dir, &Loc::local(&kept))?;
                failures.push(format!(
                    "run {run} ({op}, killed after {} µs; kept in {}): {e}",
                    delay.as_micros(),
                    kept.display()
                ));
            }
        }
    }
    if tiledb {
        failures.extend(tiledb_reads(&root, &cases)?);
    }
    println!(
        "operation                  as before  as after  failed  left files  torn  (runs: {runs}, seed {seed}{})",
        if s3 { ", on S3" } else { "" }
    );
    for (op, [b, a, f, l, t]) in &tally {
        println!("{op:<26} {b:>9} {a:>9} {f:>7} {l:>11} {t:>5}");
    }
    if failures.is_empty() {
        Ok(())
    } else {
        for f in &failures {
            eprintln!("{f}");
        }
        Err(format!("{} of {runs} runs failed", failures.len()))
    }
}

enum Seen {
    Before,
    After,
}

/// The checks after one kill (see the module's doc).
fn check_run(op: &str, dir: &Loc, before: &State, after: &State) -> Result<(Seen, bool), Err> {
    // Leftovers show the kill landed inside the operation's writes.
    let leftovers = left_files(dir)?;
    let damage = damage(dir)?;
    if !damage.is_empty() {
        return Err(format!("verify: {}", damage.join("; ")));
    }
    let seen = state(dir)?;
    let outcome = if seen == *before {
        Seen::Before
    } else if seen == *after {
        Seen::After
    } else {
        return Err(format!(
            "answers neither as before nor as after: {}",
            describe(&seen, before, after)
        ));
    };
    if matches!(outcome, Seen::Before) {
        run_op(op, dir, &mut || {}).map_err(|e| format!("run again: {e}"))?;
        if state(dir)? != *after {
            return Err("run again, it does not answer as after".into());
        }
    }
    if op.starts_with("vacuum") {
        // A vacuum stopped anywhere must be finishable: run again (or
        // once more), nothing is left over.
        run_op(op, dir, &mut || {}).map_err(|e| format!("vacuum again: {e}"))?;
        let mut left = problems(dir)?;
        if op == "vacuum-group-meta" {
            left.extend(vacuum_lists(dir)?);
        }
        if !left.is_empty() {
            return Err(format!("left after vacuuming again: {}", left.join("; ")));
        }
    }
    // Whatever the kill left, a vacuum of uncommitted work removes it all
    // and changes nothing a reader sees.
    Array::open_in(dir.array().storage()?, "", OpenOptions::new())
        .and_then(|a| a.vacuum_uncommitted(Duration::ZERO))
        .map_err(|e| format!("vacuum uncommitted: {e}"))?;
    Group::open_in(dir.storage()?, "", OpenOptions::new())
        .and_then(|g| g.vacuum_uncommitted(Duration::ZERO))
        .map_err(|e| format!("vacuum uncommitted (group): {e}"))?;
    let mut left = problems(dir)?;
    left.extend(in_progress(dir)?);
    if !left.is_empty() {
        return Err(format!(
            "left after vacuuming uncommitted work: {}",
            left.join("; ")
        ));
    }
    if state(dir)? != *after {
        return Err("vacuuming uncommitted work changed what a reader sees".into());
    }
    Ok((outcome, leftovers))
}

/// The vacuum lists of the group's metadata (none after a vacuum).
fn vacuum_lists(dir: &Loc) -> Result<Vec<String>, Err> {
    let listing = dir
        .storage()?
        .list_dir("__meta")
        .map_err(|e| format!("{dir}/__meta: {e}"))?;
    Ok(listing
        .files
        .into_iter()
        .map(|f| f.key)
        .filter(|k| k.ends_with(tdb_format::names::VAC_EXT))
        .collect())
}

/// Which parts of what a reader sees match neither state.
fn describe(seen: &State, before: &State, after: &State) -> String {
    let mut parts = Vec::new();
    if seen.fields != before.fields && seen.fields != after.fields {
        parts.push(format!("fields {:?}", seen.fields));
    }
    let counts = |what: String, seen: &[Vec<u8>], before: &[Vec<u8>], after: &[Vec<u8>]| {
        (seen != before && seen != after).then(|| {
            format!(
                "{} cells {what} (before {}, after {})",
                seen.len(),
                before.len(),
                after.len()
            )
        })
    };
    parts.extend(counts("now".into(), &seen.now, &before.now, &after.now));
    parts.extend(counts(
        format!("at {HISTORY}"),
        &seen.history,
        &before.history,
        &after.history,
    ));
    if seen.metadata != before.metadata && seen.metadata != after.metadata {
        parts.push(format!("metadata keys {:?}", seen.metadata.keys()));
    }
    if seen.members != before.members && seen.members != after.members {
        parts.push(format!("members {:?}", seen.members));
    }
    if seen.group_metadata != before.group_metadata && seen.group_metadata != after.group_metadata {
        parts.push(format!(
            "group metadata keys {:?}",
            seen.group_metadata.keys()
        ));
    }
    if parts.is_empty() {
        "each part matches one state, but not all the same one".into()
    } else {
        parts.join(", ")
    }
}

/// Keeps a survivor as two conformance cases whose queries TileDB answers:
/// the array (now and in its history), and the group with its members.
fn keep_case(dir: &Loc, case: &Path) -> Result<(), Err> {
    copy_fresh(&dir.array(), &Loc::local(&case.join("array")))?;
    let query = |name: &str, timestamp: serde_json::Value| {
        serde_json::json!({"name": name, "layout": "unordered", "subarray": null, "dims": [],
            "attrs": [], "condition": null, "timestamp": timestamp, "ordered": false})
    };
    let exp = serde_json::json!({
        "case": case.file_name().map(|n| n.to_string_lossy().into_owned()),
        "description": "an array an operation of tdb's was killed in (cargo xtask crash)",
        "kind": "array",
        "encryption": null,
        "metadata_at": [{"timestamp": HISTORY}],
        "queries": [query("now", serde_json::Value::Null), query("history", HISTORY.into())],
    });
    let write = |case: &Path, exp: serde_json::Value| {
        let text = serde_json::to_string_pretty(&exp).map_err(|e| e.to_string())?;
        fs::write(case.join("expected.json"), text).map_err(|e| e.to_string())
    };
    write(case, exp)?;
    let group_case = case.with_file_name(format!(
        "{}-group",
        case.file_name().unwrap_or_default().to_string_lossy()
    ));
    copy_fresh(dir, &Loc::local(&group_case.join("group")))?;
    let exp = serde_json::json!({
        "case": group_case.file_name().map(|n| n.to_string_lossy().into_owned()),
        "description": "a group an operation of tdb's was killed in (cargo xtask crash)",
        "kind": "group",
        "encryption": null,
        "queries": [],
    });
    write(&group_case, exp)
}

/// TileDB answers the kept cases; tdb must read each as TileDB did.
fn tiledb_reads(root: &Path, cases: &Path) -> Result<Vec<String>, Err> {
    let writers = crate::read_writers(root)?;
    let python = crate::venv_for(root, &writers[0])?.join("bin/python");
    let output = Command::new(&python)
        .current_dir(root)
        .arg("xtask/fixtures/expect.py")
        .arg(cases)
        .output()
        .map_err(|e| format!("expect.py: {e}"))?;
    let mut failures: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.starts_with("FAIL"))
        .map(|l| format!("TileDB could not read a survivor: {l}"))
        .collect();
    if !output.status.success() && failures.is_empty() {
        failures.push(format!(
            "expect.py failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let mut report = Vec::new();
    let (passed, failed) =
        crate::conformance::run(cases, &crate::conformance::Options::default(), &mut report)?;
    failures.extend(
        String::from_utf8_lossy(&report)
            .lines()
            .filter(|l| l.starts_with("FAIL"))
            .map(|l| format!("tdb reads a survivor otherwise than TileDB: {l}")),
    );
    eprintln!(
        "TileDB read {} survivors; tdb read {passed} of them as TileDB did, {failed} otherwise",
        passed + failed
    );
    Ok(failures)
}

/// Copies every file at `from` to `to`, which holds nothing else after.
/// Between local directories, files in progress go too (TileDB must read
/// an array holding them).
fn copy_fresh(from: &Loc, to: &Loc) -> Result<(), Err> {
    if let (Some(from), Some(to)) = (from.path(), to.path()) {
        let _ = fs::remove_dir_all(to);
        return tdb_testdata::copy_dir(from, to).map_err(|e| format!("{}: {e}", to.display()));
    }
    let (source, target) = (from.storage()?, to.storage()?);
    if let Some(p) = to.path() {
        let _ = fs::remove_dir_all(p);
    } else {
        target.delete_prefix("").map_err(|e| format!("{to}: {e}"))?;
    }
    let files = source.list_prefix("").map_err(|e| format!("{from}: {e}"))?;
    // Eight at a time: a request to the server costs milliseconds.
    let copy_one = |key: &str| -> Result<(), Err> {
        let bytes = source
            .read(key)
            .map_err(|e| format!("{from}/{key}: {e}"))?
            .ok_or_else(|| format!("{from}/{key}: gone"))?;
        target
            .write(key, bytes)
            .map_err(|e| format!("{to}/{key}: {e}"))
    };
    let per_thread = files.len().div_ceil(8).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = files
            .chunks(per_thread)
            .map(|chunk| scope.spawn(|| chunk.iter().try_for_each(|f| copy_one(&f.key))))
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .unwrap_or_else(|_| Err("a copy thread panicked".into()))
        })
    })
}
