//! What filtering keeps from one chunk to the next on one thread: the
//! intermediate buffers, the stage datatypes, and the codec contexts whose
//! set-up costs more than a small chunk's coding (a zstd context is a
//! ~160 KiB allocation and, compressing, tables to clear; zlib's window
//! 32 KiB; AES's key schedule).

use crate::buffer::Unfiltered;
use crate::{FilterError, Result};
use aes_gcm::{Aes256Gcm, KeyInit};
use tdb_format::Datatype;

/// Codec contexts made on first use and reused after.
///
/// `Debug` is written by hand so the key never reaches logs or panics.
#[derive(Default)]
pub struct Codecs {
    zstd: Option<zstd::zstd_safe::DCtx<'static>>,
    /// The compression context and the level it is set to.
    zstd_out: Option<(i32, zstd::bulk::Compressor<'static>)>,
    inflate: Option<flate2::Decompress>,
    /// The cipher and the key it was made for: a workspace may serve
    /// several arrays in turn, and a cipher for another key must not be
    /// reused.
    aes: Option<([u8; 32], Aes256Gcm)>,
}

impl std::fmt::Debug for Codecs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codecs")
            .field("zstd", &self.zstd.is_some())
            .field("zstd_out", &self.zstd_out.is_some())
            .field("inflate", &self.inflate.is_some())
            .field("aes", &self.aes.is_some())
            .finish()
    }
}

impl Codecs {
    /// The zstd decompression context, for whole frames and streams
    /// alike (a stream's own context, made for each chunk that compresses
    /// more than 64-fold, was 2% of a budgeted sparse read's time, and
    /// its window fresh pages).
    pub(crate) fn zstd(
        &mut self,
        filter: &'static str,
    ) -> Result<&mut zstd::zstd_safe::DCtx<'static>> {
        let d = match self.zstd.take() {
            Some(d) => d,
            None => zstd::zstd_safe::DCtx::try_create()
                .ok_or_else(|| FilterError::unsupported(filter, "no zstd context"))?,
        };
        Ok(self.zstd.insert(d))
    }

    /// The zstd compression context, at `level`.
    pub(crate) fn zstd_compressor(
        &mut self,
        filter: &'static str,
        level: i32,
    ) -> Result<&mut zstd::bulk::Compressor<'static>> {
        let no =
            |e: std::io::Error| FilterError::unsupported(filter, format!("no zstd context: {e}"));
        let c = match self.zstd_out.take() {
            Some((l, c)) if l == level => c,
            Some((_, mut c)) => {
                c.set_compression_level(level).map_err(no)?;
                c
            }
            None => zstd::bulk::Compressor::new(level).map_err(no)?,
        };
        Ok(&mut self.zstd_out.insert((level, c)).1)
    }

    /// The zlib inflate state, reset for a new stream.
    pub(crate) fn inflate(&mut self) -> &mut flate2::Decompress {
        let d = self
            .inflate
            .get_or_insert_with(|| flate2::Decompress::new(true));
        d.reset(true);
        d
    }

    /// The AES-256-GCM cipher for `key`.
    pub(crate) fn cipher(&mut self, key: &[u8; 32]) -> &Aes256Gcm {
        let kept = match self.aes.take() {
            Some((k, c)) if &k == key => (k, c),
            _ => (*key, Aes256Gcm::new(key.into())),
        };
        &self.aes.insert(kept).1
    }
}

/// One thread's state for filtering chunks, either way: give the same
/// workspace to every chunk a thread codes, so nothing above is set up
/// twice.
#[derive(Debug, Default)]
pub struct Workspace {
    /// Intermediate outputs; stages alternate between them.
    pub(crate) a: Unfiltered,
    pub(crate) b: Unfiltered,
    /// The input datatype of each stage of the pipeline last run.
    pub(crate) types: Vec<Datatype>,
    pub(crate) codecs: Codecs,
}

impl Workspace {
    /// Intermediate capacity a workspace keeps from one chunk to the next:
    /// sixteen of TileDB's 64 KiB chunks. A tile decoded as one chunk (a
    /// string RLE or dictionary tile, WebP) passes its stages through
    /// buffers its size, and a workspace lives as long as its thread: such
    /// buffers are let go after the chunk, not kept for every read after.
    pub const KEPT: usize = 1 << 20;

