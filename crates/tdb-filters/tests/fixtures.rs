//! The filter pipeline of every generic tile in every array and group real
//! TileDB wrote (all format versions) parses and writes back to TileDB's bytes.

use std::collections::BTreeMap;
use tdb_filters::{Filter, FilterPipeline};
use tdb_format::classify;

#[test]
fn generic_tile_pipelines_round_trip() {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for obj in tdb_testdata::objects() {
        for rel in &obj.files {
            let class = classify(rel);
            if !class.holds_generic_tiles() {
                continue;
            }
            let bytes = obj.read(rel);
            let (tiles, _) = class.generic_tiles(&bytes).unwrap();
            for t in tiles {
                let version = t.tile.header.version;
                let ctx = format!("{}: {rel} @{}", obj.case, t.offset);
                let p = FilterPipeline::parse(t.tile.filter_pipeline, version)
                    .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                let mut again = Vec::new();
                p.write(version, &mut again);
                assert_eq!(again, t.tile.filter_pipeline, "{ctx}");
                let names: Vec<_> = p.filters.iter().map(|f| f.filter_type().name()).collect();
                *kinds.entry(names.join("+")).or_default() += 1;
                if t.tile.header.encryption == tdb_format::EncryptionType::Aes256Gcm {
                    assert!(
                        p.filters.contains(&Filter::InternalAes256Gcm),
                        "{ctx}: {names:?}"
                    );
                }
            }
        }
    }
    // TileDB compresses generic tiles with GZIP; encrypted ones add AES-256-GCM.
    assert!(kinds.get("GZIP").copied().unwrap_or(0) > 1000, "{kinds:?}");
    assert!(
        kinds
            .keys()
            .any(|k| k.contains("INTERNAL_FILTER_AES_256_GCM")),
        "{kinds:?}"
    );
}
