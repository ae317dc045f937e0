//! liblz4's block compressor as TileDB calls it (`LZ4_compress_default`:
//! acceleration 1, no dictionary, a 16 KiB hash table), ported step for
//! step so that tdb's LZ4 tiles are TileDB's bytes. lz4_flex's encoder
//! finds other matches: its tiles decode the same but differ in size, and
//! the size decides where `max_fragment_size` splits a write.
//!
//! Only the writer's own bytes come here, never a file's, and the guards
//! are liblz4's: every hashed or compared position is at most 11 bytes
//! short of the end (`MFLIMIT`), a match lies before its position and
//! extends to 5 bytes short of the end at most, so no index is out of
//! bounds and no sum wraps.
#![allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

const MINMATCH: usize = 4;
const LASTLITERALS: usize = 5;
const MFLIMIT: usize = 12;
/// Below this, no match is searched: every byte is a literal.
const MIN_LENGTH: usize = MFLIMIT + 1;
/// Below this, positions fit 16 bits (liblz4's `byU16` table).
const LIMIT_64K: usize = 65536 + MFLIMIT - 1;
const SKIP_TRIGGER: u32 = 6;
/// `LZ4_MEMORY_USAGE` 14: 4096 u32 entries, or 8192 u16 ones.
const HASHLOG: u32 = 12;
const DISTANCE_MAX: usize = 65535;
const ML_MASK: usize = 15;
const RUN_MASK: usize = 15;

fn read32(s: &[u8], p: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&s[p..p + 4]);
    u32::from_le_bytes(b)
}

fn read64(s: &[u8], p: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&s[p..p + 8]);
    u64::from_le_bytes(b)
}

/// `LZ4_hashPosition` on a little-endian 64-bit machine: 4 bytes hashed
/// into 13 bits (`byU16`), else 5 bytes into 12 (`byU32`).
fn hash(s: &[u8], p: usize, small: bool) -> usize {
    if small {
        (read32(s, p).wrapping_mul(2_654_435_761) >> (32 - (HASHLOG + 1))) as usize
    } else {
        ((read64(s, p) << 24).wrapping_mul(889_523_592_379) >> (64 - HASHLOG)) as usize
    }
}

/// `LZ4_count`: how many bytes from `a` equal those from `b` (`b < a`),
/// `a` stopping before `limit`.
fn count(s: &[u8], mut a: usize, mut b: usize, limit: usize) -> usize {
    let start = a;
    while a < limit && s[a] == s[b] {
        a += 1;
        b += 1;
    }
    a - start
}

/// Appends `n` as a length's continuation bytes (after the token's 15).
fn push_len(out: &mut Vec<u8>, mut n: usize) {
    while n >= 255 {
        out.push(255);
        n -= 255;
    }
    out.push(n as u8);
}

