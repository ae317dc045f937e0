//! RLE and dictionary encoding of var-length string tiles, which TileDB runs
//! over the whole tile with its offsets (format v12+ for ASCII RLE, v13+ for
//! ASCII dictionary, v17+ for UTF-8; `compress_var_string_coords`).
//!
//! The tile is one chunk whatever its size, and its offsets live only in the
//! encoding: TileDB writes each offsets tile as a bare `u64 0` (no chunks).
//! After the two part counts (`u32 0`, `u32 1`) the metadata holds
//! `u32 string bytes`, `u32 encoded bytes`, `u32 offsets tile bytes` (8 per
//! cell), then
//! - RLE: `u8 run-length width`, `u8 string-length width`; the data is, per
//!   run of equal cells, `run length`, `string length` (both big-endian at
//!   those widths) and the string;
//! - dictionary: `u8 id width`, `u8 string-length width`, `u32 dictionary
//!   bytes` and the dictionary (per distinct string in order of first
//!   appearance, its big-endian length and bytes); the data is one
//!   big-endian id per cell.
//!
//! Widths are the smallest of 1, 2, 4, 8 bytes that hold the largest value:
//! the longest run and the longest string; for ids, the number of *cells*
//! (not of distinct strings, so 256 cells take 2-byte ids).

use crate::buffer::{to_u32, MetaReader, Unfiltered};
use crate::{FilterError, Result};
use std::collections::HashMap;

/// Which string codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StringCodec {
    /// TileDB's string RLE.
    Rle,
    /// TileDB's dictionary encoding.
    Dictionary,
}

/// Forward: the metadata TileDB writes after the two part counts, and the
/// data. `offsets` are the cell start offsets into `data`.
pub(crate) fn forward(
    codec: StringCodec,
    data: &[u8],
    offsets: &[u64],
) -> Result<(Vec<u8>, Vec<u8>)> {
    let name = name(codec);
    let cells = split_cells(name, data, offsets)?;
    let max_len = cells.iter().map(|c| c.len()).max().unwrap_or(0) as u64;
    let mut meta = Vec::new();
    let mut out = Vec::new();
    let mut tail = Vec::new();
    match codec {
        StringCodec::Rle => {
            let mut runs: Vec<(&[u8], u64)> = Vec::new();
            for &cell in &cells {
                match runs.last_mut() {
                    Some((s, n)) if *s == cell => *n = n.saturating_add(1),
                    _ => runs.push((cell, 1)),
                }
            }
            let max_run = runs.iter().map(|r| r.1).max().unwrap_or(0);
            // TileDB sizes string lengths from every run but the last
            // (`calculate_compression_params`) and so truncates a last string
            // longer than the others; sizing from all runs gives its bytes
            // whenever its output is readable.
            let (rb, sb) = (bytesize(max_run), bytesize(max_len));
            for (s, n) in runs {
                put_be(n, rb, &mut out);
                put_be(s.len() as u64, sb, &mut out);
                out.extend_from_slice(s);
            }
            tail.extend_from_slice(&[rb, sb]);
        }
        StringCodec::Dictionary => {
            let (ib, sb) = (bytesize(cells.len() as u64), bytesize(max_len));
            let mut ids: HashMap<&[u8], u64> = HashMap::new();
            let mut dict = Vec::new();
            out.reserve(cells.len().saturating_mul(usize::from(ib)));
            for &cell in &cells {
                let next = ids.len() as u64;
                let id = *ids.entry(cell).or_insert_with(|| {
                    put_be(cell.len() as u64, sb, &mut dict);
                    dict.extend_from_slice(cell);
                    next
                });
                put_be(id, ib, &mut out);
            }
            tail.extend_from_slice(&[ib, sb]);
            tail.extend_from_slice(&to_u32(name, dict.len(), "dictionary")?.to_le_bytes());
            tail.extend_from_slice(&dict);
        }
    }
    meta.extend_from_slice(&to_u32(name, data.len(), "tile")?.to_le_bytes());
    meta.extend_from_slice(&to_u32(name, out.len(), "encoded tile")?.to_le_bytes());
    let offsets_bytes = offsets.len().saturating_mul(8);
    meta.extend_from_slice(&to_u32(name, offsets_bytes, "offsets tile")?.to_le_bytes());
    meta.extend_from_slice(&tail);
    Ok((meta, out))
}

