//! CHECKSUM_MD5 and CHECKSUM_SHA256: a digest of every metadata and data
//! part, checked on read; the bytes themselves pass through.
//!
//! Metadata (prepended to the input metadata parts): `u32` metadata part
//! count, `u32` data part count, then per part, metadata parts first, `u64`
//! part size and the digest (16 bytes MD5, 32 bytes SHA-256). Reverse checks
//! the metadata parts against the metadata that follows this filter's own
//! (the earlier filters' metadata, handed on whole), and the data parts
//! against the data in order.

use crate::buffer::{take_data, to_u32, MetaReader, Parts, Stage, Unfiltered};
use crate::{FilterError, Result};
use md5::Md5;
use sha2::{Digest, Sha256};
use tdb_format::FilterType;

/// Which digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// MD5 (16 bytes).
    Md5,
    /// SHA-256 (32 bytes).
    Sha256,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Md5 => FilterType::ChecksumMd5,
            Kind::Sha256 => FilterType::ChecksumSha256,
        }
        .name()
    }

    fn len(self) -> usize {
        match self {
            Kind::Md5 => 16,
            Kind::Sha256 => 32,
        }
    }

    fn digest(self, bytes: &[u8], out: &mut Vec<u8>) {
        match self {
            Kind::Md5 => out.extend_from_slice(&Md5::digest(bytes)),
            Kind::Sha256 => out.extend_from_slice(&Sha256::digest(bytes)),
        }
    }
}

/// Forward over one chunk.
pub(crate) fn forward(
    _st: &Stage<'_>,
    kind: Kind,
    metadata: Parts,
    data: Parts,
) -> Result<(Parts, Parts)> {
    let count = |p: &Parts| to_u32(kind.name(), p.count(), "part count");
    let total = metadata.count().saturating_add(data.count());
    let entry = kind.len().saturating_add(8);
    let mut own = Vec::with_capacity(total.saturating_mul(entry).saturating_add(8));
    own.extend_from_slice(&count(&metadata)?.to_le_bytes());
    own.extend_from_slice(&count(&data)?.to_le_bytes());
    for part in metadata.iter().chain(data.iter()) {
        own.extend_from_slice(&(part.len() as u64).to_le_bytes());
        kind.digest(part, &mut own);
    }
    let mut metadata = metadata;
    metadata.prepend(own);
    Ok((metadata, data))
}