/// Appends `src` compressed as one LZ4 block, the bytes liblz4's
/// `LZ4_compress_default` writes (inputs up to `LZ4_MAX_INPUT_SIZE`).
pub(crate) fn compress(src: &[u8], out: &mut Vec<u8>) {
    if src.is_empty() {
        out.push(0);
        return;
    }
    let small = src.len() < LIMIT_64K;
    let slots = 1 << (HASHLOG + u32::from(small));
    let mut table = vec![0u32; slots];
    let iend = src.len();
    let mflimit_plus_one = iend.saturating_sub(MFLIMIT) + 1;
    let matchlimit = iend.saturating_sub(LASTLITERALS);
    let mut anchor = 0usize;
    if src.len() >= MIN_LENGTH {
        table[hash(src, 0, small)] = 0;
        let mut ip = 1usize;
        let mut forward_h = hash(src, ip, small);
        'main: loop {
            // Find a match.
            let mut m;
            {
                let mut forward = ip;
                let mut step = 1usize;
                let mut search = 1u32 << SKIP_TRIGGER;
                loop {
                    let h = forward_h;
                    let current = forward;
                    m = table[h] as usize;
                    ip = forward;
                    forward += step;
                    step = (search >> SKIP_TRIGGER) as usize;
                    search += 1;
                    if forward > mflimit_plus_one {
                        break 'main;
                    }
                    forward_h = hash(src, forward, small);
                    table[h] = current as u32;
                    // byU16: every position is within the maximum distance.
                    if !small && m + DISTANCE_MAX < current {
                        continue;
                    }
                    if read32(src, m) == read32(src, ip) {
                        break;
                    }
                }
            }
            // Catch up: extend the match backwards.
            while ip > anchor && m > 0 && src[ip - 1] == src[m - 1] {
                ip -= 1;
                m -= 1;
            }
            // Literals.
            let lit = ip - anchor;
            let mut token = out.len();
            out.push(0);
            if lit >= RUN_MASK {
                out[token] = (RUN_MASK << 4) as u8;
                push_len(out, lit - RUN_MASK);
            } else {
                out[token] = (lit << 4) as u8;
            }
            out.extend_from_slice(&src[anchor..ip]);
            loop {
                // _next_match: the offset, then the match length.
                out.extend_from_slice(&((ip - m) as u16).to_le_bytes());
                let code = count(src, ip + MINMATCH, m + MINMATCH, matchlimit);
                ip += code + MINMATCH;
                if code >= ML_MASK {
                    out[token] += ML_MASK as u8;
                    push_len(out, code - ML_MASK);
                } else {
                    out[token] += code as u8;
                }
                anchor = ip;
                if ip >= mflimit_plus_one {
                    break 'main;
                }
                // Fill the table.
                table[hash(src, ip - 2, small)] = (ip - 2) as u32;
                // Test the next position: a match there needs no literals.
                let h = hash(src, ip, small);
                m = table[h] as usize;
                table[h] = ip as u32;
                if (small || m + DISTANCE_MAX >= ip) && read32(src, m) == read32(src, ip) {
                    token = out.len();
                    out.push(0);
                    continue;
                }
                break;
            }
            ip += 1;
            forward_h = hash(src, ip, small);
        }
    }
    // The last literals.
    let last = iend - anchor;
    if last >= RUN_MASK {
        out.push((RUN_MASK << 4) as u8);
        push_len(out, last - RUN_MASK);
    } else {
        out.push((last << 4) as u8);
    }
    out.extend_from_slice(&src[anchor..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// A BITSHUFFLE'd tile of 18 FLOAT64 cells (conformance case
    /// rand_10700) and the block TileDB 2.30 wrote for it: a match of
    /// offset 2 that catching up moves back (lz4_flex wrote 140 bytes).
    #[test]
    fn a_tile_compresses_to_tiledbs_bytes() {
        let tile = hex("56e23cdf979bf59904e17223ae4b064394d6850ef4d17476f203a81e5e4b3283cd8643d47c24c5a320193bf328c1ccb6a7937704153402392efe0003ca8b6f13521c0d33451126fc63eece99c676529699530e94b2be4bc61fc9c279a322d198fba5a51573ea470b4331acdf00580058005800580058005800580058ffa77836448b6ce7fb2920404c378941602527c0");
        let want = hex("fa5f56e23cdf979bf59904e17223ae4b064394d6850ef4d17476f203a81e5e4b3283cd8643d47c24c5a320193bf328c1ccb6a7937704153402392efe0003ca8b6f13521c0d33451126fc63eece99c676529699530e94b2be4bc61fc9c279a322d198fba5a51573ea470b4331acdf00580200f005ffa77836448b6ce7fb2920404c378941602527c0");
        let mut out = Vec::new();
        compress(&tile, &mut out);
        assert_eq!(out, want);
    }

    /// Whatever the input, the block decodes to it (both table sizes).
    #[test]
    fn blocks_decode_to_their_input() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for len in [0, 1, 12, 13, 14, 100, 4096, 65_546, 65_547, 70_000, 200_000] {
            let data: Vec<u8> = (0..len)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x % 4 == 0 {
                        x as u8
                    } else {
                        (i % 251 / 7) as u8
                    }
                })
                .collect();
            let mut out = Vec::new();
            compress(&data, &mut out);
            let back = lz4_flex::block::decompress(&out, len).unwrap();
            assert_eq!(back, data, "{len} bytes");
        }
    }
}
