//! INTERNAL_FILTER_AES_256_GCM: every metadata and data part encrypted on
//! its own with AES-256-GCM under a fresh 12-byte IV, no associated data.
//!
//! TileDB appends this filter to the pipeline of every tile of an encrypted
//! array (data tiles and generic tiles alike), so it is always last.
//! Metadata (this filter's only metadata part: the input metadata is
//! encrypted into the data): `u32` metadata part count, `u32` data part
//! count, then per part, metadata parts first, `u32` plaintext size, `u32`
//! ciphertext size (the same: the tag is stored apart), the 12-byte IV and
//! the 16-byte tag. Data: one part, the ciphertexts in that order. Reverse
//! hands the decrypted metadata parts on as the earlier filters' metadata.

use crate::buffer::{tail, take_data, to_u32, MetaReader, Parts, Stage, Unfiltered};
use crate::workspace::Codecs;
use crate::{FilterError, Result};
use aes_gcm::aead::AeadInPlace;
use aes_gcm::{Nonce, Tag};

const NAME: &str = tdb_format::FilterType::InternalAes256Gcm.name();
const IV_BYTES: usize = 12;
const TAG_BYTES: usize = 16;

/// Forward over one chunk.
pub(crate) fn forward(
    st: &Stage<'_>,
    codecs: &mut Codecs,
    metadata: Parts,
    data: Parts,
) -> Result<(Parts, Parts)> {
    encrypt(st, codecs, metadata, data, &mut random_iv)
}

/// A fresh IV from the operating system, as TileDB takes one from OpenSSL's
/// `RAND_bytes`. A GCM IV must never repeat under one key, so it comes from
/// the OS generator rather than anything derived from time or hashing;
/// `getrandom` 0.4 is already built for `uuid`, so calling it directly adds
/// no crate, where aes-gcm's own `getrandom` feature would pull in an older
/// `getrandom` and `rand_core`.
fn random_iv() -> Result<[u8; IV_BYTES]> {
    let mut iv = [0u8; IV_BYTES];
    getrandom::fill(&mut iv).map_err(|e| {
        FilterError::unsupported(NAME, format!("no system randomness for an IV: {e}"))
    })?;
    Ok(iv)
}

/// Forward with IVs from `next_iv`, one per part in storage order.
fn encrypt(
    st: &Stage<'_>,
    codecs: &mut Codecs,
    metadata: Parts,
    data: Parts,
    next_iv: &mut dyn FnMut() -> Result<[u8; IV_BYTES]>,
) -> Result<(Parts, Parts)> {
    let key = st.key.ok_or(FilterError::MissingKey)?;
    let cipher = codecs.cipher(key);
    let count = |p: &Parts| to_u32(NAME, p.count(), "part count");
    let total = metadata.count().saturating_add(data.count());
    let entry = 8 + IV_BYTES + TAG_BYTES;
    let mut own = Vec::with_capacity(total.saturating_mul(entry).saturating_add(8));
    own.extend_from_slice(&count(&metadata)?.to_le_bytes());
    own.extend_from_slice(&count(&data)?.to_le_bytes());
    let mut out = Vec::with_capacity(metadata.byte_len().saturating_add(data.byte_len()));
    for part in metadata.iter().chain(data.iter()) {
        // OpenSSL takes the size as an `int`, TileDB stores it as `u32`.
        let size = i32::try_from(part.len())
            .map_err(|_| FilterError::bad_input(NAME, "a part exceeds 2^31 - 1 bytes"))?
            as u32;
        let iv = next_iv()?;
        let start = out.len();
        out.extend_from_slice(part);
        let tag = cipher
            .encrypt_in_place_detached(Nonce::from_slice(&iv), b"", tail(&mut out, start))
            .map_err(|_| FilterError::bad_input(NAME, "AES-256-GCM refused the part"))?;
        own.extend_from_slice(&size.to_le_bytes());
        own.extend_from_slice(&size.to_le_bytes());
        own.extend_from_slice(&iv);
        own.extend_from_slice(&tag);
    }
    Ok((Parts::one(own), Parts::one(out)))
}

