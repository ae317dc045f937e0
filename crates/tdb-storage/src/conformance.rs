//! The behaviour every backend must show, as one suite a new backend runs
//! from its own tests: `tdb_storage::conformance::run(&MyStore::new(..))`.
//! It panics (like any test assertion) at the first difference.

use crate::{ByteRange, RangeRequest, Storage, StorageError};
use bytes::Bytes;

fn b(s: &'static [u8]) -> Bytes {
    Bytes::from_static(s)
}

/// The keys and their sizes; a size the listing gives must be the file's
/// (a backend may give none).
fn keys<'a>(s: &dyn Storage, files: &'a [crate::ObjectMeta]) -> Vec<(&'a str, u64)> {
    files
        .iter()
        .map(|f| {
            let size = s.size(&f.key).unwrap().unwrap();
            if let Some(listed) = f.size {
                assert_eq!(listed, size, "{}: listed size", f.key);
            }
            (f.key.as_str(), size)
        })
        .collect()
}

/// Runs the suite against an empty store.
pub fn run(s: &dyn Storage) {
    s.write("arr/__schema/s1", b(b"schema")).unwrap();
    s.write("arr/__fragments/f1/a0.tdb", b(b"0123456789"))
        .unwrap();
    s.write("arr/__fragments/f1/a0.tdbx", b(b"x")).unwrap();
    s.write("arr/__lock.tdb", b(b"")).unwrap();

    // Listings carry sizes where the backend knows them; directories are
    // prefixes that hold files.
    let root = s.list_dir("arr").unwrap();
    assert_eq!(keys(s, &root.files), vec![("arr/__lock.tdb", 0)]);
    assert_eq!(root.dirs, vec!["arr/__fragments", "arr/__schema"]);
    assert_eq!(root.files[0].name(), "__lock.tdb");
    let f1 = s.list_dir("arr/__fragments/f1/").unwrap();
    assert_eq!(
        keys(s, &f1.files),
        vec![
            ("arr/__fragments/f1/a0.tdb", 10),
            ("arr/__fragments/f1/a0.tdbx", 1)
        ]
    );
    assert!(f1.dirs.is_empty());
    // A missing directory lists as empty, as a prefix does on object stores.
    assert_eq!(s.list_dir("nowhere").unwrap(), crate::Listing::default());
    assert_eq!(
        keys(s, &s.list_prefix("arr").unwrap()),
        vec![
            ("arr/__fragments/f1/a0.tdb", 10),
            ("arr/__fragments/f1/a0.tdbx", 1),
            ("arr/__lock.tdb", 0),
            ("arr/__schema/s1", 6)
        ]
    );

    // Whole reads and sizes: a missing key is `None`, not an error.
    assert_eq!(&s.read("arr/__schema/s1").unwrap().unwrap()[..], b"schema");
    assert_eq!(s.read("arr/missing").unwrap(), None);
    assert_eq!(s.size("arr/__fragments/f1/a0.tdb").unwrap(), Some(10));
    assert_eq!(s.size("arr/missing").unwrap(), None);
    // A directory is no file: local backends say so; on object stores it
    // is only a prefix, so nothing is there.
    assert!(matches!(
        s.read("arr/__schema"),
        Err(StorageError::WrongKind { .. }) | Ok(None)
    ));

    // Batched ranges: bounded, empty, suffix (longer than the file too),
    // whole, several per file, a missing file; answers in request order.
    let a0 = "arr/__fragments/f1/a0.tdb";
    let got = s
        .read_ranges(&[
            RangeRequest::new(a0, ByteRange::new(2, 3)),
            RangeRequest::new("arr/missing", ByteRange::new(0, 1)),
            RangeRequest::new(a0, ByteRange::new(10, 0)),
            RangeRequest::new(a0, ByteRange::Suffix(4)),
            RangeRequest::new("arr/__schema/s1", ByteRange::Suffix(100)),
            RangeRequest::new(a0, ByteRange::Whole),
            RangeRequest::new("arr/__lock.tdb", ByteRange::Whole),
        ])
        .unwrap();
    let sizes: Vec<Option<u64>> = got
        .iter()
        .map(|r| r.as_ref().map(|r| r.file_size))
        .collect();
    assert_eq!(
        sizes,
        vec![
            Some(10),
            None,
            Some(10),
            Some(10),
            Some(6),
            Some(10),
            Some(0)
        ]
    );
    let got: Vec<Option<&[u8]>> = got
        .iter()
        .map(|r| r.as_ref().map(|r| &r.bytes[..]))
        .collect();
    assert_eq!(
        got,
        vec![
            Some(&b"234"[..]),
            None,
            Some(&b""[..]),
            Some(&b"6789"[..]),
            Some(&b"schema"[..]),
            Some(&b"0123456789"[..]),
            Some(&b""[..])
        ]
    );
    assert_eq!(
        &s.read_range(a0, ByteRange::new(9, 1))
            .unwrap()
            .unwrap()
            .bytes[..],
        b"9"
    );
    // Never a short read.
    assert!(matches!(
        s.read_range(a0, ByteRange::new(8, 3)),
        Err(StorageError::RangeOutOfBounds { size: 10, .. })
    ));
    assert!(s.read_range(a0, ByteRange::new(u64::MAX, 2)).is_err());
    assert!(s
        .read_ranges(&[RangeRequest::new(a0, ByteRange::new(11, 0))])
        .is_err());

    // Many ranges over many files (backends may share them among threads)
    // come back in the order asked, each as a single read gives it; one
    // bad range fails the whole batch.
    for i in 0..40u8 {
        let body: Vec<u8> = (0..=i).collect();
        s.write(&format!("arr/many/f{i}"), Bytes::from(body))
            .unwrap();
    }
    let mut many = Vec::new();
    for k in 0..120u64 {
        let i = (k * 7) % 45; // f40..f44 do not exist
        let len = k % 3;
        many.push(RangeRequest::new(
            format!("arr/many/f{i}"),
            ByteRange::new(0, if i < 40 { len.min(i + 1) } else { 1 }),
        ));
    }
    let got = s.read_ranges(&many).unwrap();
    assert_eq!(got.len(), many.len());
    for (r, g) in many.iter().zip(&got) {
        let one = s.read_range(&r.key, r.range).unwrap();
        assert_eq!(
            g.as_ref().map(|x| &x.bytes[..]),
            one.as_ref().map(|x| &x.bytes[..]),
            "{}",
            r.key
        );
    }
    let mut bad = many.clone();
    bad[97] = RangeRequest::new("arr/many/f3", ByteRange::new(9, 1));
    assert!(s.read_ranges(&bad).is_err());
    s.delete_prefix("arr/many").unwrap();

    // Keys are checked before any backend sees them.
    assert!(matches!(
        s.read("../etc/passwd"),
        Err(StorageError::InvalidPath { .. })
    ));
    assert!(matches!(
        s.write("/abs", b(b"")),
        Err(StorageError::InvalidPath { .. })
    ));
    assert!(s.write("", b(b"")).is_err());

    // Writes replace whole files; streamed writes join their parts.
    s.write("arr/__schema/s1", b(b"replaced")).unwrap();
    assert_eq!(
        &s.read("arr/__schema/s1").unwrap().unwrap()[..],
        b"replaced"
    );
    let mut parts = vec![Ok(b(b"ab")), Ok(b(b"")), Ok(b(b"cd"))].into_iter();
    s.write_stream("arr/__schema/s2", &mut parts).unwrap();
    assert_eq!(&s.read("arr/__schema/s2").unwrap().unwrap()[..], b"abcd");
    // A stream that fails leaves no file, and the old one untouched.
    let mut failing = vec![Ok(b(b"new")), Err(StorageError::not_found("source"))].into_iter();
    assert!(s.write_stream("arr/__schema/s2", &mut failing).is_err());
    assert_eq!(&s.read("arr/__schema/s2").unwrap().unwrap()[..], b"abcd");
    let mut failing = vec![Err(StorageError::not_found("source"))].into_iter();
    assert!(s.write_stream("arr/__schema/s3", &mut failing).is_err());
    assert_eq!(s.read("arr/__schema/s3").unwrap(), None);

    // Uploads fill side by side and appear only when finished; one
    // dropped unfinished leaves nothing (and the old file untouched).
    let mut u1 = s.upload("arr/__schema/u1").unwrap();
    let mut u2 = s.upload("arr/__schema/s1").unwrap();
    u1.put(b(b"12")).unwrap();
    u2.put(b(b"never")).unwrap();
    u1.put(b(b"34")).unwrap();
    assert_eq!(s.read("arr/__schema/u1").unwrap(), None);
    assert!(s
        .list_dir("arr/__schema")
        .unwrap()
        .files
        .iter()
        .all(|f| f.key != "arr/__schema/u1"));
    u1.finish().unwrap();
    drop(u2);
    assert_eq!(&s.read("arr/__schema/u1").unwrap().unwrap()[..], b"1234");
    assert_eq!(
        &s.read("arr/__schema/s1").unwrap().unwrap()[..],
        b"replaced"
    );
    s.delete("arr/__schema/u1").unwrap();
    // An upload abandoned before its first part leaves no trace at all,
    // not even a directory.
    drop(s.upload("fresh/below/f").unwrap());
    assert!(!s.list_dir("").unwrap().dirs.iter().any(|d| d == "fresh"));

    // Conditional creates: a file that exists is neither replaced nor
    // touched, and of racing creators of one key exactly one wins.
    s.create("arr/__commits/c1", b(b"first")).unwrap();
    assert!(matches!(
        s.create("arr/__commits/c1", b(b"second")),
        Err(StorageError::AlreadyExists { .. })
    ));
    assert_eq!(&s.read("arr/__commits/c1").unwrap().unwrap()[..], b"first");
    let wins: Vec<bool> = std::thread::scope(|scope| {
        let racers: Vec<_> = (0..8u8)
            .map(|i| {
                scope.spawn(
                    move || match s.create("arr/__commits/race", Bytes::from(vec![i; 3])) {
                        Ok(()) => true,
                        Err(StorageError::AlreadyExists { .. }) => false,
                        Err(e) => panic!("racing create: {e}"),
                    },
                )
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert_eq!(wins.iter().filter(|w| **w).count(), 1, "one creator wins");
    let winner = wins.iter().position(|w| *w).unwrap() as u8;
    assert_eq!(
        &s.read("arr/__commits/race").unwrap().unwrap()[..],
        &[winner; 3]
    );
    s.delete_prefix("arr/__commits").unwrap();

    // Deletes: a missing file is fine; a prefix takes everything below it.
    s.delete("arr/__schema/s2").unwrap();
    s.delete("arr/__schema/s2").unwrap();
    assert_eq!(s.read("arr/__schema/s2").unwrap(), None);
    s.delete_prefix("arr/__fragments").unwrap();
    assert!(s.list_dir("arr/__fragments").unwrap().files.is_empty());
    assert_eq!(
        keys(s, &s.list_prefix("arr").unwrap()),
        vec![("arr/__lock.tdb", 0), ("arr/__schema/s1", 8)]
    );
}

#[cfg(test)]
mod tests {
    use crate::{LocalStorage, MemoryStorage, RecordingStorage};

    #[test]
    fn memory_backend() {
        super::run(&MemoryStorage::new());
    }

    #[test]
    fn recording_backend_behaves_like_its_inner_one() {
        let s = RecordingStorage::new(MemoryStorage::new());
        super::run(&s);
        assert!(s.trace().contains("read_ranges (7 ranges, 23 B)"));
    }

    #[test]
    fn local_backend() {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalStorage::new(dir.path());
        super::run(&s);
        // Writes leave no temporary files behind, failed ones included.
        fn temporary(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
            let mut found = Vec::new();
            for e in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
                if e.file_type().unwrap().is_dir() {
                    found.extend(temporary(&e.path()));
                } else if e
                    .file_name()
                    .to_string_lossy()
                    .starts_with(crate::LOCAL_TEMP_PREFIX)
                {
                    found.push(e.path());
                }
            }
            found
        }
        assert_eq!(temporary(dir.path()), Vec::<std::path::PathBuf>::new());
    }
}
