//! Consolidated fragment metadata (`<timestamped name>.meta`: under
//! `__fragment_meta/` from v12, in the array directory before): one generic
//! tile holding a `u32` fragment count, then per fragment a `u64`-prefixed
//! name and the `u64` offset of its footer inside the tile, then the
//! footers back to back (without their length fields). Before v9 the names
//! are the fragments' absolute URIs. (The spec's table omits the count.)

use super::footer::Footer;
use super::Reader;
use crate::tile_file::{read_tile_file, write_tile_file};
use crate::{FragmentError, Result};
use tdb_format::{le, FormatVersion};
use tdb_schema::ArraySchema;

/// One fragment of a consolidated fragment metadata file.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConsolidatedEntry {
    /// The name as stored (a URI before v9).
    pub stored_name: String,
    /// Where its footer starts in the unfiltered tile.
    pub offset: u64,
    /// The footer (not yet located in the fragment's own metadata file:
    /// see [`Footer::locate`]).
    pub footer: Footer,
}

impl ConsolidatedEntry {
    /// The fragment's name: the stored name's last path part.
    pub fn fragment_name(&self) -> &str {
        let s = self.stored_name.trim_end_matches('/');
        s.rsplit('/').next().unwrap_or(s)
    }
}

/// A parsed consolidated fragment metadata file.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConsolidatedFragmentMeta {
    /// The fragments, in file order.
    pub entries: Vec<ConsolidatedEntry>,
}

impl ConsolidatedFragmentMeta {
    /// Parses a whole `.meta` file. `schemas` finds a footer's schema by
    /// name; `file` names it in errors.
    pub fn parse<'s>(
        bytes: &[u8],
        key: Option<&[u8; 32]>,
        schemas: &dyn Fn(&str) -> Option<&'s ArraySchema>,
        file: &str,
    ) -> Result<Self> {
        let content = read_tile_file(file, "tile", bytes, key)?;
        Self::parse_content(&content, schemas, file)
    }

    /// Parses the unfiltered tile.
    pub fn parse_content<'s>(
        content: &[u8],
        schemas: &dyn Fn(&str) -> Option<&'s ArraySchema>,
        file: &str,
    ) -> Result<Self> {
        let mut r = Reader::new(content, file, "consolidated fragment metadata");
        let n = r.u32("fragment count")?;
        let mut heads = Vec::new();
        for _ in 0..n {
            let len = r.u64("fragment name size")?;
            let name = r.bytes(len, "fragment name")?;
            let name = String::from_utf8(name.to_vec())
                .map_err(|_| FragmentError::invalid(file, "fragment name", "not UTF-8"))?;
            let offset = r.u64("footer offset")?;
            heads.push((name, offset));
        }
        // Footers lie back to back: each ends where the next begins.
        let mut starts: Vec<usize> = heads
            .iter()
            .filter_map(|(_, o)| usize::try_from(*o).ok())
            .filter(|o| *o <= content.len())
            .collect();
        starts.sort_unstable();
        let mut entries = Vec::with_capacity(heads.len());
        for (stored_name, offset) in heads {
            let at = usize::try_from(offset)
                .ok()
                .filter(|o| *o <= content.len())
                .ok_or_else(|| {
                    FragmentError::invalid(
                        file,
                        format!("footer offset of {stored_name}"),
                        format!("{offset} beyond the tile's {} bytes", content.len()),
                    )
                })?;
            let end = starts
                .get(starts.partition_point(|o| *o <= at))
                .copied()
                .unwrap_or(content.len());
            let label = format!("{file}: footer of {stored_name}");
            let stretch = content.get(at..end).unwrap_or_default();
            let (footer, _) = Footer::parse_fields(stretch, schemas, &label)?;
            entries.push(ConsolidatedEntry {
                stored_name,
                offset,
                footer,
            });
        }
        Ok(ConsolidatedFragmentMeta { entries })
    }

    /// The unfiltered tile, the mirror of [`Self::parse_content`]; footer
    /// offsets are recomputed from the footers' sizes.
    pub fn write_content<'s>(
        &self,
        schemas: &dyn Fn(&str) -> Option<&'s ArraySchema>,
        file: &str,
    ) -> Result<Vec<u8>> {
        let mut footers = Vec::new();
        let mut sizes = Vec::new();
        for e in &self.entries {
            let schema = schemas(&e.footer.array_schema_name).ok_or_else(|| {
                FragmentError::missing(file, format!("schema {}", e.footer.array_schema_name))
            })?;
            let before = footers.len();
            e.footer.write_fields(schema, &mut footers);
            sizes.push(footers.len().saturating_sub(before) as u64);
        }
        let mut offset: u64 = self
            .entries
            .iter()
            .map(|e| (e.stored_name.len() as u64).saturating_add(16))
            .fold(4, u64::saturating_add);
        let mut out = Vec::new();
        le::put_u32(&mut out, self.entries.len() as u32);
        for (e, size) in self.entries.iter().zip(sizes) {
            le::put_bytes_u64(&mut out, e.stored_name.as_bytes());
            le::put_u64(&mut out, offset);
            offset = offset.saturating_add(size);
        }
        out.extend_from_slice(&footers);
        Ok(out)
    }

    /// The whole `.meta` file as TileDB writes it.
    pub fn write<'s>(
        &self,
        version: FormatVersion,
        key: Option<&[u8; 32]>,
        schemas: &dyn Fn(&str) -> Option<&'s ArraySchema>,
        file: &str,
    ) -> Result<Vec<u8>> {
        let content = self.write_content(schemas, file)?;
        write_tile_file(file, "tile", version, &content, key)
    }
}