/// Reverse: `metadata` is positioned after the two part counts; fills
/// `out.data` and `out.offsets`.
pub(crate) fn reverse(
    codec: StringCodec,
    metadata: &mut MetaReader<'_>,
    data: &[u8],
    out: &mut Unfiltered,
) -> Result<()> {
    let name = name(codec);
    let decoded_len = metadata.u32("tile size")? as usize;
    let encoded_len = metadata.u32("encoded size")? as usize;
    let offsets_bytes = metadata.u32("offsets tile size")?;
    if data.len() != encoded_len {
        return Err(FilterError::corrupt(
            name,
            format!("{} encoded bytes, metadata says {encoded_len}", data.len()),
        ));
    }
    if offsets_bytes % 8 != 0 {
        return Err(FilterError::corrupt(
            name,
            format!("offsets tile of {offsets_bytes} bytes is not whole u64 offsets"),
        ));
    }
    if data.is_empty() {
        return Err(FilterError::corrupt(name, "no encoded strings"));
    }
    let expect = Expect {
        name,
        bytes: decoded_len,
        cells: offsets_bytes as usize / 8,
    };
    match codec {
        StringCodec::Rle => {
            let rb = width(name, metadata.u8("run length width")?)?;
            let sb = width(name, metadata.u8("string length width")?)?;
            rle_decode(expect, data, rb, sb, out)
        }
        StringCodec::Dictionary => {
            let ib = width(name, metadata.u8("id width")?)?;
            let sb = width(name, metadata.u8("string length width")?)?;
            let dict_len = metadata.u32("dictionary size")? as usize;
            let dict = Dictionary::parse(name, metadata.take(dict_len, "dictionary")?, sb)?;
            dictionary_decode(expect, data, ib, &dict, out)
        }
    }
}

fn name(codec: StringCodec) -> &'static str {
    match codec {
        StringCodec::Rle => tdb_format::FilterType::Rle,
        StringCodec::Dictionary => tdb_format::FilterType::Dictionary,
    }
    .name()
}

/// What the metadata promises the decoding yields.
#[derive(Clone, Copy)]
struct Expect {
    name: &'static str,
    bytes: usize,
    cells: usize,
}

impl Expect {
    /// Counts `n` more cells of `len` bytes into the running totals, or
    /// errors once they pass the promise.
    fn add(&self, totals: &mut (usize, usize), n: u64, len: usize) -> Result<()> {
        let cells = usize::try_from(n)
            .ok()
            .and_then(|n| totals.0.checked_add(n))
            .filter(|&c| c <= self.cells);
        let bytes = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(len))
            .and_then(|b| totals.1.checked_add(b))
            .filter(|&b| b <= self.bytes);
        match (cells, bytes) {
            (Some(c), Some(b)) => {
                *totals = (c, b);
                Ok(())
            }
            _ => Err(self.mismatch("more")),
        }
    }

    fn check(&self, totals: (usize, usize)) -> Result<()> {
        if totals == (self.cells, self.bytes) {
            Ok(())
        } else {
            Err(self.mismatch("fewer"))
        }
    }

    fn mismatch(&self, what: &str) -> FilterError {
        FilterError::corrupt(
            self.name,
            format!(
                "encoding holds {what} cells or bytes than the {} cells of {} bytes promised",
                self.cells, self.bytes
            ),
        )
    }
}

fn rle_decode(
    expect: Expect,
    data: &[u8],
    rb: usize,
    sb: usize,
    out: &mut Unfiltered,
) -> Result<()> {
    // The runs are walked twice: checked against the promise before
    // anything is allocated, then decoded (a list of them was 24 bytes a
    // run beside the tile at its peak: three times its offsets where
    // every cell is a run).
    let mut totals = (0, 0);
    for run in rle_runs(expect.name, data, rb, sb) {
        let (n, s) = run?;
        expect.add(&mut totals, n, s.len())?;
    }
    expect.check(totals)?;
    // Checked against the promise, the totals bound these allocations.
    out.data.reserve(expect.bytes);
    out.offsets.reserve(expect.cells);
    let base = out.data.len();
    for run in rle_runs(expect.name, data, rb, sb) {
        let (n, s) = run?;
        for _ in 0..n {
            out.offsets.push(out.data.len().saturating_sub(base) as u64);
            out.data.extend_from_slice(s);
        }
    }
    Ok(())
}

