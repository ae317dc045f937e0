//! `tdb`: the command-line face of tdb.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tdb_cli::{inspect, CliError};
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
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tdb: {e}");
            ExitCode::FAILURE
        }
    }
}
