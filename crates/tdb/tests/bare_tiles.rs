//! Tiles stored without filters, fetched bare from local files (their
//! chunks' data apart from the headers, the headers checked): with any
//! chunk header of them changed, a local read answers exactly as a read
//! from memory, which decodes every tile the ordinary way: the same cells
//! or an error, never other cells.

use tdb::{Array, MemoryStorage, OpenOptions, ReadSpec};
use tdb_storage::WritableStorage;

/// Every cell of every field, or the error.
fn seen(array: Result<Array<impl tdb_storage::Storage>, tdb::Error>) -> String {
    let read = |array: Array<_>| -> Result<String, tdb::Error> {
        let fields: Vec<String> = array.schema().fields().map(str::to_owned).collect();
        Ok(format!("{:?}", array.read_all(ReadSpec::new(fields))?))
    };
    match array.and_then(read) {
        Ok(cells) => cells,
        Err(_) => "refused".to_owned(),
    }
}

#[test]
fn changed_chunk_headers_read_as_any_tile() {
    let o = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == "dense_unfiltered_tiles" && o.expected.is_some())
        .unwrap();
    let files: Vec<(String, Vec<u8>)> = o.files.iter().map(|f| (f.clone(), o.read(f))).collect();
    let tmp = tempfile::tempdir().unwrap();
    let local = |files: &[(String, Vec<u8>)]| {
        for (name, bytes) in files {
            let path = tmp.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        seen(Array::open_with(
            tmp.path().to_str().unwrap(),
            OpenOptions::new(),
        ))
    };
    let memory = |files: &[(String, Vec<u8>)]| {
        let s = MemoryStorage::new();
        for (name, bytes) in files {
            s.write(name, bytes.clone().into()).unwrap();
        }
        seen(Array::open_in(s, "", OpenOptions::new()))
    };
    let whole = local(&files);
    assert_ne!(whole, "refused");
    assert_eq!(whole, memory(&files));
    // The first fragment's `ch` (chunks of 65,535 and 32,769 bytes) and
    // `n` (four of 64 KiB) tiles 0: the chunk count and each header's
    // three sizes, each made one less and one more.
    let mut changed = 0;
    for (file, chunks) in [
        ("a1.tdb", vec![65_535u64, 32_769]),
        ("a2.tdb", vec![65_536; 4]),
    ] {
        let k = (files.iter())
            .position(|(name, _)| name.starts_with("__fragments/__1_1_") && name.ends_with(file))
            .unwrap();
        let mut fields = vec![(0usize, 8usize)];
        let mut at = 8;
        for len in chunks {
            fields.extend([(at, 4), (at + 4, 4), (at + 8, 4)]);
            at += 12 + len as usize;
        }
        for (offset, width) in fields {
            for delta in [-1i64, 1] {
                let mut bad = files.clone();
                let bytes = &mut bad[k].1[offset..offset + width];
                let mut value = [0u8; 8];
                value[..width].copy_from_slice(bytes);
                let v = (u64::from_le_bytes(value) as i64 + delta) as u64;
                bytes.copy_from_slice(&v.to_le_bytes()[..width]);
                let (got, want) = (local(&bad), memory(&bad));
                assert_eq!(got, want, "{file} byte {offset} {delta:+}");
                assert_ne!(got, whole, "{file} byte {offset} {delta:+} changed nothing");
                changed += 1;
            }
        }
    }
    assert_eq!(changed, 2 * (1 + 3 * 2 + 1 + 3 * 4));
    // Put back, the local read is the first one again (no file kept open
    // with a changed size: each write is a new file).
    assert_eq!(local(&files), whole);
}