    /// Lets go of intermediate buffers past [`Workspace::KEPT`].
    pub(crate) fn trim(&mut self) {
        self.a.trim(Self::KEPT);
        self.b.trim(Self::KEPT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Filter, FilterPipeline, Stage};
    use tdb_format::FormatVersion;

    /// One workspace codes chunks of several pipelines in turn (decoding a
    /// corrupt chunk among them), and each comes out as a fresh workspace
    /// codes it: no codec state leaks from one chunk (or one failure) to
    /// the next.
    #[test]
    fn one_workspace_serves_many_chunks_and_pipelines() {
        let key = [7u8; 32];
        let st = Stage::new(Datatype::Int32, FormatVersion::WRITTEN).with_key(Some(&key));
        let pipelines = [
            FilterPipeline::new([Filter::Zstd { level: 3 }]),
            FilterPipeline::new([Filter::Byteshuffle, Filter::Gzip { level: 6 }]),
            FilterPipeline::new([Filter::Zstd { level: 1 }, Filter::InternalAes256Gcm]),
            FilterPipeline::new([Filter::Gzip { level: 1 }]),
            // NONE filters are skipped, wherever they stand.
            FilterPipeline::new([Filter::None, Filter::Zstd { level: 1 }, Filter::None]),
            FilterPipeline::new([Filter::None, Filter::None]),
        ];
        let (mut ws, mut fws) = (Workspace::default(), Workspace::default());
        for round in 0..3i32 {
            for (k, p) in pipelines.iter().enumerate() {
                let cells: Vec<u8> = (0..5000i32)
                    .flat_map(|i| (i / (k as i32 + 2) + round).to_le_bytes())
                    .collect();
                let (m, d) = p.forward_chunk(&st, &mut fws, cells.clone()).unwrap();
                if !p.filters.contains(&Filter::InternalAes256Gcm) {
                    // Codec contexts reused at other levels code as new ones.
                    let fresh = p
                        .forward_chunk(&st, &mut Workspace::default(), cells.clone())
                        .unwrap();
                    assert_eq!((&m, &d), (&fresh.0, &fresh.1), "round {round} pipeline {k}");
                }
                // A chunk cut short fails and leaves the workspace usable.
                let mut out = Unfiltered::default();
                if k < 5 {
                    assert!(p
                        .reverse_chunk(&st, &mut ws, &m, &d[..d.len() / 2], &mut out)
                        .is_err());
                }
                out.clear();
                p.reverse_chunk(&st, &mut ws, &m, &d, &mut out).unwrap();
                assert_eq!(out.data, cells, "round {round} pipeline {k}");
                // Appends: a second chunk lands after the first.
                p.reverse_chunk(&st, &mut ws, &m, &d, &mut out).unwrap();
                assert_eq!(out.data.len(), 2 * cells.len());
                assert_eq!(&out.data[cells.len()..], &cells[..]);
            }
        }
    }

    /// A chunk as large as a tile decoded as one (string RLE and
    /// dictionary tiles, WebP) leaves no intermediate buffer its size in
    /// the workspace, which lives as long as its thread; a chunk of
    /// TileDB's usual 64 KiB leaves its buffers for the next.
    #[test]
    fn a_workspace_keeps_no_intermediate_buffer_past_its_limit() {
        let st = Stage::new(Datatype::Int32, FormatVersion::WRITTEN);
        let p = FilterPipeline::new([Filter::Byteshuffle, Filter::Zstd { level: 1 }]);
        let mut ws = Workspace::default();
        for (cells, kept) in [(1usize << 20, false), (16 << 10, true)] {
            let input: Vec<u8> = (0..cells as u32)
                .flat_map(|i| (i.wrapping_mul(2_654_435_761) >> 12).to_le_bytes())
                .collect();
            let (m, d) = p.forward_chunk(&st, &mut ws, input.clone()).unwrap();
            let mut out = Unfiltered::default();
            p.reverse_chunk(&st, &mut ws, &m, &d, &mut out).unwrap();
            assert_eq!(out.data, input);
            let held = [&ws.a, &ws.b].map(|u| u.data.capacity());
            assert!(held.iter().all(|&c| c <= Workspace::KEPT), "{held:?}");
            assert_eq!(
                held.iter().any(|&c| c > 0),
                kept,
                "{held:?} after {cells} cells"
            );
        }
    }

    /// One zstd context decodes frames whole and, past 64-fold (a run of
    /// zeros), as streams, in any order, a stream cut short among them.
    #[test]
    fn one_zstd_context_serves_whole_frames_and_streams() {
        let st = Stage::new(Datatype::Int32, FormatVersion::WRITTEN);
        let p = FilterPipeline::new([Filter::Zstd { level: 3 }]);
        let mut fws = Workspace::default();
        let varied: Vec<u8> = (0..5000u32)
            .flat_map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes())
            .collect();
        let zeros = vec![0u8; 60_000];
        let chunks = [varied, zeros].map(|cells| {
            (
                p.forward_chunk(&st, &mut fws, cells.clone()).unwrap(),
                cells,
            )
        });
        let (zm, zd) = &chunks[1].0;
        assert!(zd.len() * 64 < 60_000, "{} bytes", zd.len());
        // The stream cut short, its metadata saying so (part counts, then
        // original and compressed sizes).
        let cut = &zd[..zd.len() - 3];
        let mut cut_meta = zm.clone();
        cut_meta[12..16].copy_from_slice(&(cut.len() as u32).to_le_bytes());
        let mut ws = Workspace::default();
        for k in [0, 1, 1, 0, 1, 0] {
            let ((m, d), cells) = &chunks[k];
            let mut out = Unfiltered::default();
            let got = p.reverse_chunk(&st, &mut ws, &cut_meta, cut, &mut out);
            assert!(matches!(got, Err(FilterError::Corrupt { .. })), "{got:?}");
            out.clear();
            p.reverse_chunk(&st, &mut ws, m, d, &mut out).unwrap();
            assert_eq!(&out.data, cells, "chunk {k}");
        }
    }

