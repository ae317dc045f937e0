//! `tdb`: the command-line face of tdb.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tdb_cli::{error_report, inspect, CliError};
use tdb_storage::LocalStorage;

#[derive(Parser)]
#[command(
    name = "tdb",
    version,
    about = "Read and inspect TileDB arrays without the C++ library"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show what tdb can see of an array or group directory: every file
    /// classified, fragments, and generic tile headers.
    Inspect {
        /// The array or group directory.
        path: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print an array's schema: a readable dump, or the conformance JSON
    /// summary.
    Schema {
        /// The array directory.
        path: PathBuf,
        /// Print the JSON summary instead of text.
        #[arg(long)]
        json: bool,
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

fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Inspect { path, json } => {
            let storage = LocalStorage::new(&path);
            let report = inspect::inspect(&storage, "").map_err(|e| match e {
                CliError::NotAnObject(_) => CliError::NotAnObject(path.display().to_string()),
                other => other,
            })?;
            if json {
                let text = serde_json::to_string_pretty(&report)
                    .map_err(|e| CliError::Output(e.to_string()))?;
                println!("{text}");
            } else {
                print!("{report}");
            }
            Ok(())
        }
        Command::Schema {
            path,
            json,
            at,
            key,
        } => {
            let key = key_bytes(key.as_deref())?;
            let storage = LocalStorage::new(&path);
            let (entry, enumerations) = tdb_cli::schema::load(&storage, at, key.as_ref())?;
            let schema = entry.schema;
            if json {
                let summary = tdb_cli::schema::summary(&schema, &enumerations)?;
                let text = serde_json::to_string_pretty(&summary)
                    .map_err(|e| CliError::Output(e.to_string()))?;
                println!("{text}");
            } else {
                print!("{schema}");
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprint!("{}", error_report(&e));
            ExitCode::FAILURE
        }
    }
}
