//! Dimension labels: reads by label ranges answer as TileDB (the
//! conformance corpus pins the cells of `dim_labels_dense` and
//! `dim_labels_sparse`); these tests pin what the corpus cannot state:
//! the index ranges a label range becomes, and every refusal.

use tdb::{Array, OpenOptions, ReadSpec, Subarray};

fn fixture(case: &str) -> Array {
    Array::open(tdb_testdata::root().join(case).join("array")).unwrap()
}

/// The index ranges (as `i32` pairs) dimension `dim` reads once `sub`'s
/// label ranges are resolved.
fn indexes(array: &Array, sub: &Subarray, dim: usize) -> Vec<(i32, i32)> {
    let resolved = array.resolve_labels(sub).unwrap();
    assert!(resolved.label_ranges().is_empty());
    resolved
        .ranges(dim)
        .iter()
        .map(|r| {
            let (lo, hi) = r.bounds();
            (
                i32::from_le_bytes(lo.try_into().unwrap()),
                i32::from_le_bytes(hi.try_into().unwrap()),
            )
        })
        .collect()
}

fn err(r: Result<impl std::fmt::Debug, tdb::Error>) -> String {
    let e = r.unwrap_err();
    let mut s = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(x) = src {
        s = format!("{s}: {x}");
        src = x.source();
    }
    s
}

#[test]
fn label_ranges_become_the_indexes_whose_labels_they_hold() {
    let array = fixture("dim_labels_dense");
    let s = array.schema().clone();
    // lx, after the second write: -1, 0, 0.25, 0.5, 2.5, 3.75, 5, 6, 7, 8.
    let mut sub = Subarray::default();
    sub.add_label(&s, "lx", 0.3..=3.0).unwrap();
    sub.add_label(&s, "lx", 0.5..=5.0).unwrap();
    sub.add_label(&s, "lx", -9.0..=-1.0).unwrap();
    sub.add_label(&s, "lx", 7.5..=1e9).unwrap();
    assert_eq!(indexes(&array, &sub, 0), [(3, 4), (3, 6), (0, 0), (9, 9)]);
    // Decreasing ASCII labels of y (1..=6): zz, yy, y, m, bb, b.
    let mut sub = Subarray::default();
    sub.add_label(&s, "sy", "bz"..="y").unwrap();
    sub.add_label(&s, "sy", "b").unwrap();
    assert_eq!(indexes(&array, &sub, 1), [(3, 4), (6, 6)]);
    // At the first write's time lx was -1, 0, 1, ..., 8.
    let first = Array::open_with(
        tdb_testdata::root().join("dim_labels_dense").join("array"),
        OpenOptions::new().at(1),
    )
    .unwrap();
    let mut sub = Subarray::default();
    sub.add_label(&s, "lx", 0.3..=3.0).unwrap();
    assert_eq!(indexes(&first, &sub, 0), [(2, 4)]);
}

#[test]
fn label_data_is_one_value_per_index_read() {
    let array = fixture("dim_labels_dense");
    let mut sub = Subarray::new(2);
    sub.add(array.schema(), "x", 1..=3).unwrap();
    sub.add(array.schema(), "x", 8).unwrap();
    let lx = array.label_values("lx", &sub).unwrap();
    let got: Vec<f64> = lx
        .data
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, [0.0, 0.25, 0.5, 7.0]);
    // No range on y: the whole dimension.
    let ky = array.label_values("ky", &sub).unwrap();
    assert_eq!(ky.data.len(), 6 * 2);
}

#[test]
fn reads_take_label_ranges_as_the_indexes_they_become() {
    let array = fixture("dim_labels_sparse");
    let by_label = ReadSpec::new(["x", "a"])
        .label_range(array.schema(), "lx", -30..=3)
        .unwrap();
    let by_index = ReadSpec::new(["x", "a"])
        .range(array.schema(), "x", 2..=5)
        .unwrap();
    let a = array.read_all(by_label.clone()).unwrap();
    assert_eq!(a, array.read_all(by_index).unwrap());
    assert_eq!(a.num_cells, 3);
    // Aggregates resolve them too.
    let n = array
        .aggregate(by_label, &[("a".into(), tdb::AggregateOp::Count)])
        .unwrap();
    assert_eq!(n[0].value, Some(tdb::AggregateValue::Count(3)));
}

