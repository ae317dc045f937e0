//! An enumeration's values (v20), stored in its own generic tile under
//! `__schema/__enumerations/` and named by the schema. Versioned on its own
//! (version 0 today).

use crate::read::{datatype, fail, format_error, lift, name_u32, SResult};
use crate::{Result, SchemaError, VAR_NUM};
use tdb_format::le;
use tdb_format::Datatype;

/// TileDB's `constants::enumerations_version`.
pub const ENUMERATION_VERSION: u32 = 0;

/// An enumeration with its values.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Enumeration {
    /// Its own format version.
    pub version: u32,
    /// The name attributes refer to it by.
    pub name: String,
    /// Its file name.
    pub path: String,
    /// Datatype of the values.
    pub datatype: Datatype,
    /// Values per cell, or [`VAR_NUM`].
    pub cell_val_num: u32,
    /// Whether the values are ordered.
    pub ordered: bool,
    /// The values' bytes, back to back.
    pub data: Vec<u8>,
    /// For var-length values, each value's `u64` start offset in `data`.
    pub offsets: Vec<u8>,
}

impl Enumeration {
    /// An enumeration of the current version, unordered: `data` holds the
    /// values back to back, `offsets` (for [`VAR_NUM`] values; empty
    /// otherwise) each value's `u64` start offset in `data`.
    pub fn new(
        name: impl Into<String>,
        path: impl Into<String>,
        datatype: Datatype,
        cell_val_num: u32,
        data: Vec<u8>,
        offsets: Vec<u8>,
    ) -> Self {
        Enumeration {
            version: ENUMERATION_VERSION,
            name: name.into(),
            path: path.into(),
            datatype,
            cell_val_num,
            ordered: false,
            data,
            offsets,
        }
    }

    /// An unordered enumeration of `values`, stored in a fresh file
    /// ([`Enumeration::new_path`]).
    pub fn from_values<V: AsRef<[u8]>>(
        name: impl Into<String>,
        datatype: Datatype,
        cell_val_num: u32,
        values: impl IntoIterator<Item = V>,
    ) -> Self {
        let mut e = Enumeration::new(
            name,
            Enumeration::new_path(),
            datatype,
            cell_val_num,
            Vec::new(),
            Vec::new(),
        );
        for v in values {
            e.push(v.as_ref());
        }
        e
    }

    /// Appends one value (its offset too, for var-length values).
    pub(crate) fn push(&mut self, value: &[u8]) {
        if self.cell_val_num == VAR_NUM {
            self.offsets
                .extend_from_slice(&(self.data.len() as u64).to_le_bytes());
        }
        self.data.extend_from_slice(value);
    }

    /// A fresh file name for a new enumeration (`__<random label>_<version>`),
    /// as TileDB names them.
    pub fn new_path() -> String {
        format!(
            "__{}_{ENUMERATION_VERSION}",
            tdb_format::names::random_label()
        )
    }

    /// Reads an enumeration file: one generic tile, encrypted when `key` is given.
    pub fn from_file(file: &str, bytes: &[u8], key: Option<&[u8; 32]>) -> Result<Self> {
        let data = tdb_tile::read_generic_tile_file(file, bytes, key)
            .map_err(|e| SchemaError::tile(file, e))?;
        Self::parse(file, &data)
    }

    /// Parses an enumeration from its generic tile's unfiltered bytes,
    /// which it must use up exactly.
    pub fn parse(file: &str, bytes: &[u8]) -> Result<Self> {
        crate::read::finish(file, "enumeration", enumeration(bytes))
    }

