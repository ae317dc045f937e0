//! Encrypted arrays TileDB wrote, read with a wrong key, and with one bit
//! flipped in one of their files: a flip is refused with an error or
//! changes nothing a reader sees (a bit no reader uses), never the cells.

use tdb::{Array, MemoryStorage, OpenOptions, ReadSpec};
use tdb_storage::WritableStorage;

const CASES: [&str; 2] = ["encrypted_aes256", "encrypted_delete"];

/// Every cell of every field and the metadata, as a reader sees them; an
/// error where opening or reading fails.
fn seen(storage: &MemoryStorage, key: &[u8; 32]) -> Result<String, tdb::Error> {
    let array = Array::open_in(storage, "", OpenOptions::new().key(key)?)?;
    let fields: Vec<String> = array.schema().fields().map(str::to_owned).collect();
    let batch = array.read_all(ReadSpec::new(fields))?;
    let metadata: Vec<_> = array
        .metadata()?
        .iter()
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    Ok(format!("{batch:?} {metadata:?}"))
}

/// The files of an encrypted fixture case, and its key.
fn encrypted(case: &str) -> (Vec<(String, Vec<u8>)>, [u8; 32]) {
    let o = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == case && o.expected.is_some())
        .unwrap();
    let files = o.files.iter().map(|f| (f.clone(), o.read(f))).collect();
    (files, o.key.expect("an encrypted case"))
}

fn load(files: &[(String, Vec<u8>)]) -> MemoryStorage {
    let s = MemoryStorage::new();
    for (name, bytes) in files {
        s.write(name, bytes.clone().into()).unwrap();
    }
    s
}

#[test]
fn a_wrong_key_is_refused() {
    for case in CASES {
        let (files, key) = encrypted(case);
        let storage = load(&files);
        assert!(seen(&storage, &key).is_ok(), "{case} reads with its key");
        let mut wrong = key;
        wrong[7] ^= 0x20;
        assert!(
            seen(&storage, &wrong).is_err(),
            "{case} reads with a wrong key"
        );
        let unencrypted = Array::open_in(&storage, "", OpenOptions::new());
        assert!(unencrypted.is_err(), "{case} opens with no key");
    }
}

/// Every bit of every byte of every file of `case`, flipped one at a time.
fn every_flipped_bit_is_refused_or_changes_nothing(case: &str) {
    let (mut runs, mut refused) = (0, 0);
    let (files, key) = encrypted(case);
    let truth = seen(&load(&files), &key).expect("the case reads");
    for (k, (name, bytes)) in files.iter().enumerate() {
        for at in 0..bytes.len() {
            for bit in 0..8 {
                let mut changed = files.clone();
                changed[k].1[at] ^= 1 << bit;
                runs += 1;
                match seen(&load(&changed), &key) {
                    Err(_) => refused += 1,
                    Ok(got) => assert_eq!(
                        got, truth,
                        "{case}: bit {bit} flipped at {name}:{at} changes what a reader sees"
                    ),
                }
            }
        }
    }
    eprintln!("{case}: {refused} of {runs} flips refused, the others change nothing");
    assert!(runs > 40_000, "{runs} runs");
}

#[test]
fn a_flipped_bit_is_refused_or_changes_nothing_aes256() {
    every_flipped_bit_is_refused_or_changes_nothing(CASES[0]);
}

#[test]
fn a_flipped_bit_is_refused_or_changes_nothing_with_deletes() {
    every_flipped_bit_is_refused_or_changes_nothing(CASES[1]);
}
