//! Misuse gets a typed error that names what to change, before anything
//! is read: subarrays outside the domain or reversed (every dimension
//! type), unknown fields, conditions that do not fit the schema.

use tdb::{Array, Range, ReadSpec, Subarray};

fn array(case: &str) -> Array {
    Array::open(tdb_testdata::root().join(case).join("array")).unwrap()
}

fn error(case: &str, spec: ReadSpec) -> String {
    match array(case).read_all(spec) {
        Ok(b) => panic!("{case}: {} cells instead of an error", b.num_cells),
        Err(e) => {
            let mut msg = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                msg += &format!(" / {s}");
                source = s.source();
            }
            msg
        }
    }
}

fn one_range(lo: &[u8], hi: &[u8], var: bool) -> Subarray {
    let mut s = Subarray::new(1);
    s.add_range(0, Range::from_bounds(lo, hi, var));
    s
}

#[test]
fn subarrays_outside_the_domain_or_reversed_are_refused() {
    let int = |lo: i32, hi: i32| one_range(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
    let cases = [
        (
            "dense_1d_int32",
            int(5, 20),
            "subarray on dimension `d`: range [5, 20] is outside the domain [1, 10]",
        ),
        (
            "sparse_2d_int",
            int(200, 300),
            "subarray on dimension `x`: range [200, 300] is outside the domain [1, 100]",
        ),
        (
            "sparse_2d_int",
            int(5, 2),
            "subarray on dimension `x`: range [5, 2] is reversed",
        ),
        (
            "sparse_float_dims",
            one_range(&0.5f64.to_le_bytes(), &2.0f64.to_le_bytes(), false),
            "range [0.5, 2.0] is outside the domain [-1.0, 1.0]",
        ),
        (
            "sparse_string_dim",
            one_range(b"z", b"a", true),
            "range [\"z\", \"a\"] is reversed",
        ),
    ];
    for (case, sub, want) in cases {
        let msg = error(case, ReadSpec::new(Vec::<String>::new()).with_subarray(sub));
        assert!(msg.contains(want), "{case}: {msg}");
    }
}

/// A range on a dimension the array lacks is refused by name, however far
/// past the last it lies: no slot is made for each dimension up to it.
#[test]
fn ranges_on_dimensions_past_the_last_are_refused_without_slots_up_to_them() {
    let range = || Range::from_bounds(&1i32.to_le_bytes(), &2i32.to_le_bytes(), false);
    for dim in [2, 4095, 4096, usize::MAX] {
        let mut sub = Subarray::new(1);
        sub.add_range(dim, range());
        assert_eq!(sub.dim_num(), dim.saturating_add(1));
        let msg = error(
            "sparse_2d_int",
            ReadSpec::new(Vec::<String>::new()).with_subarray(sub),
        );
        let want = format!(
            "subarray on dimension `#{}`: the array has 2 dimensions",
            dim
        );
        assert!(msg.contains(&want), "{dim}: {msg}");
    }
    let msg = error(
        "sparse_2d_int",
        ReadSpec::new(Vec::<String>::new()).with_subarray(Subarray::new(usize::MAX)),
    );
    assert!(msg.contains("the array has 2 dimensions"), "{msg}");
}

#[test]
fn unknown_fields_and_ill_typed_conditions_are_refused() {
    let msg = error("sparse_2d_int", ReadSpec::new(["x", "nope"]));
    assert!(
        msg.contains("no field named `nope`") && msg.contains("x, y, a, f"),
        "{msg}"
    );
    let msg = error(
        "sparse_2d_int",
        ReadSpec::new(["a"]).with_condition("a > 'abc'"),
    );
    assert!(msg.contains("query condition"), "{msg}");
}
