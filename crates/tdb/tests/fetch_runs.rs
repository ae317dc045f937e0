//! On local storage a piece's run of neighbouring tiles is fetched in
//! requests of about 512 KiB (a run ends at the tile that takes it there;
//! no tile is cut), which the pool reads side by side; on remote storage a
//! run is one request however long (each is a round trip).

use tdb::{
    Array, ArraySchema, ArrayType, AttributeBuilder, Datatype, DimensionBuilder, FieldBuffer,
    OpenOptions, ReadSpec, ResultLayout, WriteSpec,
};
use tdb_storage::{LocalStorage, RecordingStorage, Request};

#[test]
fn local_reads_fetch_runs_of_tiles_in_requests_of_half_a_mebibyte() {
    // 128 tiles of 64 × 64 INT32 cells (16 KiB each), 2 MiB in one file.
    let (rows, cols) = (512i32, 1024i32);
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("r", 0i32..=rows - 1).tile_extent(64i32))
        .dimension(DimensionBuilder::range("c", 0i32..=cols - 1).tile_extent(64i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let array = Array::create(dir.path(), &schema).unwrap();
    let mut a = FieldBuffer::new("a", Datatype::Int32, 1, false);
    for i in 0..rows * cols {
        a.push(&i.to_le_bytes(), true);
    }
    array.write(WriteSpec::new(vec![a]).at(1)).unwrap();
    let storage = RecordingStorage::new(LocalStorage::new(dir.path()));
    let array = Array::open_in(storage, "", OpenOptions::new()).unwrap();
    array.storage().take();
    let got = array
        .read_all(ReadSpec::new(["a"]).with_layout(ResultLayout::RowMajor))
        .unwrap();
    let column = got.fields[0].column();
    assert_eq!(got.num_cells, (rows * cols) as u64);
    for i in 0..got.num_cells as usize {
        assert_eq!(column.cell(i), &(i as i32).to_le_bytes()[..], "cell {i}");
    }
    let lens: Vec<u64> = (array.storage().take().iter())
        .flat_map(Request::ranges)
        .filter(|(key, _, _)| key.ends_with("a0.tdb"))
        .filter_map(|(_, _, bytes)| *bytes)
        .collect();
    let tile = 16u64 << 10;
    assert!(lens.iter().sum::<u64>() >= 128 * tile, "{lens:?}");
    // Runs, not tiles; none past the cap by more than a tile (and its
    // header).
    assert!(lens.len() >= 4, "{lens:?}");
    assert!(lens.iter().any(|&n| n >= 256 << 10), "{lens:?}");
    assert!(
        lens.iter().all(|&n| n < (512 << 10) + tile + 1024),
        "{lens:?}"
    );
}
