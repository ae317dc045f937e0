//! TileDB's RLE of fixed-size cells (`RLE::compress(value_size, ...)`).
//!
//! The encoding is a list of runs, each the cell's bytes followed by the run
//! length as a big-endian `u16`; a run longer than 65535 cells is split. The
//! cell size is the tile's (a fixed `cell_val_num` cell, an offset, a
//! validity byte), not the datatype's.

use crate::{FilterError, Result};

const NAME: &str = tdb_format::FilterType::Rle.name();
/// TileDB caps runs at what the two length bytes hold.
const MAX_RUN: u16 = u16::MAX;

/// Appends the RLE encoding of `input` (cells of `cell_size` bytes) to `out`.
pub(crate) fn compress(cell_size: usize, input: &[u8], out: &mut Vec<u8>) -> Result<()> {
    if cell_size == 0 {
        return Err(FilterError::bad_input(NAME, "cell size 0"));
    }
    if input.is_empty() {
        return Ok(());
    }
    // TileDB throws here, except for input shorter than one cell, which it
    // silently encodes as nothing (and so loses): refuse both.
    if input.len().checked_rem(cell_size) != Some(0) {
        return Err(FilterError::bad_input(
            NAME,
            format!(
                "{} bytes are not a whole number of {cell_size}-byte cells",
                input.len()
            ),
        ));
    }
    let mut cells = input.chunks_exact(cell_size);
    let Some(mut current) = cells.next() else {
        return Ok(());
    };
    let mut run: u16 = 1;
    for cell in cells {
        if cell == current && run < MAX_RUN {
            run = run.saturating_add(1);
        } else {
            out.extend_from_slice(current);
            out.extend_from_slice(&run.to_be_bytes());
            current = cell;
            run = 1;
        }
    }
    out.extend_from_slice(current);
    out.extend_from_slice(&run.to_be_bytes());
    Ok(())
}

/// Appends exactly `expected_len` decoded bytes to `out`, or errors.
pub(crate) fn decompress(
    cell_size: usize,
    input: &[u8],
    out: &mut Vec<u8>,
    expected_len: usize,
) -> Result<()> {
    if cell_size == 0 {
        return Err(FilterError::corrupt(NAME, "cell size 0"));
    }
    let run_size = cell_size.saturating_add(2);
    if input.len().checked_rem(run_size) != Some(0) {
        return Err(FilterError::corrupt(
            NAME,
            format!(
                "{} bytes are not a whole number of {run_size}-byte runs",
                input.len()
            ),
        ));
    }
    // Each run yields at most 65535 cells: a lying `expected_len` cannot
    // make us reserve more than the input can decode to.
    let bound = (input.len().checked_div(run_size).unwrap_or(0))
        .saturating_mul(usize::from(MAX_RUN))
        .saturating_mul(cell_size);
    out.reserve(expected_len.min(bound));
    let mut left = expected_len;
    for run in input.chunks_exact(run_size) {
        let (cell, len) = run.split_at(cell_size);
        let count = match len {
            &[hi, lo] => usize::from(u16::from_be_bytes([hi, lo])),
            _ => return Err(FilterError::corrupt(NAME, "a run without its length")),
        };
        let bytes = count.saturating_mul(cell_size);
        left = left.checked_sub(bytes).ok_or_else(|| {
            FilterError::corrupt(
                NAME,
                format!("runs decode to more than the {expected_len} bytes expected"),
            )
        })?;
        for _ in 0..count {
            out.extend_from_slice(cell);
        }
    }
    if left != 0 {
        return Err(FilterError::corrupt(
            NAME,
            format!(
                "runs decode to {} bytes, {expected_len} expected",
                expected_len.saturating_sub(left)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(cell: usize, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        compress(cell, input, &mut out).unwrap();
        out
    }

    fn dec(cell: usize, input: &[u8], len: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        decompress(cell, input, &mut out, len)?;
        Ok(out)
    }

    #[test]
    fn runs_are_cell_then_big_endian_length() {
        assert_eq!(enc(2, &[1, 2, 1, 2, 1, 2, 3, 4]), [1, 2, 0, 3, 3, 4, 0, 1]);
        assert_eq!(enc(1, &[7]), [7, 0, 1]);
        assert!(enc(4, &[]).is_empty());
        assert_eq!(dec(4, &[], 0).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn long_runs_split_at_65535() {
        let input = vec![9u8; 65536 + 10];
        let out = enc(1, &input);
        assert_eq!(out, [9, 0xff, 0xff, 9, 0, 11]);
        assert_eq!(dec(1, &out, input.len()).unwrap(), input);
    }

    #[test]
    fn partial_cells_are_refused() {
        let mut out = Vec::new();
        assert!(matches!(
            compress(4, &[1, 2, 3], &mut out),
            Err(FilterError::BadInput { .. })
        ));
        assert!(matches!(
            compress(4, &[1, 2, 3, 4, 5], &mut out),
            Err(FilterError::BadInput { .. })
        ));
        assert!(compress(0, &[1], &mut out).is_err());
    }

    #[test]
    fn corrupt_input_is_an_error() {
        let good = enc(8, &[5u8; 64]);
        assert_eq!(dec(8, &good, 64).unwrap(), vec![5u8; 64]);
        for n in 0..good.len() {
            assert!(dec(8, &good[..n], 64).is_err(), "truncated to {n}");
        }
        // More or fewer bytes than the metadata promised.
        assert!(dec(8, &good, 56).is_err());
        assert!(dec(8, &good, 72).is_err());
        // A huge claim with a tiny input allocates nothing much.
        assert!(dec(1, &[1, 0, 1], u32::MAX as usize).is_err());
        assert!(dec(0, &good, 64).is_err());
    }

    proptest! {
        #[test]
        fn round_trips(
            cell in 1usize..10,
            cells in proptest::collection::vec(0u8..3, 0..300),
        ) {
            // Few distinct values, so runs form.
            let input: Vec<u8> = cells
                .iter()
                .flat_map(|&v| std::iter::repeat_n(v, cell))
                .collect();
            let out = enc(cell, &input);
            prop_assert_eq!(dec(cell, &out, input.len()).unwrap(), input);
        }
    }
}
