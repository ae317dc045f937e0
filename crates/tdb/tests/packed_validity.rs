//! Reads that give validity as bits (Arrow's layout) give the cells the
//! byte layout gives, through the facade's limit, batch size and joins.

use crate::common::whole;
use tdb::{Array, Batch, LocalStorage, OpenOptions, Validity};

fn open(dir: &std::path::Path, key: Option<&[u8; 32]>) -> tdb::Result<Array<LocalStorage>> {
    let mut options = OpenOptions::new();
    if let Some(k) = key {
        options = options.key(k)?;
    }
    Array::open_in(LocalStorage::new(dir), "", options)
}

/// Whether every nullable field's validity is in bits.
fn packed(batch: &Batch) -> bool {
    (batch.fields.iter()).all(|f| !matches!(f.validity, Some(Validity::Bytes(_))))
}

#[test]
fn validity_as_bits_holds_the_cells_validity_as_bytes_holds() {
    let (mut arrays, mut nullable) = (0, 0);
    for object in tdb_testdata::objects() {
        let Ok(array) = open(&object.dir, object.key.as_ref()) else {
            continue; // a group
        };
        let Some(spec) = whole(&array) else {
            continue; // nothing written
        };
        let what = format!("{} ({})", object.case, object.dir.display());
        let bytes = array.read_all(spec.clone()).unwrap();
        // Joined (every batch's bits appended at any bit position).
        let bits = array.read_all(spec.clone().with_packed_validity()).unwrap();
        assert!(packed(&bits), "{what}: bytes in a packed read");
        assert_eq!(bits, bytes, "{what}: joined");
        // Cut by the facade: 3 cells a batch, up to 2 cells short of all.
        let limit = bytes.num_cells.saturating_sub(2);
        let mut cut = Batch::default();
        for b in array
            .read(spec.with_packed_validity())
            .unwrap()
            .limit(limit)
            .batch_rows(3)
        {
            let b = b.unwrap();
            assert!(b.num_cells <= 3 && packed(&b), "{what}: a batch of cells");
            cut.append(&b);
        }
        let first: Vec<_> = (bytes.fields.iter())
            .map(|f| f.slice(0..limit as usize))
            .collect();
        assert_eq!(cut.num_cells, limit, "{what}");
        if limit > 0 {
            assert_eq!(cut.fields, first, "{what}: cut");
        }
        arrays += 1;
        nullable += usize::from(bytes.fields.iter().any(|f| f.validity.is_some()));
    }
    assert!(
        arrays > 150 && nullable > 20,
        "{arrays} arrays, {nullable} nullable"
    );
}
