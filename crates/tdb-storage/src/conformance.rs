//! One behaviour suite run against every backend, so they cannot drift.

use crate::{LocalStorage, MemoryStorage, Storage, StorageError};

fn suite(s: &dyn Storage) {
    s.write("arr/__schema/s1", b"schema").unwrap();
    s.write("arr/__fragments/f1/a0.tdb", b"0123456789").unwrap();
    s.create_dir("arr/__meta").unwrap();

    let names: Vec<_> = s
        .list("arr")
        .unwrap()
        .into_iter()
        .map(|e| (e.path, e.is_dir))
        .collect();
    assert_eq!(
        names,
        vec![
            ("arr/__fragments".to_owned(), true),
            ("arr/__meta".to_owned(), true),
            ("arr/__schema".to_owned(), true)
        ]
    );
    assert!(s.list("arr/__meta").unwrap().is_empty());
    assert_eq!(
        s.list_files_recursive("arr").unwrap(),
        vec!["arr/__fragments/f1/a0.tdb", "arr/__schema/s1"]
    );

    assert_eq!(s.size("arr/__fragments/f1/a0.tdb").unwrap(), 10);
    assert_eq!(
        &s.read_range("arr/__fragments/f1/a0.tdb", 2, 3).unwrap()[..],
        b"234"
    );
    assert_eq!(
        &s.read_range("arr/__fragments/f1/a0.tdb", 10, 0).unwrap()[..],
        b""
    );
    assert!(matches!(
        s.read_range("arr/__fragments/f1/a0.tdb", 8, 3),
        Err(StorageError::RangeOutOfBounds { size: 10, .. })
    ));
    assert!(s
        .read_range("arr/__fragments/f1/a0.tdb", u64::MAX, 2)
        .is_err());

    let err = s.read("arr/missing").unwrap_err();
    assert!(err.is_not_found());
    assert!(err.to_string().contains("arr/missing"));
    assert!(s.list("nowhere").unwrap_err().is_not_found());
    assert!(matches!(
        s.read("arr/__schema"),
        Err(StorageError::WrongKind { .. })
    ));
    assert!(matches!(
        s.read("../etc/passwd"),
        Err(StorageError::InvalidPath { .. })
    ));
    assert!(matches!(
        s.write("/abs", b""),
        Err(StorageError::InvalidPath { .. })
    ));

    s.write("arr/__schema/s1", b"replaced").unwrap();
    assert_eq!(&s.read("arr/__schema/s1").unwrap()[..], b"replaced");

    s.rename("arr/__schema/s1", "arr/__schema/s2").unwrap();
    assert!(!s.is_file("arr/__schema/s1").unwrap());
    assert!(s.is_file("arr/__schema/s2").unwrap());
    s.rename("arr/__fragments/f1", "arr/__fragments/f2")
        .unwrap();
    assert_eq!(
        &s.read("arr/__fragments/f2/a0.tdb").unwrap()[..],
        b"0123456789"
    );
    assert!(!s.is_dir("arr/__fragments/f1").unwrap());

    s.remove_file("arr/__schema/s2").unwrap();
    assert!(s.remove_file("arr/__schema/s2").unwrap_err().is_not_found());
    s.remove_dir("arr/__fragments").unwrap();
    assert!(!s.is_dir("arr/__fragments").unwrap());
    assert!(s.is_dir("arr").unwrap());
}

#[test]
fn memory_backend() {
    suite(&MemoryStorage::new());
}

#[test]
fn local_backend() {
    let dir = tempfile::tempdir().unwrap();
    let s = LocalStorage::new(dir.path());
    suite(&s);
    // Writes leave no temporary files behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("arr"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".tdb-tmp"))
        .collect();
    assert!(leftovers.is_empty());
}
