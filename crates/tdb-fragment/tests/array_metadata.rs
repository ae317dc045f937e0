//! Array metadata on TileDB-written fixtures: every format version that has
//! metadata (v4 from TileDB 1.7.7 to v22), time travel, deletions,
//! consolidated files, encryption, byte-exact rewrites and truncations.

use crate::support_meta;

use support_meta::{all_files, assert_metadata, resolve};
use tdb_format::single_generic_tile;
use tdb_fragment::{ArrayMetadata, MetadataEntry, MetadataFile};

#[test]
fn resolved_metadata_equals_expected_for_every_array() {
    let (mut cases, mut with_metadata, mut at_checks) = (0, 0, 0);
    let mut versions = std::collections::BTreeSet::new();
    for obj in tdb_testdata::objects() {
        let Some(expected) = &obj.expected else {
            continue;
        };
        if expected["kind"] == "group" {
            continue;
        }
        cases += 1;
        assert_metadata(&obj.case, &resolve(&obj, None), &expected["metadata"]);
        if expected["metadata"]
            .as_array()
            .is_some_and(|m| !m.is_empty())
        {
            with_metadata += 1;
            for (_, bytes) in support_meta::select(&obj, "__meta", None) {
                versions.insert(single_generic_tile(&bytes).unwrap().header.version.get());
            }
        }
        for at in expected["metadata_at"].as_array().into_iter().flatten() {
            let t = at["timestamp"].as_u64().unwrap();
            let what = format!("{} at {t}", obj.case);
            assert_metadata(&what, &resolve(&obj, Some(t)), &at["metadata"]);
            at_checks += 1;
        }
    }
    assert!(cases > 60, "{cases} array cases");
    assert!(with_metadata >= 22, "{with_metadata} cases with metadata");
    assert!(at_checks >= 23, "{at_checks} metadata_at checks");
    // Every metadata file version of the corpus was read: v4 (1.7.7) … v22.
    assert_eq!(versions.first(), Some(&4));
    assert_eq!(versions.last(), Some(&22));
    assert!(versions.len() >= 19, "{versions:?}");
}

#[test]
fn deletions_and_overwrites_replay_in_timestamp_order() {
    let obj = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == "metadata_types")
        .unwrap();
    let files = support_meta::select(&obj, "__meta", None);
    assert_eq!(files.len(), 2);
    // The t=2 file deletes `to_delete` and overwrites `int`.
    let second = MetadataFile::parse("t2", &files[1].1, None).unwrap();
    assert!(second
        .entries
        .iter()
        .any(|e| matches!(e, MetadataEntry::Delete { key } if key == "to_delete")));
    let md = resolve(&obj, None);
    assert!(md.get("to_delete").is_none());
    // Given in reverse, the files are still replayed by timestamp.
    let reversed: Vec<_> = files
        .iter()
        .rev()
        .map(|(n, b)| (n.clone(), b.as_slice()))
        .collect();
    assert_eq!(ArrayMetadata::from_files(&reversed, None).unwrap(), md);
    // An empty list: stored with count 0, reported as one value.
    let empty = md.get("empty_list").unwrap();
    assert_eq!((empty.value_num, empty.reported_value_num()), (0, 1));
}

#[test]
fn every_metadata_file_rewrites_byte_for_byte() {
    let files = all_files("__meta");
    assert!(files.len() >= 45, "{} metadata files", files.len());
    for (obj, name, bytes) in &files {
        let key = obj.key.as_ref();
        let content = tdb_tile::read_generic_tile_file(name, bytes, key).unwrap();
        let parsed = MetadataFile::parse_content(name, &content).unwrap();
        let mut out = Vec::new();
        parsed.write_content(&mut out).unwrap();
        assert_eq!(out, content, "{}: {name}", obj.case);
        // The whole file through our generic tile reads back the same.
        let written = parsed.write(name, key).unwrap();
        assert_eq!(MetadataFile::parse(name, &written, key).unwrap(), parsed);
        assert_eq!(
            single_generic_tile(&written).unwrap().header.version.get(),
            22
        );
        // v22 files TileDB wrote unencrypted come back byte for byte (zlib
        // level 1 as TileDB's; encryption draws fresh IVs).
        if key.is_none() && single_generic_tile(bytes).unwrap().header.version.get() == 22 {
            assert!(
                written == *bytes,
                "{}: {name}: not TileDB's bytes",
                obj.case
            );
        }
    }
}

#[test]
fn consolidated_file_is_the_merged_map() {
    let obj = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == "consolidated_array_meta")
        .unwrap();
    let files = support_meta::select(&obj, "__meta", None);
    assert_eq!(files.len(), 1);
    let (name, bytes) = &files[0];
    assert_eq!((name.t1, name.t2), (1, 3));
    let content = tdb_tile::read_generic_tile_file("c", bytes, None).unwrap();
    let md = resolve(&obj, None);
    let mut out = Vec::new();
    md.to_file().write_content(&mut out).unwrap();
    assert_eq!(out, content);
}

#[test]
fn encrypted_metadata_needs_its_key() {
    let obj = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == "encrypted_aes256")
        .unwrap();
    let files = support_meta::select(&obj, "__meta", None);
    let files = support_meta::borrowed(&files);
    assert!(ArrayMetadata::from_files(&files, obj.key.as_ref()).is_ok());
    assert!(ArrayMetadata::from_files(&files, None).is_err());
    assert!(ArrayMetadata::from_files(&files, Some(&[7; 32])).is_err());
}

#[test]
fn truncated_metadata_files_are_errors() {
    for (obj, name, bytes) in all_files("__meta") {
        let key = obj.key.as_ref();
        for cut in 0..bytes.len() {
            assert!(
                MetadataFile::parse(&name, &bytes[..cut], key).is_err(),
                "{}: {name} cut at {cut}",
                obj.case
            );
        }
        // Content cut inside an entry is an error; cut between entries it
        // is a valid file holding the entries before the cut.
        let content = tdb_tile::read_generic_tile_file(&name, &bytes, key).unwrap();
        let full = MetadataFile::parse_content(&name, &content).unwrap();
        for cut in 0..content.len() {
            match MetadataFile::parse_content(&name, &content[..cut]) {
                Ok(prefix) => assert_eq!(
                    prefix.entries[..],
                    full.entries[..prefix.entries.len()],
                    "{name} cut at {cut}"
                ),
                Err(e) => assert!(e.to_string().contains(&name), "{e}"),
            }
        }
    }
}