/// The runs of string RLE `data` (run-length and string-length widths
/// `rb`, `sb`): each run's length and string, in order.
fn rle_runs<'a>(
    name: &'static str,
    data: &'a [u8],
    rb: usize,
    sb: usize,
) -> impl Iterator<Item = Result<(u64, &'a [u8])>> + 'a {
    entries(data, move |rest| {
        let n = get_be(crate::buffer::take_data(name, rest, rb, "run length")?);
        Ok((n, take_string(name, rest, sb, ("string length", "string"))?))
    })
}

/// The entries `next` takes one by one off the front of `data`, until it
/// is empty or an entry is malformed (the last item then).
fn entries<'a, T: 'a, F: FnMut(&mut &'a [u8]) -> Result<T> + 'a>(
    mut data: &'a [u8],
    mut next: F,
) -> impl Iterator<Item = Result<T>> + 'a {
    std::iter::from_fn(move || {
        if data.is_empty() {
            return None;
        }
        let entry = next(&mut data);
        if entry.is_err() {
            data = &[];
        }
        Some(entry)
    })
}

/// A string after its big-endian length of `sb` bytes, off the front of
/// `data` (`what`: the length's and the string's names, for errors).
fn take_string<'a>(
    name: &'static str,
    data: &mut &'a [u8],
    sb: usize,
    what: (&str, &str),
) -> Result<&'a [u8]> {
    let (len_what, what) = what;
    let len = get_be(crate::buffer::take_data(name, data, sb, len_what)?);
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    crate::buffer::take_data(name, data, len, what)
}

/// A parsed dictionary: its bytes and where each word ends in them (a
/// word starts `sb` bytes after the end of the one before, past its
/// length). Four bytes a word: a list of slices, sixteen, was 1.6 MB
/// beside a 100,000-cell tile of distinct strings at its peak.
struct Dictionary<'a> {
    bytes: &'a [u8],
    ends: Vec<u32>,
    sb: usize,
}

impl<'a> Dictionary<'a> {
    fn parse(name: &'static str, bytes: &'a [u8], sb: usize) -> Result<Self> {
        if bytes.is_empty() {
            return Err(FilterError::corrupt(name, "empty dictionary"));
        }
        // Each entry's end, walked twice: counted, then listed in a table
        // of that size. (The metadata sizes the dictionary in a u32: its
        // ends fit one.)
        let ends_of = || {
            entries(bytes, |rest| {
                take_string(
                    name,
                    rest,
                    sb,
                    ("dictionary entry length", "dictionary entry"),
                )?;
                u32::try_from(bytes.len().saturating_sub(rest.len()))
                    .map_err(|_| FilterError::corrupt(name, "a dictionary past 4 GiB"))
            })
        };
        let mut words = 0usize;
        for end in ends_of() {
            end?;
            words = words.saturating_add(1);
        }
        let mut ends = Vec::with_capacity(words);
        for end in ends_of() {
            ends.push(end?);
        }
        Ok(Dictionary { bytes, ends, sb })
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    /// Word `i`, if the dictionary has one.
    fn word(&self, i: usize) -> Option<&'a [u8]> {
        let end = usize::try_from(*self.ends.get(i)?).ok()?;
        let start = match i.checked_sub(1) {
            Some(before) => usize::try_from(*self.ends.get(before)?).ok()?,
            None => 0,
        };
        self.bytes.get(start.checked_add(self.sb)?..end)
    }
}

fn dictionary_decode(
    expect: Expect,
    data: &[u8],
    ib: usize,
    dict: &Dictionary<'_>,
    out: &mut Unfiltered,
) -> Result<()> {
    let name = expect.name;
    if data.len().checked_rem(ib) != Some(0) {
        return Err(FilterError::corrupt(
            name,
            format!("{} bytes are not whole {ib}-byte ids", data.len()),
        ));
    }
    let word = |id: &[u8]| {
        usize::try_from(get_be(id))
            .ok()
            .and_then(|i| dict.word(i))
            .ok_or_else(|| {
                FilterError::corrupt(
                    name,
                    format!(
                        "id {} outside the {}-word dictionary",
                        get_be(id),
                        dict.len()
                    ),
                )
            })
    };
    let mut totals = (0, 0);
    for id in data.chunks_exact(ib) {
        expect.add(&mut totals, 1, word(id)?.len())?;
    }
    expect.check(totals)?;
    out.data.reserve(expect.bytes);
    out.offsets.reserve(expect.cells);
    let base = out.data.len();
    for id in data.chunks_exact(ib) {
        out.offsets.push(out.data.len().saturating_sub(base) as u64);
        out.data.extend_from_slice(word(id)?);
    }
    Ok(())
}

