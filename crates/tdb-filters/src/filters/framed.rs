//! The part framing BITSHUFFLE, BYTESHUFFLE and XOR share.
//!
//! Each of these filters rewrites every data part on its own into a part of
//! the same size, and writes all of them one after the other into a single
//! output part. Its metadata, prepended to the metadata of the filters before
//! it, is `u32 part count` then `u32 size` per part (little-endian), so that
//! reverse can find the part boundaries the transform depends on.

use crate::buffer::{take_data, to_u32, MetaReader, Parts, Unfiltered};
use crate::{FilterError, Result};

/// Forward: frames `parts` (the filter's own split of the data) and
/// transforms each with `transform`, which must append exactly as many bytes
/// as it is given.
pub(super) fn forward(
    filter: &'static str,
    metadata: Parts,
    parts: &[&[u8]],
    mut transform: impl FnMut(&[u8], &mut Vec<u8>) -> Result<()>,
) -> Result<(Parts, Parts)> {
    let count = to_u32(filter, parts.len(), "part count")?;
    let total: usize = parts.iter().map(|p| p.len()).sum();
    to_u32(filter, total, "input")?;
    let mut own = Vec::with_capacity(parts.len().saturating_mul(4).saturating_add(4));
    own.extend_from_slice(&count.to_le_bytes());
    let mut out = Vec::with_capacity(total);
    for &part in parts {
        own.extend_from_slice(&to_u32(filter, part.len(), "part")?.to_le_bytes());
        let start = out.len();
        transform(part, &mut out)?;
        debug_assert_eq!(
            out.len().saturating_sub(start),
            part.len(),
            "{filter} changed a part's size"
        );
    }
    let mut meta = Parts::one(own);
    meta.extend(metadata);
    Ok((meta, Parts::one(out)))
}

/// Reverse: reads the framing from the front of `metadata`, hands each part
/// of `data` to `transform` (which appends its decoding, of the same size, to
/// `out.data`) and passes the remaining metadata on. Data beyond the framed
/// parts cannot come from TileDB's forward and is refused.
pub(super) fn reverse(
    filter: &'static str,
    metadata: &[u8],
    data: &[u8],
    out: &mut Unfiltered,
    mut transform: impl FnMut(&[u8], &mut Vec<u8>) -> Result<()>,
) -> Result<()> {
    let mut meta = MetaReader::new(filter, metadata);
    let count = meta.u32("part count")?;
    let mut input = data;
    out.data.reserve(data.len());
    for _ in 0..count {
        let size = meta.u32("part size")? as usize;
        let part = take_data(filter, &mut input, size, "part")?;
        transform(part, &mut out.data)?;
    }
    if !input.is_empty() {
        return Err(FilterError::corrupt(
            filter,
            format!("{} data bytes beyond the {count} framed parts", input.len()),
        ));
    }
    out.pass_on_metadata(meta.rest());
    Ok(())
}