    /// A zlib stream that decodes to more than its metadata promises, or
    /// that stops before its end, is corrupt.
    #[test]
    fn gzip_parts_must_decode_to_exactly_their_promise() {
        use std::io::Write;
        let st = Stage::new(Datatype::UInt8, FormatVersion::WRITTEN);
        let p = FilterPipeline::new([Filter::Gzip { level: 6 }]);
        let (m, d) = p
            .forward_chunk(&st, &mut Workspace::default(), b"abcdefgh".repeat(100))
            .unwrap();
        let mut ws = Workspace::default();
        let mut out = Unfiltered::default();
        p.reverse_chunk(&st, &mut ws, &m, &d, &mut out).unwrap();
        assert_eq!(out.data.len(), 800);
        // Metadata: part counts (0, 1), then original size, compressed size.
        let mut smaller = m.clone();
        smaller[8..12].copy_from_slice(&799u32.to_le_bytes());
        out.clear();
        assert!(p
            .reverse_chunk(&st, &mut ws, &smaller, &d, &mut out)
            .is_err());
        let mut larger = m.clone();
        larger[8..12].copy_from_slice(&801u32.to_le_bytes());
        out.clear();
        assert!(p
            .reverse_chunk(&st, &mut ws, &larger, &d, &mut out)
            .is_err());
        // A stream flushed but never finished.
        let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
        enc.write_all(&b"abcdefgh".repeat(100)).unwrap();
        enc.flush().unwrap();
        let open = enc.get_ref().clone();
        let mut meta = m.clone();
        meta[12..16].copy_from_slice(&(open.len() as u32).to_le_bytes());
        out.clear();
        assert!(p
            .reverse_chunk(&st, &mut ws, &meta, &open, &mut out)
            .is_err());
        out.clear();
        p.reverse_chunk(&st, &mut ws, &m, &d, &mut out).unwrap();
        assert_eq!(out.data, b"abcdefgh".repeat(100));
    }

    #[test]
    fn a_cipher_is_remade_for_another_key() {
        use aes_gcm::aead::AeadInPlace;
        use aes_gcm::{Nonce, Tag};
        let mut c = Codecs::default();
        let (k1, k2) = ([1u8; 32], [2u8; 32]);
        let nonce = [0u8; 12];
        let mut text = *b"hello";
        let tag = Aes256Gcm::new((&k1).into())
            .encrypt_in_place_detached(Nonce::from_slice(&nonce), b"", &mut text)
            .unwrap();
        let decrypt = |cipher: &Aes256Gcm| {
            let mut t = text;
            cipher
                .decrypt_in_place_detached(
                    Nonce::from_slice(&nonce),
                    b"",
                    &mut t,
                    Tag::from_slice(&tag),
                )
                .map(|()| t)
        };
        assert_eq!(decrypt(c.cipher(&k1)).unwrap(), *b"hello");
        assert!(decrypt(c.cipher(&k2)).is_err());
        assert_eq!(decrypt(c.cipher(&k1)).unwrap(), *b"hello");
        assert!(!format!("{c:?}").contains('1'));
    }
}