#[test]
fn label_misuse_and_empty_ranges_are_refused_with_what_to_change() {
    let array = fixture("dim_labels_dense");
    let s = array.schema().clone();
    let resolve = |f: &dyn Fn(&mut Subarray)| {
        let mut sub = Subarray::default();
        f(&mut sub);
        err(array.resolve_labels(&sub))
    };
    // A range between two labels holds none (TileDB: "Range contained no
    // values").
    let e = resolve(&|sub| {
        sub.add_label(&s, "lx", 0.3..=0.4).unwrap();
    });
    assert!(e.contains("`lx`") && e.contains("holds no label"), "{e}");
    let e = resolve(&|sub| {
        sub.add_label(&s, "lx", 2.0..=1.0).unwrap();
    });
    assert!(e.contains("reversed"), "{e}");
    let e = resolve(&|sub| {
        sub.add_label(&s, "lx", 0.0..=1.0).unwrap();
        sub.add_label(&s, "tx", "a"..="b").unwrap();
    });
    assert!(e.contains("already has ranges of label `lx`"), "{e}");
    let e = resolve(&|sub| {
        sub.add(&s, "x", 1..=2).unwrap();
        sub.add_label(&s, "lx", 0.0..=1.0).unwrap();
    });
    assert!(e.contains("ranges of its own"), "{e}");
    // Typed bounds are checked against the label's datatype.
    let e = Subarray::default()
        .add_label(&s, "lx", "a"..="b")
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no value of a FLOAT64 label"), "{e}");
    let e = Subarray::default()
        .add_label(&s, "nope", 1..=2)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("labels: lx, tx, ky, sy"), "{e}");
    // A stream takes index ranges only (resolving reads the labels' arrays).
    let spec = ReadSpec::new(["a"])
        .label_range(&s, "lx", 0.0..=1.0)
        .unwrap();
    let e = err(array.read_stream(spec).map(|_| ()));
    assert!(e.contains("label::resolve"), "{e}");
}

mod writes {
    use super::err;
    use tdb::{
        Array, ArraySchema, ArrayType, AttributeBuilder, Datatype, DimensionBuilder, FieldBuffer,
        ReadSpec, Subarray, WriteSpec,
    };
    use tdb_format::DataOrder;

    fn f64s(name: &str, v: &[f64]) -> FieldBuffer {
        let mut b = FieldBuffer::new(name, Datatype::Float64, 1, false);
        for x in v {
            b.push(&x.to_le_bytes(), true);
        }
        b
    }

    fn i32s(name: &str, v: &[i32]) -> FieldBuffer {
        let mut b = FieldBuffer::new(name, Datatype::Int32, 1, false);
        for x in v {
            b.push(&x.to_le_bytes(), true);
        }
        b
    }

    fn strs(name: &str, v: &[&str]) -> FieldBuffer {
        let mut b = FieldBuffer::new(name, Datatype::StringAscii, tdb::VAR_NUM, false);
        for x in v {
            b.push(x.as_bytes(), true);
        }
        b
    }

    /// A dense 1D array over 0..=n-1 (tiles of `tile`) with an increasing
    /// float64 label `t` and a decreasing ASCII label `s`.
    fn dense(dir: &std::path::Path, n: i32, tile: i32) -> Array {
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dimension(DimensionBuilder::range("x", 0i32..=n - 1).tile_extent(tile))
            .attribute(AttributeBuilder::new("a", Datatype::Int32))
            .dimension_label("x", "t", DataOrder::Increasing, Datatype::Float64)
            .dimension_label("x", "s", DataOrder::Decreasing, Datatype::StringAscii)
            .build()
            .unwrap();
        Array::create(dir, &schema).unwrap()
    }

