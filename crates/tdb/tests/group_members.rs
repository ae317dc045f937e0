//! Group member changes TileDB refuses are refused here too, each with
//! nothing written: a key added twice in one commit, added and removed in
//! one commit, removed twice, a key that is no member, a URI shared by
//! several members (those go by name).

use tdb::{Group, MemberChange, OpenOptions};
use tdb_storage::{ListableStorage, MemoryStorage};

fn add(uri: &str, name: Option<&str>) -> MemberChange {
    MemberChange::Add {
        uri: uri.into(),
        relative: false,
        name: name.map(str::to_owned),
    }
}

fn details(g: &Group<MemoryStorage>) -> usize {
    g.storage().list_prefix("g/__group").unwrap().len()
}

#[test]
fn refused_member_changes_write_nothing() {
    // Stamped 10, so the last change below (stamped now) replays after it
    // (two commits in one millisecond replay in name order, which is random).
    let mut g = Group::create_in(MemoryStorage::new(), "g", OpenOptions::new().at(10)).unwrap();
    g.change_members(&[add("s3://b/one", Some("a")), add("s3://b/one", Some("b"))])
        .unwrap();
    g.reopen().unwrap();
    assert_eq!(g.members().iter().count(), 2);
    let before = details(&g);
    for (changes, message) in [
        (
            vec![add("s3://b/x", None), add("s3://b/x", None)],
            "is added twice in one commit",
        ),
        (
            vec![add("s3://b/y", Some("a")), MemberChange::Remove("a".into())],
            "is added and removed in one commit",
        ),
        (
            vec![
                MemberChange::Remove("a".into()),
                MemberChange::Remove("a".into()),
            ],
            "is removed twice in one commit",
        ),
        (vec![MemberChange::Remove("zzz".into())], "is not a member"),
        (
            vec![MemberChange::Remove("s3://b/one".into())],
            "is the URI of several members",
        ),
    ] {
        let e = g.change_members(&changes).unwrap_err().to_string();
        assert!(e.contains(message), "{message}: {e}");
        assert_eq!(details(&g), before, "{message}");
    }
    // Removing by name works, and so does adding a fresh key.
    g.change_members(&[MemberChange::Remove("a".into()), add("s3://b/z", None)])
        .unwrap();
    g.reopen().unwrap();
    let keys: Vec<String> = g.members().iter().map(|m| m.key().to_owned()).collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(keys.contains(&"b".to_owned()) && keys.contains(&"s3://b/z".to_owned()));
}