/// The cells of a tile from their start offsets, which must start at 0 and
/// not decrease (TileDB trusts them; a tile without cells is undefined).
fn split_cells<'a>(name: &'static str, data: &'a [u8], offsets: &[u64]) -> Result<Vec<&'a [u8]>> {
    if offsets.first() != Some(&0) {
        return Err(FilterError::bad_input(
            name,
            "var-length string offsets must start at 0 (and a tile hold a cell)",
        ));
    }
    let ends = offsets.iter().skip(1).copied().chain([data.len() as u64]);
    offsets
        .iter()
        .zip(ends)
        .map(|(&start, end)| {
            usize::try_from(start)
                .ok()
                .zip(usize::try_from(end).ok())
                .and_then(|(s, e)| data.get(s..e))
                .ok_or_else(|| {
                    FilterError::bad_input(
                        name,
                        format!("offset {start}..{end} outside the {}-byte tile", data.len()),
                    )
                })
        })
        .collect()
}

/// TileDB's `compute_bytesize`.
fn bytesize(max: u64) -> u8 {
    match max {
        0..=0xff => 1,
        0x100..=0xffff => 2,
        0x1_0000..=0xffff_ffff => 4,
        _ => 8,
    }
}

/// How TileDB's decoders read a stored width byte (`<= 1`, `<= 2`, `<= 4`,
/// else 8); 0 makes them throw.
fn width(name: &'static str, stored: u8) -> Result<usize> {
    match stored {
        0 => Err(FilterError::corrupt(name, "field width 0")),
        1 | 2 => Ok(usize::from(stored)),
        3 | 4 => Ok(4),
        _ => Ok(8),
    }
}

fn put_be(v: u64, width: u8, out: &mut Vec<u8>) {
    let bytes = v.to_be_bytes();
    let skip = 8usize.saturating_sub(usize::from(width));
    out.extend_from_slice(bytes.get(skip..).unwrap_or_default());
}

