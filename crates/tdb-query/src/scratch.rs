//! Scratch files: where a spilled read's sorted runs and a consolidation's
//! merge levels go. Unnamed temporary files (in `TMPDIR`), gone when
//! closed, local whatever the array's backend: scratch memory, not storage.

use crate::{QueryError, Result};
use std::fs::File;
use std::io::{BufWriter, Seek};

/// A fresh scratch file, written through `buffer` bytes.
pub(crate) fn create(buffer: usize) -> Result<BufWriter<File>> {
    let file = tempfile::tempfile().map_err(QueryError::Spill)?;
    Ok(BufWriter::with_capacity(buffer, file))
}

/// The file `out` wrote, flushed and back at its start, to be read.
pub(crate) fn rewound(out: BufWriter<File>) -> Result<File> {
    let mut file = out
        .into_inner()
        .map_err(|e| QueryError::Spill(e.into_error()))?;
    file.rewind().map_err(QueryError::Spill)?;
    Ok(file)
}