/// Reverse over one chunk.
pub(crate) fn reverse(
    _st: &Stage<'_>,
    kind: Kind,
    metadata: &[u8],
    data: &[u8],
    out: &mut Unfiltered,
) -> Result<()> {
    let name = kind.name();
    let mut meta = MetaReader::new(name, metadata);
    let metadata_parts = meta.u32("metadata part count")?;
    let data_parts = meta.u32("data part count")?;
    // Each entry is read before anything is checked, as TileDB does, so the
    // earlier filters' metadata starts where the last entry ends.
    let entry = kind.len().saturating_add(8);
    let entries = u64::from(metadata_parts)
        .saturating_add(u64::from(data_parts))
        .checked_mul(entry as u64)
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(usize::MAX);
    let table = meta.take(entries, "part checksums")?;
    let mut earlier = meta.rest();
    let mut input = data;
    for (i, e) in table.chunks_exact(entry).enumerate() {
        let is_metadata = i < metadata_parts as usize;
        let mut fields = MetaReader::new(name, e);
        let size = usize::try_from(fields.u64("part size")?).unwrap_or(usize::MAX);
        let part = if is_metadata {
            take_data(name, &mut earlier, size, "checksummed metadata part")?
        } else {
            take_data(name, &mut input, size, "checksummed data part")?
        };
        let stored = fields.take(kind.len(), "checksum")?;
        let mut computed = Vec::with_capacity(kind.len());
        kind.digest(part, &mut computed);
        if computed != stored {
            return Err(FilterError::ChecksumMismatch {
                filter: name,
                stored: hex(stored),
                computed: hex(&computed),
            });
        }
    }
    if !earlier.is_empty() || !input.is_empty() {
        return Err(FilterError::corrupt(
            name,
            format!(
                "{} metadata and {} data bytes are not covered by a checksum",
                earlier.len(),
                input.len()
            ),
        ));
    }
    out.pass_on_metadata(meta.rest());
    out.data.extend_from_slice(data);
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_format::{Datatype, FormatVersion};

    fn stage() -> Stage<'static> {
        Stage::new(Datatype::Int64, FormatVersion::new(22).unwrap())
    }

    fn back(kind: Kind, m: &[u8], d: &[u8]) -> Result<Unfiltered> {
        let mut out = Unfiltered::default();
        reverse(&stage(), kind, m, d, &mut out).map(|()| out)
    }

    #[test]
    fn known_digests_and_layout() {
        let (m, d) = forward(
            &stage(),
            Kind::Md5,
            Parts::new(),
            Parts::one(b"abc".to_vec()),
        )
        .unwrap();
        assert_eq!(d, Parts::one(b"abc".to_vec()));
        let m = m.concat();
        assert_eq!(&m[..8], &[0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(&m[8..16], &3u64.to_le_bytes());
        assert_eq!(hex(&m[16..]), "900150983cd24fb0d6963f7d28e17f72");
        let (m, _) = forward(&stage(), Kind::Sha256, Parts::new(), Parts::one(vec![])).unwrap();
        assert_eq!(
            hex(&m.concat()[16..]),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn parts_keep_their_structure() {
        for kind in [Kind::Md5, Kind::Sha256] {
            let mut meta = Parts::one(vec![1, 2, 3]);
            meta.push(vec![4]);
            let mut data = Parts::one(vec![5; 10]);
            data.push(vec![6; 3]);
            let (m, d) = forward(&stage(), kind, meta.clone(), data.clone()).unwrap();
            assert_eq!(d, data);
            assert_eq!(m.count(), 3);
            let m = m.concat();
            assert_eq!(m.len(), 8 + 4 * (8 + kind.len()) + 4);
            let out = back(kind, &m, &d.concat()).unwrap();
            assert_eq!(out.metadata, [1, 2, 3, 4]);
            assert_eq!(out.data, data.concat());
        }
    }

    #[test]
    fn any_flipped_byte_is_detected() {
        for kind in [Kind::Md5, Kind::Sha256] {
            let data: Vec<u8> = (0..=255).collect();
            let (m, d) = forward(&stage(), kind, Parts::one(vec![9; 5]), Parts::one(data)).unwrap();
            let (m, d) = (m.concat(), d.concat());
            for i in 0..d.len() {
                let mut bad = d.clone();
                bad[i] ^= 0x10;
                let e = back(kind, &m, &bad).unwrap_err();
                assert!(matches!(e, FilterError::ChecksumMismatch { .. }), "{e}");
            }
            // The earlier filters' metadata and the stored digests too.
            for i in 8..m.len() {
                let mut bad = m.clone();
                bad[i] ^= 0x01;
                assert!(back(kind, &bad, &d).is_err(), "metadata byte {i}");
            }
        }
    }

    #[test]
    fn mismatch_names_both_digests() {
        let (m, _) = forward(
            &stage(),
            Kind::Md5,
            Parts::new(),
            Parts::one(b"abc".to_vec()),
        )
        .unwrap();
        let e = back(Kind::Md5, &m.concat(), b"abd").unwrap_err();
        let FilterError::ChecksumMismatch {
            stored, computed, ..
        } = e
        else {
            panic!("{e}")
        };
        assert_eq!(stored, "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(computed.len(), 32);
        assert_ne!(stored, computed);
    }

    #[test]
    fn truncations_are_errors() {
        let (m, d) = forward(
            &stage(),
            Kind::Sha256,
            Parts::one(vec![1]),
            Parts::one(vec![7; 40]),
        )
        .unwrap();
        let (m, d) = (m.concat(), d.concat());
        for n in 0..m.len() {
            assert!(back(Kind::Sha256, &m[..n], &d).is_err(), "meta {n}");
        }
        for n in 0..d.len() {
            assert!(back(Kind::Sha256, &m, &d[..n]).is_err(), "data {n}");
        }
        let mut more = d.clone();
        more.push(0);
        assert!(back(Kind::Sha256, &m, &more).is_err());
        // Huge counts read nothing beyond the metadata.
        assert!(back(Kind::Md5, &[255; 8], &d).is_err());
        // No parts at all.
        let (m, _) = forward(&stage(), Kind::Md5, Parts::new(), Parts::new()).unwrap();
        assert_eq!(
            back(Kind::Md5, &m.concat(), &[]).unwrap(),
            Unfiltered::default()
        );
    }
}