/// Reverse over one chunk.
pub(crate) fn reverse(
    st: &Stage<'_>,
    codecs: &mut Codecs,
    metadata: &[u8],
    data: &[u8],
    out: &mut Unfiltered,
) -> Result<()> {
    let key = st.key.ok_or(FilterError::MissingKey)?;
    let cipher = codecs.cipher(key);
    let mut meta = MetaReader::new(NAME, metadata);
    let metadata_parts = meta.u32("metadata part count")?;
    let data_parts = meta.u32("data part count")?;
    let mut input = data;
    let metadata_start = out.metadata.len();
    for i in 0..u64::from(metadata_parts).saturating_add(u64::from(data_parts)) {
        let plain = meta.u32("plaintext size")? as usize;
        let size = meta.u32("encrypted size")? as usize;
        let iv: [u8; IV_BYTES] = meta.array("IV")?;
        let tag: [u8; TAG_BYTES] = meta.array("tag")?;
        if plain != size {
            return Err(FilterError::corrupt(
                NAME,
                format!(
                    "part {i}: {size} encrypted bytes cannot hold {plain} (GCM keeps the size)"
                ),
            ));
        }
        let cipher_text = take_data(NAME, &mut input, size, "encrypted part")?;
        let target = if i < u64::from(metadata_parts) {
            &mut out.metadata
        } else {
            &mut out.data
        };
        let start = target.len();
        target.extend_from_slice(cipher_text);
        cipher
            .decrypt_in_place_detached(
                Nonce::from_slice(&iv),
                b"",
                tail(target, start),
                Tag::from_slice(&tag),
            )
            .map_err(|_| FilterError::Authentication)?;
    }
    // The earlier filters' metadata was encrypted with the data: `tdb
    // dissect` explains it in its decrypted form.
    let decrypted = out.metadata.get(metadata_start..).unwrap_or_default();
    if let Some(stored) = data.get(..decrypted.len()).filter(|s| !s.is_empty()) {
        tdb_format::span::decoded(stored, decrypted, "decrypted filter metadata");
    }
    // TileDB ignores whatever follows; the filter is always last, so any
    // such bytes are not TileDB's.
    if !meta.rest().is_empty() || !input.is_empty() {
        return Err(FilterError::corrupt(
            NAME,
            format!(
                "{} metadata and {} data bytes follow the last part",
                meta.rest().len(),
                input.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Workspace;
    use proptest::prelude::*;
    use std::path::Path;
    use tdb_format::{Datatype, FormatVersion};

    const KEY: &[u8; 32] = b"0123456789abcdeF0123456789abcdeF";

    fn stage(key: Option<&[u8; 32]>) -> Stage<'_> {
        Stage {
            key,
            ..Stage::new(Datatype::Int32, FormatVersion::new(22).unwrap())
        }
    }

    fn fixed_ivs() -> impl FnMut() -> Result<[u8; IV_BYTES]> {
        let mut n = 0u8;
        move || {
            n += 1;
            Ok([n; IV_BYTES])
        }
    }

    fn back(key: Option<&[u8; 32]>, m: &[u8], d: &[u8]) -> Result<Unfiltered> {
        let mut out = Unfiltered::default();
        reverse(&stage(key), &mut Codecs::default(), m, d, &mut out).map(|()| out)
    }

    #[test]
    fn layout_and_round_trip() {
        let mut meta = Parts::one(vec![1, 2, 3]);
        meta.push(vec![]);
        let data = Parts::one(b"hello, tiles".to_vec());
        let (m, d) = encrypt(
            &stage(Some(KEY)),
            &mut Codecs::default(),
            meta,
            data,
            &mut fixed_ivs(),
        )
        .unwrap();
        assert_eq!((m.count(), d.count()), (1, 1));
        let (m, d) = (m.concat(), d.concat());
        assert_eq!(m.len(), 8 + 3 * 36);
        assert_eq!(&m[..8], &[2, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(&m[8..16], &[3, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(&m[16..28], &[1; 12]);
        assert_eq!(d.len(), 3 + 12);
        assert_ne!(&d[3..], b"hello, tiles");
        let out = back(Some(KEY), &m, &d).unwrap();
        assert_eq!(out.metadata, [1, 2, 3]);
        assert_eq!(out.data, b"hello, tiles");
        // Random IVs differ between calls.
        let one = forward(
            &stage(Some(KEY)),
            &mut Codecs::default(),
            Parts::new(),
            Parts::one(vec![0; 4]),
        )
        .unwrap();
        let two = forward(
            &stage(Some(KEY)),
            &mut Codecs::default(),
            Parts::new(),
            Parts::one(vec![0; 4]),
        )
        .unwrap();
        assert_ne!(one, two);
    }

    #[test]
    fn keys_and_tampering() {
        let (m, d) = encrypt(
            &stage(Some(KEY)),
            &mut Codecs::default(),
            Parts::one(vec![4; 9]),
            Parts::one(vec![5; 30]),
            &mut fixed_ivs(),
        )
        .unwrap();
        let (m, d) = (m.concat(), d.concat());
        assert_eq!(back(None, &m, &d), Err(FilterError::MissingKey));
        assert_eq!(
            forward(
                &stage(None),
                &mut Codecs::default(),
                Parts::new(),
                Parts::new()
            ),
            Err(FilterError::MissingKey)
        );
        let mut wrong = *KEY;
        wrong[31] ^= 1;
        assert_eq!(back(Some(&wrong), &m, &d), Err(FilterError::Authentication));
        for i in 0..d.len() {
            let mut bad = d.clone();
            bad[i] ^= 0x80;
            assert_eq!(
                back(Some(KEY), &m, &bad),
                Err(FilterError::Authentication),
                "data {i}"
            );
        }
        // Altered IVs and tags (the sizes make it corrupt instead).
        for i in (16..44).chain(52..80) {
            let mut bad = m.clone();
            bad[i] ^= 0x04;
            assert_eq!(
                back(Some(KEY), &bad, &d),
                Err(FilterError::Authentication),
                "meta {i}"
            );
        }
        for n in 0..m.len() {
            assert!(back(Some(KEY), &m[..n], &d).is_err(), "meta {n}");
        }
        for n in 0..d.len() {
            assert!(back(Some(KEY), &m, &d[..n]).is_err(), "data {n}");
        }
        let mut bad = m.clone();
        bad[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            back(Some(KEY), &bad, &d),
            Err(FilterError::Corrupt { .. })
        ));
        assert!(back(Some(KEY), &[255; 8], &d).is_err());
    }

    proptest! {
        #[test]
        fn round_trips(meta in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..3),
                       data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut parts = Parts::new();
            meta.iter().for_each(|p| parts.push(p.clone()));
            let (m, d) = forward(
            &stage(Some(KEY)),
            &mut Codecs::default(), parts, Parts::one(data.clone())).unwrap();
            let out = back(Some(KEY), &m.concat(), &d.concat()).unwrap();
            prop_assert_eq!(out.metadata, meta.concat());
            prop_assert_eq!(out.data, data);
        }
    }

    /// The chunks of a filtered tile: (unfiltered size, metadata, data).
    fn chunks(mut tile: &[u8]) -> Vec<(usize, &[u8], &[u8])> {
        let u32_at =
            |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap()) as usize;
        let n = u64::from_le_bytes(tile[..8].try_into().unwrap());
        tile = &tile[8..];
        let mut out = Vec::new();
        for _ in 0..n {
            let (size, data, meta) = (u32_at(tile, 0), u32_at(tile, 4), u32_at(tile, 8));
            let (m, rest) = tile[12..].split_at(meta);
            let (d, rest) = rest.split_at(data);
            out.push((size, m, d));
            tile = rest;
        }
        assert!(tile.is_empty());
        out
    }

    /// Pins one stored tile of a pipeline ending in this filter: per chunk,
    /// the right key decrypts, a wrong key or an altered byte is refused,
    /// encrypting TileDB's plaintext with TileDB's IVs gives TileDB's bytes,
    /// and the whole pipeline gives the chunk's unfiltered size. Returns the
    /// unfiltered tile.
    fn pin_tile(
        pipeline: &crate::FilterPipeline,
        st: &Stage<'_>,
        tile: &[u8],
        ctx: &str,
    ) -> Vec<u8> {
        assert_eq!(
            pipeline.filters.last(),
            Some(&crate::Filter::InternalAes256Gcm),
            "{ctx}"
        );
        let aes_st = Stage {
            datatype: *pipeline.stage_datatypes(st.datatype).last().unwrap(),
            ..*st
        };
        let mut wrong = *st.key.unwrap();
        wrong[0] ^= 0xff;
        let mut unfiltered = Vec::new();
        for (size, m, d) in chunks(tile) {
            let mut plain = Unfiltered::default();
            reverse(&aes_st, &mut Codecs::default(), m, d, &mut plain).unwrap();
            let wrong_st = Stage {
                key: Some(&wrong),
                ..aes_st
            };
            let mut scratch = Unfiltered::default();
            assert_eq!(
                reverse(&wrong_st, &mut Codecs::default(), m, d, &mut scratch),
                Err(FilterError::Authentication)
            );
            let mut altered = d.to_vec();
            altered[d.len() / 2] ^= 1;
            assert_eq!(
                reverse(&aes_st, &mut Codecs::default(), m, &altered, &mut scratch),
                Err(FilterError::Authentication)
            );

            let count = |i: usize| u32::from_le_bytes(m[i..i + 4].try_into().unwrap()) as usize;
            let (meta_parts, data_parts) = (count(0), count(4));
            // Earlier filters (compressors) leave one metadata part, none
            // when there are none.
            assert_eq!(meta_parts, usize::from(pipeline.filters.len() > 1), "{ctx}");
            assert_eq!(data_parts, 1, "{ctx}");
            let mut ivs = m[8..]
                .chunks_exact(36)
                .map(|e| <[u8; IV_BYTES]>::try_from(&e[8..20]));
            let meta_in = if meta_parts == 1 {
                Parts::one(plain.metadata.clone())
            } else {
                Parts::new()
            };
            let mut next = || Ok(ivs.next().unwrap().unwrap());
            let (m2, d2) = encrypt(
                &aes_st,
                &mut Codecs::default(),
                meta_in,
                Parts::one(plain.data),
                &mut next,
            )
            .unwrap();
            assert_eq!(
                (m2.concat(), d2.concat()),
                (m.to_vec(), d.to_vec()),
                "{ctx}"
            );

            let mut out = Unfiltered::default();
            pipeline
                .reverse_chunk(st, &mut Workspace::default(), m, d, &mut out)
                .unwrap();
            assert_eq!(out.data.len(), size, "{ctx}");
            unfiltered.extend_from_slice(&out.data);
        }
        unfiltered
    }

    fn key_of(case: &Path) -> [u8; 32] {
        let json = std::fs::read(case.join("expected.json")).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let key = json["encryption"]["key"].as_str().unwrap();
        key.as_bytes().try_into().unwrap()
    }

    #[test]
    fn fixture_generic_tiles() {
        use tdb_format::{fragment_metadata_tiles, single_generic_tile, EncryptionType};
        let case =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/arrays/encrypted_aes256");
        let key = key_of(&case);
        let array = case.join("array");
        let dir = |d: &str| {
            let mut v: Vec<_> = std::fs::read_dir(array.join(d))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            v.sort();
            v
        };
        use tdb_format::names;
        let fragment = dir(names::FRAGMENTS_DIR).remove(0);
        let mut files = dir(names::SCHEMA_DIR);
        files.extend(dir(names::METADATA_DIR));
        files.push(fragment.join(names::FRAGMENT_METADATA_FILE));
        let mut seen = 0;
        for file in files {
            let bytes = std::fs::read(&file).unwrap();
            let tiles: Vec<_> = if file.ends_with("__fragment_metadata.tdb") {
                fragment_metadata_tiles(&bytes)
                    .unwrap()
                    .0
                    .into_iter()
                    .map(|t| t.tile)
                    .collect()
            } else {
                vec![single_generic_tile(&bytes).unwrap()]
            };
            for tile in tiles {
                let ctx = file.display().to_string();
                let h = tile.header;
                assert_eq!(h.encryption, EncryptionType::Aes256Gcm, "{ctx}");
                let pipeline =
                    crate::FilterPipeline::parse(tile.filter_pipeline, h.version).unwrap();
                let st = Stage {
                    cell_size: h.cell_size,
                    key: Some(&key),
                    ..Stage::new(h.datatype, h.version)
                };
                let plain = pin_tile(&pipeline, &st, tile.data, &ctx);
                assert_eq!(plain.len() as u64, h.tile_size, "{ctx}");
                if ctx.contains("__meta") {
                    assert!(plain.windows(6).any(|w| w == b"secret"), "{ctx}");
                }
                seen += 1;
            }
        }
        assert!(seen > 5, "{seen}");
    }

    #[test]
    fn fixture_data_tiles() {
        use crate::{Filter, FilterPipeline};
        let case =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/arrays/encrypted_aes256");
        let key = key_of(&case);
        let mut fragments: Vec<_> = std::fs::read_dir(case.join("array/__fragments"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        fragments.sort();
        let fragment = &fragments[0];
        let zstd = Filter::Zstd { level: -1 };
        let v22 = FormatVersion::new(22).unwrap();
        let mut tiles = Vec::new();
        // Attribute a (INT32, no filters), the offsets and data of s (UTF-8,
        // no filters; offsets ZSTD), dimensions x and y (INT32, ZSTD): each
        // with the encryption filter appended.
        for (file, datatype, filters) in [
            ("a0.tdb", Datatype::Int32, vec![]),
            ("a1.tdb", Datatype::UInt64, vec![zstd]),
            ("a1_var.tdb", Datatype::StringUtf8, vec![]),
            ("d0.tdb", Datatype::Int32, vec![zstd]),
            ("d1.tdb", Datatype::Int32, vec![zstd]),
        ] {
            let mut filters = filters;
            filters.push(Filter::InternalAes256Gcm);
            let pipeline = FilterPipeline {
                max_chunk_size: 65536,
                filters,
            };
            let st = Stage {
                key: Some(&key),
                ..Stage::new(datatype, v22)
            };
            let bytes = std::fs::read(fragment.join(file)).unwrap();
            tiles.push(pin_tile(&pipeline, &st, &bytes, file));
        }
        let ints = |b: &[u8]| -> Vec<i32> {
            b.chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        // 20 cells; coordinates within the domain [0, 99].
        assert_eq!(tiles[0].len(), 80);
        assert!(ints(&tiles[3])
            .iter()
            .chain(&ints(&tiles[4]))
            .all(|c| (0..100).contains(c)));
        let offsets: Vec<u64> = tiles[1]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(offsets.len(), 20);
        assert_eq!(offsets[0], 0);
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]) && offsets[19] <= 50);
        assert!(std::str::from_utf8(&tiles[2]).is_ok());
    }
}
