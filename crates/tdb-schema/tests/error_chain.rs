//! Errors form chains in which every cause is printed once: a message says
//! where and what, its cause is reached through `Error::source` and is not
//! repeated in the message.

use std::error::Error;
use tdb_schema::ArraySchema;

/// The messages of `error` and its causes, outermost first.
fn chain(error: &dyn Error) -> Vec<String> {
    std::iter::successors(Some(error), |&e| e.source())
        .map(ToString::to_string)
        .collect()
}

fn assert_each_cause_once(chain: &[String]) {
    for pair in chain.windows(2) {
        assert!(
            !pair[0].contains(&pair[1]),
            "{:?} repeats its cause {:?}",
            pair[0],
            pair[1]
        );
    }
}

#[test]
fn schema_errors_print_each_cause_once() {
    let object = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == "dense_2d_row_row")
        .expect("dense_2d_row_row fixture");
    let file = object
        .files
        .iter()
        .find(|f| f.starts_with("__schema/"))
        .unwrap()
        .clone();
    let bytes = object.read(&file);

    // A truncated file: the generic tile's framing gives out.
    let err = ArraySchema::from_file(&file, &bytes[..bytes.len() - 3], None).unwrap_err();
    let messages = chain(&err);
    assert!(messages.len() >= 3, "{messages:?}");
    assert!(messages[0].starts_with(&file), "{messages:?}");
    assert_each_cause_once(&messages);

    // Truncated schema bytes inside a sound tile: a field gives out.
    let data = tdb_tile::read_generic_tile_file(&file, &bytes, None).unwrap();
    let err = ArraySchema::parse(&file, &data[..data.len() / 2]).unwrap_err();
    let messages = chain(&err);
    assert!(messages.len() >= 2, "{messages:?}");
    assert!(messages[1].contains("truncated"), "{messages:?}");
    assert_each_cause_once(&messages);
}

#[test]
fn a_missing_key_prints_each_cause_once() {
    let object = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.key.is_some())
        .expect("an encrypted fixture");
    let file = object
        .files
        .iter()
        .find(|f| f.starts_with("__schema/") && !f["__schema/".len()..].contains('/'))
        .unwrap()
        .clone();
    let err = ArraySchema::from_file(&file, &object.read(&file), None).unwrap_err();
    let messages = chain(&err);
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert!(messages[2].contains("no key was given"), "{messages:?}");
    assert_each_cause_once(&messages);
}