    /// The enumeration's bytes: the mirror of the parser.
    pub fn write(&self) -> Result<Vec<u8>> {
        let size = self.data.len().saturating_add(self.offsets.len());
        let mut out = Vec::with_capacity(size.saturating_add(32));
        le::put_u32(&mut out, self.version);
        let put_name = |out: &mut Vec<u8>, field: &'static str, name: &str| {
            le::put_bytes_u32(out, field, name.as_bytes())
                .map_err(|e| format_error(format!("enumeration {field}"), e))
        };
        put_name(&mut out, "name", &self.name)?;
        put_name(&mut out, "path", &self.path)?;
        le::put_u8(&mut out, self.datatype.code());
        le::put_u32(&mut out, self.cell_val_num);
        le::put_bool(&mut out, self.ordered);
        le::put_bytes_u64(&mut out, &self.data);
        if self.cell_val_num == VAR_NUM {
            le::put_bytes_u64(&mut out, &self.offsets);
        }
        Ok(out)
    }

    /// The enumeration file: [`Enumeration::write`] in a generic tile of
    /// format `version`, encrypted when `key` is given.
    pub fn write_file(
        &self,
        file: &str,
        version: tdb_format::FormatVersion,
        key: Option<&[u8; 32]>,
    ) -> Result<Vec<u8>> {
        let data = self.write().map_err(|e| e.in_file(file))?;
        let mut out = Vec::new();
        tdb_tile::write_generic_tile(file, version, &data, key, &mut out)
            .map_err(|e| SchemaError::tile(file, e))?;
        Ok(out)
    }

    /// Each value's bytes, in order. The fields are public, so the offsets
    /// are checked here too, not only when a file is parsed.
    pub fn values(&self) -> Result<Vec<&[u8]>> {
        if self.cell_val_num != VAR_NUM {
            let cell = self.datatype.cell_size(self.cell_val_num) as usize;
            return Ok(self.data.chunks(cell.max(1)).collect());
        }
        let starts = value_starts(&self.offsets, self.data.len()).map_err(|reason| {
            SchemaError::invalid(format!("enumeration {} offsets", self.name), reason)
        })?;
        let ends = starts.iter().skip(1).copied().chain([self.data.len()]);
        Ok(starts
            .iter()
            .zip(ends)
            .map(|(&s, e)| self.data.get(s..e).unwrap_or_default())
            .collect())
    }
}

/// The start of each var-length value: whole `u64`s, never decreasing, none
/// beyond `data_len`, so slicing `data` with them cannot fail.
fn value_starts(offsets: &[u8], data_len: usize) -> std::result::Result<Vec<usize>, String> {
    if offsets.len() % 8 != 0 {
        return Err("not whole u64s".into());
    }
    let mut starts = Vec::with_capacity(offsets.len() / 8);
    for o in tdb_format::le::u64_values(offsets) {
        if o > data_len as u64 || starts.last().is_some_and(|&last| o < last as u64) {
            return Err(format!("bad offset {o}"));
        }
        starts.push(o as usize);
    }
    Ok(starts)
}

fn enumeration(input: &[u8]) -> SResult<'_, Enumeration> {
    let field = |what: &str| format!("enumeration {what}");
    let (input, version) = lift(le::u32("version")(input), || field("version"))?;
    if version > ENUMERATION_VERSION {
        return fail(SchemaError::invalid(
            field("version"),
            format!("{version} is newer"),
        ));
    }
    let (input, name) = name_u32(input, || field("name"))?;
    let (input, path) = name_u32(input, || field("path"))?;
    let (input, dt) = datatype(input, || field("datatype"))?;
    let (input, cell_val_num) = lift(le::u32("cell_val_num")(input), || field("cell_val_num"))?;
    let (input, ordered) = lift(le::bool("ordered")(input), || field("ordered"))?;
    let (mut input, data) = lift(le::bytes_u64("data")(input), || field("data"))?;
    let mut offsets: &[u8] = &[];
    if cell_val_num == VAR_NUM {
        (input, offsets) = lift(le::bytes_u64("offsets")(input), || field("offsets"))?;
        if let Err(reason) = value_starts(offsets, data.len()) {
            return fail(SchemaError::invalid(field("offsets"), reason));
        }
    } else if cell_val_num == 0 {
        return fail(SchemaError::invalid(field("cell_val_num"), "zero"));
    }
    Ok((
        input,
        Enumeration {
            version,
            name,
            path,
            datatype: dt,
            cell_val_num,
            ordered,
            data: data.to_vec(),
            offsets: offsets.to_vec(),
        },
    ))
}