/// A big-endian number of 1 to 8 bytes.
fn get_be(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0, |v, &b| (v << 8) | u64::from(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tile(cells: &[&[u8]]) -> (Vec<u8>, Vec<u64>) {
        let mut data = Vec::new();
        let mut offsets = Vec::new();
        for c in cells {
            offsets.push(data.len() as u64);
            data.extend_from_slice(c);
        }
        (data, offsets)
    }

    fn back(codec: StringCodec, meta: &[u8], data: &[u8]) -> Result<Unfiltered> {
        let mut out = Unfiltered::default();
        let mut reader = MetaReader::new(name(codec), meta);
        reverse(codec, &mut reader, data, &mut out)?;
        assert!(reader.rest().is_empty());
        Ok(out)
    }

    fn le32(v: u32) -> [u8; 4] {
        v.to_le_bytes()
    }

    #[test]
    fn rle_layout() {
        let (data, offsets) = tile(&[b"ab", b"ab", b"", b"c"]);
        let (meta, out) = forward(StringCodec::Rle, &data, &offsets).unwrap();
        assert_eq!(out, [2, 2, b'a', b'b', 1, 0, 1, 1, b'c']);
        let mut want = Vec::new();
        want.extend_from_slice(&le32(5));
        want.extend_from_slice(&le32(9));
        want.extend_from_slice(&le32(32));
        want.extend_from_slice(&[1, 1]);
        assert_eq!(meta, want);
        let u = back(StringCodec::Rle, &meta, &out).unwrap();
        assert_eq!((u.data, u.offsets), (data, offsets));
    }

    #[test]
    fn dictionary_layout() {
        let (data, offsets) = tile(&[b"xy", b"z", b"xy", b""]);
        let (meta, out) = forward(StringCodec::Dictionary, &data, &offsets).unwrap();
        assert_eq!(out, [0, 1, 0, 2]);
        let mut want = Vec::new();
        want.extend_from_slice(&le32(5));
        want.extend_from_slice(&le32(4));
        want.extend_from_slice(&le32(32));
        want.extend_from_slice(&[1, 1]);
        want.extend_from_slice(&le32(6));
        want.extend_from_slice(&[2, b'x', b'y', 1, b'z', 0]);
        assert_eq!(meta, want);
        let u = back(StringCodec::Dictionary, &meta, &out).unwrap();
        assert_eq!((u.data, u.offsets), (data, offsets));
    }

    #[test]
    fn widths_grow_with_cells_runs_and_lengths() {
        // 256 cells of one string: ids take 2 bytes, the run takes 2 bytes.
        let cells = vec![&b"q"[..]; 256];
        let (data, offsets) = tile(&cells);
        let (meta, out) = forward(StringCodec::Dictionary, &data, &offsets).unwrap();
        assert_eq!(meta[12..14], [2, 1]);
        assert_eq!(out.len(), 512);
        let (meta, out) = forward(StringCodec::Rle, &data, &offsets).unwrap();
        assert_eq!(meta[12..], [2, 1]);
        assert_eq!(out, [1, 0, 1, b'q']);
        assert_eq!(
            back(StringCodec::Rle, &meta, &out).unwrap().offsets,
            offsets
        );
        // A long last string (TileDB would size lengths without it).
        let long = vec![b'L'; 300];
        let (data, offsets) = tile(&[b"a", &long]);
        let (meta, out) = forward(StringCodec::Rle, &data, &offsets).unwrap();
        assert_eq!(meta[12..], [1, 2]);
        assert_eq!(back(StringCodec::Rle, &meta, &out).unwrap().data, data);
    }

    #[test]
    fn bad_offsets_are_refused() {
        for offsets in [&[][..], &[1], &[0, 3, 2], &[0, 9]] {
            for codec in [StringCodec::Rle, StringCodec::Dictionary] {
                assert!(
                    matches!(
                        forward(codec, b"abcd", offsets),
                        Err(FilterError::BadInput { .. })
                    ),
                    "{offsets:?}"
                );
            }
        }
    }

    #[test]
    fn stored_widths_map_like_tiledb() {
        assert!(width("RLE", 0).is_err());
        assert_eq!(
            [1, 2, 3, 4, 5, 8, 255].map(|w| width("RLE", w).unwrap()),
            [1, 2, 4, 4, 8, 8, 8]
        );
    }

    #[test]
    fn corrupt_input_is_an_error() {
        let (data, offsets) = tile(&[b"one", b"two", b"two", b"", b"three"]);
        for codec in [StringCodec::Rle, StringCodec::Dictionary] {
            let (meta, out) = forward(codec, &data, &offsets).unwrap();
            for n in 0..meta.len() {
                assert!(back(codec, &meta[..n], &out).is_err(), "{codec:?} meta {n}");
            }
            for n in 0..out.len() {
                let mut m = meta.clone();
                m[4..8].copy_from_slice(&le32(n as u32));
                assert!(back(codec, &m, &out[..n]).is_err(), "{codec:?} data {n}");
            }
            // Wrong promised sizes, offsets tile not whole u64s, huge claims.
            for (at, v) in [(0, 13), (0, 15), (8, 32), (8, 48), (8, 41), (0, u32::MAX)] {
                let mut m = meta.clone();
                m[at..at + 4].copy_from_slice(&le32(v));
                assert!(back(codec, &m, &out).is_err(), "{codec:?} {at}={v}");
            }
            // Zero widths.
            for at in [12, 13] {
                let mut m = meta.clone();
                m[at] = 0;
                assert!(back(codec, &m, &out).is_err());
            }
        }
        // A run of 2^64-1 empty strings in three bytes.
        let mut meta = Vec::new();
        for v in [0, 3, 80] {
            meta.extend_from_slice(&le32(v));
        }
        meta.extend_from_slice(&[8, 1]);
        let data = [0xff; 8].into_iter().chain([0]).collect::<Vec<_>>();
        let mut m = meta.clone();
        m[4..8].copy_from_slice(&le32(9));
        assert!(back(StringCodec::Rle, &m, &data).is_err());
        // A dictionary id past its end.
        let (data, offsets) = tile(&[b"a", b"b"]);
        let (meta, mut out) = forward(StringCodec::Dictionary, &data, &offsets).unwrap();
        out[1] = 2;
        assert!(back(StringCodec::Dictionary, &meta, &out).is_err());
    }

    proptest! {
        #[test]
        fn round_trips(
            cells in proptest::collection::vec(
                prop_oneof![Just(Vec::new()), proptest::collection::vec(b'a'..b'd', 0..4)],
                1..300,
            ),
        ) {
            let refs: Vec<&[u8]> = cells.iter().map(Vec::as_slice).collect();
            let (data, offsets) = tile(&refs);
            for codec in [StringCodec::Rle, StringCodec::Dictionary] {
                let (meta, out) = forward(codec, &data, &offsets).unwrap();
                let u = back(codec, &meta, &out).unwrap();
                prop_assert_eq!(&u.data, &data);
                prop_assert_eq!(&u.offsets, &offsets);
            }
        }
    }
}