    fn box_write(lo: i32, hi: i32) -> WriteSpec {
        let mut sub = Subarray::new(1);
        sub.add_range(
            0,
            tdb::Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false),
        );
        let a: Vec<i32> = (lo..=hi).map(|i| i * 10).collect();
        WriteSpec::new(vec![i32s("a", &a)]).with_subarray(sub)
    }

    fn a_by_label(array: &Array, lo: f64, hi: f64) -> Result<Vec<i32>, tdb::Error> {
        let spec = ReadSpec::new(["a"]).label_range(array.schema(), "t", lo..=hi)?;
        let b = array.read_all(spec)?;
        Ok(b.fields[0]
            .data
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect())
    }

    #[test]
    fn written_labels_read_back_by_range() {
        let dir = tempfile::tempdir().unwrap();
        let array = dense(dir.path(), 10, 4);
        let t: Vec<f64> = (0..10).map(|i| f64::from(i) * 1.5).collect();
        let s = ["z", "y", "x", "w", "v", "u", "t", "s", "r", "q"];
        array
            .write(
                box_write(0, 9)
                    .with_label(f64s("t", &t))
                    .with_label(strs("s", &s)),
            )
            .unwrap();
        let array = Array::open(dir.path()).unwrap();
        assert_eq!(a_by_label(&array, 2.0, 6.0).unwrap(), [20, 30, 40]);
        let spec = ReadSpec::new(["a"])
            .label_range(array.schema(), "s", "r"..="tz")
            .unwrap();
        assert_eq!(array.read_all(spec).unwrap().num_cells, 3);
        // Labels and cells carry one timestamp; the labels' arrays are
        // TileDB's (their schemas are what TileDB makes: tdb-schema's
        // `label_arrays_have_the_schemas_tiledb_makes`).
        let label = array.label("t").unwrap();
        assert_eq!(
            label.snapshot().fragments[0].file.name.timestamp_range(),
            array.fragments()[0].file.name.timestamp_range()
        );
        // A later write relabels part of the dimension.
        array
            .write(box_write(4, 5).with_label(f64s("t", &[6.1, 6.2])))
            .unwrap();
        let array = Array::open(dir.path()).unwrap();
        assert_eq!(a_by_label(&array, 6.0, 7.0).unwrap(), [40, 50]);
    }

    #[test]
    fn sparse_writes_label_the_run_of_their_coordinates() {
        let dir = tempfile::tempdir().unwrap();
        let schema = ArraySchema::builder(ArrayType::Sparse)
            .dimension(DimensionBuilder::range("x", 0i64..=99).tile_extent(10i64))
            .attribute(AttributeBuilder::new("a", Datatype::Int32))
            .dimension_label("x", "k", DataOrder::Increasing, Datatype::Int32)
            .build()
            .unwrap();
        let array = Array::create(dir.path(), &schema).unwrap();
        let coords = |v: &[i64]| {
            let mut b = FieldBuffer::new("x", Datatype::Int64, 1, false);
            for x in v {
                b.push(&x.to_le_bytes(), true);
            }
            b
        };
        let spec = WriteSpec::new(vec![coords(&[5, 6, 7]), i32s("a", &[1, 2, 3])])
            .with_label(i32s("k", &[100, 200, 300]));
        array.write(spec).unwrap();
        let array = Array::open(dir.path()).unwrap();
        let spec = ReadSpec::new(["x", "a"])
            .label_range(array.schema(), "k", 150..=1000)
            .unwrap();
        assert_eq!(array.read_all(spec).unwrap().num_cells, 2);
        let gap = WriteSpec::new(vec![coords(&[10, 12]), i32s("a", &[1, 2])])
            .with_label(i32s("k", &[400, 500]));
        let e = err(array.write(gap));
        assert!(e.contains("run one by one"), "{e}");
    }

    #[test]
    fn bad_label_data_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let array = dense(dir.path(), 10, 4);
        let t5: Vec<f64> = (0..5).map(f64::from).collect();
        let cases: Vec<(WriteSpec, &str)> = vec![
            (
                box_write(0, 4).with_label(f64s("t", &t5[..4])),
                "4 labels given for the 5",
            ),
            (
                box_write(0, 4).with_label(f64s("t", &[0.0, 1.0, 1.0, 2.0, 3.0])),
                "strictly increasing: label 2",
            ),
            (
                box_write(0, 1).with_label(strs("s", &["a", "b"])),
                "strictly decreasing",
            ),
            (
                box_write(0, 4).with_label(i32s("t", &[0, 1, 2, 3, 4])),
                "data of INT32",
            ),
            (
                box_write(0, 4).with_label(f64s("nope", &t5)),
                "no such label",
            ),
            (
                box_write(0, 4)
                    .with_label(f64s("t", &t5))
                    .with_label(f64s("t", &t5)),
                "given twice",
            ),
            (
                // A good label is not written when another is bad.
                box_write(0, 4)
                    .with_label(f64s("t", &t5))
                    .with_label(strs("s", &["e", "d", "c", "d", "a"])),
                "strictly decreasing: label 3",
            ),
        ];
        for (spec, want) in cases {
            let e = err(array.write(spec));
            assert!(e.contains(want), "{want}: {e}");
        }
        let array = Array::open(dir.path()).unwrap();
        assert!(array.fragments().is_empty());
        for l in ["t", "s"] {
            assert!(
                array.label(l).unwrap().snapshot().fragments.is_empty(),
                "{l}"
            );
        }
        // A fragment writer (parts) takes no label data.
        let e = err(array
            .writer(box_write(0, 4).with_label(f64s("t", &t5)))
            .map(|_| ()));
        assert!(e.contains("not a fragment writer"), "{e}");
    }

    #[test]
    fn labels_out_of_order_across_writes_or_with_holes_are_refused_on_read() {
        let dir = tempfile::tempdir().unwrap();
        let array = dense(dir.path(), 10, 4);
        array
            .write(box_write(0, 3).with_label(f64s("t", &[10.0, 11.0, 12.0, 13.0])))
            .unwrap();
        array
            .write(box_write(6, 9).with_label(f64s("t", &[20.0, 21.0, 22.0, 23.0])))
            .unwrap();
        let e = err(a_by_label(&Array::open(dir.path()).unwrap(), 0.0, 100.0));
        assert!(e.contains("no label was written at indexes [4, 5]"), "{e}");
        array
            .write(box_write(4, 5).with_label(f64s("t", &[1.0, 2.0])))
            .unwrap();
        let e = err(a_by_label(&Array::open(dir.path()).unwrap(), 0.0, 100.0));
        assert!(
            e.contains("indexes 3 and 4 are not strictly increasing"),
            "{e}"
        );
    }

    #[test]
    fn a_range_over_a_long_label_reads_a_few_of_its_tiles() {
        let dir = tempfile::tempdir().unwrap();
        let n = 20_000;
        let array = dense(dir.path(), n, 100);
        let t: Vec<f64> = (0..n).map(|i| f64::from(i) / 10.0).collect();
        array
            .write(box_write(0, n - 1).with_label(f64s("t", &t)))
            .unwrap();
        let storage = tdb_storage::RecordingStorage::new(tdb::LocalStorage::new(dir.path()));
        let array = Array::open_in(storage, "", tdb::OpenOptions::new()).unwrap();
        array.storage().take();
        let mut sub = Subarray::default();
        sub.add_label(array.schema(), "t", 1234.56..=1500.0)
            .unwrap();
        let resolved = array.resolve_labels(&sub).unwrap();
        let (lo, hi) = resolved.ranges(0)[0].bounds();
        assert_eq!(
            (
                i32::from_le_bytes(lo.try_into().unwrap()),
                i32::from_le_bytes(hi.try_into().unwrap())
            ),
            (12346, 15000)
        );
        // Two bounds, each a binary search over 200 tiles: about eight
        // tiles each (one tile read per probe into a new tile), never the
        // whole label.
        let tiles_read = array
            .storage()
            .take()
            .iter()
            .flat_map(tdb_storage::Request::ranges)
            .filter(|(key, _, _)| {
                key.contains("__labels/l0/__fragments") && key.ends_with("a0.tdb")
            })
            .count();
        assert!(
            (2..=24).contains(&tiles_read),
            "{tiles_read} label tiles read"
        );
    }
}
