//! Writers that share nothing but the array directory: each gets its own
//! fragments and metadata files (fresh UUID names, whole-object writes, no
//! shared file touched), so none disturbs another and nothing is lost.

use tdb::{Array, ArraySchema, Datatype, FieldBuffer, MetadataValue, ReadSpec, WriteSpec};
use tdb_format::ArrayType;
use tdb_schema::{AttributeBuilder, DimensionBuilder};

const THREADS: i64 = 8;
const FRAGMENTS: i64 = 100;

fn int64s(name: &str, v: &[i64]) -> FieldBuffer {
    let mut b = FieldBuffer::new(name, Datatype::Int64, 1, false);
    b.data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    b
}

#[test]
fn eight_threads_writing_a_hundred_fragments_each_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("arr");
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", 0i64..=1_000_000).tile_extent(1000i64))
        .attribute(AttributeBuilder::new("a", Datatype::Int64))
        .build()
        .unwrap();
    Array::create(&path, &schema).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let path = &path;
            s.spawn(move || {
                let array = Array::open(path).unwrap();
                for f in 0..FRAGMENTS {
                    // Two cells per fragment, unique to this thread and write.
                    let x = [t * 10_000 + f * 2, t * 10_000 + f * 2 + 1];
                    let a = [x[0] * 3, x[1] * 3];
                    array
                        .write(WriteSpec::new(vec![int64s("x", &x), int64s("a", &a)]))
                        .unwrap();
                }
                let v = MetadataValue::new(Datatype::Int64, 1, t.to_le_bytes().to_vec()).unwrap();
                array.put_metadata(&format!("writer{t}"), v).unwrap();
            });
        }
    });
    let array = Array::open(&path).unwrap();
    assert_eq!(array.fragments().len() as i64, THREADS * FRAGMENTS);
    let cells = array.read_all(ReadSpec::new(["x", "a"])).unwrap();
    let col = |name: &str| -> Vec<i64> {
        cells
            .field(name)
            .unwrap()
            .data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let (mut x, a) = (col("x"), col("a"));
    for (x, a) in x.iter().zip(&a) {
        assert_eq!(*a, x * 3);
    }
    x.sort_unstable();
    let expected: Vec<i64> = (0..THREADS)
        .flat_map(|t| (0..FRAGMENTS * 2).map(move |i| t * 10_000 + i))
        .collect();
    assert_eq!(x, expected);
    let md = array.metadata().unwrap();
    assert_eq!(md.len() as i64, THREADS);
    for t in 0..THREADS {
        let v = md.get(&format!("writer{t}")).unwrap();
        assert_eq!(v.bytes, t.to_le_bytes());
    }
}
