//! The R-tree on hand-built trees: TileDB's build (levels, the
//! floating-point height quirk), both serialized layouts, the overlap
//! traversal (full, partial, none, the short last subtree, default
//! dimensions), the per-dimension bitmaps, and the errors.

use std::error::Error;
use tdb_format::{Datatype, FormatVersion};
use tdb_index::{IndexError, NDRange, RTree, Range, TileOverlap};
use tdb_schema::{Dimension, Domain};

fn domain(types: &[Datatype]) -> Domain {
    Domain::new(
        types
            .iter()
            .enumerate()
            .map(|(i, &datatype)| {
                let cell_val_num = if datatype == Datatype::StringAscii {
                    tdb_schema::VAR_NUM
                } else {
                    1
                };
                Dimension::new(format!("d{i}"), datatype, cell_val_num, Vec::new(), None)
            })
            .collect(),
    )
}

fn i32r(lo: i32, hi: i32) -> Range {
    Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false)
}

/// 25 one-dimensional tiles `[10 i, 10 i + 9]` under fanout 3.
fn tree25() -> (Domain, RTree) {
    let d = domain(&[Datatype::Int32]);
    let leaves = (0..25).map(|i| vec![i32r(10 * i, 10 * i + 9)]).collect();
    let t = RTree::build(&d, leaves, 3).unwrap();
    (d, t)
}

fn overlap(tree: &RTree, d: &Domain, lo: i32, hi: i32) -> TileOverlap {
    tree.tile_overlap(d, &[i32r(lo, hi)]).unwrap()
}

#[test]
fn build_groups_fanout_children_bottom_up() {
    let (_, t) = tree25();
    let sizes: Vec<usize> = t.levels.iter().map(Vec::len).collect();
    assert_eq!(sizes, [1, 3, 9, 25]);
    assert_eq!(t.levels[0][0], vec![i32r(0, 249)]);
    assert_eq!(
        t.levels[1],
        vec![vec![i32r(0, 89)], vec![i32r(90, 179)], vec![i32r(180, 249)]]
    );
    assert_eq!(t.levels[2][8], vec![i32r(240, 249)]);
    assert_eq!(t.subtree_leaf_num(1), 9);
    // One leaf: the leaf level alone; none: no levels.
    let d = domain(&[Datatype::Int32]);
    let one = RTree::build(&d, vec![vec![i32r(1, 2)]], 10).unwrap();
    assert_eq!(one.height(), 1);
    assert_eq!(RTree::build(&d, Vec::new(), 10).unwrap().height(), 0);
}

#[test]
fn build_keeps_tiledbs_floating_point_height() {
    // ln(125) / ln(5) is 3.0000000000000004 in doubles: TileDB builds four
    // levels above the leaves, the top two single MBRs.
    let d = domain(&[Datatype::Int32]);
    let leaves: Vec<NDRange> = (0..125).map(|i| vec![i32r(i, i)]).collect();
    let t = RTree::build(&d, leaves, 5).unwrap();
    let sizes: Vec<usize> = t.levels.iter().map(Vec::len).collect();
    assert_eq!(sizes, [1, 1, 5, 25, 125]);
    // ln(1000) / ln(10) rounds the other way: exactly three.
    let leaves: Vec<NDRange> = (0..1000).map(|i| vec![i32r(i, i)]).collect();
    let t = RTree::build(&d, leaves, 10).unwrap();
    assert_eq!(t.height(), 4);
}

#[test]
fn write_and_parse_are_mirrors_and_v4_has_its_own_header() {
    let (d, t) = tree25();
    let mut out = Vec::new();
    t.write(&mut out);
    assert_eq!(&out[..8], &[3, 0, 0, 0, 4, 0, 0, 0]);
    assert_eq!(RTree::parse(&out, &d, FormatVersion::WRITTEN).unwrap(), t);
    // v1–v4: dimension count, fanout, datatype, then the same levels.
    let mut v4 = vec![1, 0, 0, 0, 3, 0, 0, 0, Datatype::Int32.code()];
    v4.extend_from_slice(&out[4..]);
    let v = FormatVersion::new(4).unwrap();
    assert_eq!(RTree::parse(&v4, &d, v).unwrap(), t);
    // Var-size ranges carry their lengths.
    let d = domain(&[Datatype::StringAscii, Datatype::Int32]);
    let leaves = vec![
        vec![Range::from_bounds(b"a", b"bc", true), i32r(1, 2)],
        vec![Range::from_bounds(b"", b"zz", true), i32r(-5, 0)],
    ];
    let t = RTree::build(&d, leaves, 10).unwrap();
    assert_eq!(t.levels[0][0][0], Range::from_bounds(b"", b"zz", true));
    assert_eq!(t.levels[0][0][1], i32r(-5, 2));
    let mut out = Vec::new();
    t.write(&mut out);
    assert_eq!(RTree::parse(&out, &d, FormatVersion::WRITTEN).unwrap(), t);
}

#[test]
fn overlap_full_partial_and_none() {
    let (d, t) = tree25();
    let all = overlap(&t, &d, 0, 249);
    assert_eq!(all.tile_ranges, [(0, 24)]);
    assert!(all.tiles.is_empty());
    // Covered subtrees come whole, partial leaves with their ratio, in
    // depth-first left-to-right order.
    let o = overlap(&t, &d, 15, 94);
    assert_eq!(o.tile_ranges, [(2, 2), (3, 5), (6, 8)]);
    assert_eq!(o.tiles, [(1, 0.5), (9, 0.5)]);
    assert_eq!(overlap(&t, &d, 250, 400), TileOverlap::default());
    // The last subtree is short: a covered node stops at the last leaf.
    let o = overlap(&t, &d, 200, 300);
    assert_eq!(o.tile_ranges, [(20, 20), (21, 23), (24, 24)]);
    assert!(o.tiles.is_empty());
    let o = overlap(&t, &d, 175, 300);
    assert_eq!(o.tile_ranges, [(18, 24)]);
    assert_eq!(o.tiles, [(17, 0.5)]);
}

#[test]
fn default_dimensions_are_skipped() {
    let d = domain(&[Datatype::Int32, Datatype::StringAscii]);
    let leaves = (0..4)
        .map(|i| {
            vec![
                i32r(10 * i, 10 * i + 9),
                Range::from_bounds(b"a", b"m", true),
            ]
        })
        .collect();
    let t = RTree::build(&d, leaves, 2).unwrap();
    // A string range covering half of 'a'..='m' makes every tile partial...
    let half = vec![i32r(0, 39), Range::from_bounds(b"a", b"f", true)];
    let o = t.tile_overlap(&d, &half).unwrap();
    assert_eq!(o.tiles.len(), 4);
    assert!(o.tile_ranges.is_empty());
    // ...unless that dimension is marked default, whose (empty) range is
    // not even looked at.
    let dflt = vec![i32r(0, 39), Range::from_bounds(b"", b"", true)];
    let o = t
        .tile_overlap_with_defaults(&d, &dflt, &[false, true])
        .unwrap();
    assert_eq!(o.tile_ranges, [(0, 3)]);
}

#[test]
fn bitmaps_per_dimension_and_multi_range() {
    let (d, t) = tree25();
    let mut bitmap = vec![false; 25];
    t.tile_bitmap(&d, 0, &i32r(15, 25), &mut bitmap).unwrap();
    t.tile_bitmap(&d, 0, &i32r(200, 205), &mut bitmap).unwrap();
    let set: Vec<usize> = (0..25).filter(|&i| bitmap[i]).collect();
    assert_eq!(set, [1, 2, 20]);
    let runs = t
        .tile_ranges_multi(&d, &[vec![i32r(15, 25), i32r(200, 235), i32r(240, 241)]])
        .unwrap();
    assert_eq!(runs, [(1, 2), (20, 24)]);
    assert_eq!(t.tile_ranges_multi(&d, &[vec![]]).unwrap(), [(0, 24)]);
    assert!(t.tile_bitmap(&d, 1, &i32r(0, 1), &mut bitmap).is_err());
}

#[test]
fn errors_name_what_was_bad_without_repeating_the_cause() {
    let (d, t) = tree25();
    let mut out = Vec::new();
    t.write(&mut out);
    let v = FormatVersion::WRITTEN;
    // A cut inside the fixed-size MBRs: the count no longer fits.
    let e = RTree::parse(&out[..out.len() - 3], &d, v).unwrap_err();
    assert!(
        matches!(
            e,
            IndexError::TooManyMbrs {
                level: 3,
                count: 25,
                ..
            }
        ),
        "{e}"
    );
    // A cut inside a var-size MBR.
    let ds = domain(&[Datatype::StringAscii]);
    let leaves = vec![vec![Range::from_bounds(b"abc", b"abd", true)]];
    let mut one = Vec::new();
    RTree::build(&ds, leaves, 10).unwrap().write(&mut one);
    let e = RTree::parse(&one[..one.len() - 1], &ds, v).unwrap_err();
    assert!(
        matches!(
            e,
            IndexError::Mbr {
                level: 0,
                mbr: 0,
                ..
            }
        ),
        "{e}"
    );
    let cause = e.source().unwrap().to_string();
    assert!(!e.to_string().contains(&cause), "{e} / {cause}");
    // A count beyond the bytes: refused before allocating.
    let mut huge = out[..8].to_vec();
    huge.extend_from_slice(&u64::MAX.to_le_bytes());
    let e = RTree::parse(&huge, &d, v).unwrap_err();
    assert!(matches!(e, IndexError::TooManyMbrs { level: 0, .. }), "{e}");
    // Trailing bytes.
    let mut long = out.clone();
    long.push(0);
    assert!(matches!(
        RTree::parse(&long, &d, v),
        Err(IndexError::TrailingBytes { count: 1 })
    ));
    // A level of the wrong size for the fanout.
    let mut wrong = out.clone();
    wrong[0] = 4;
    let e = RTree::parse(&wrong, &d, v).unwrap_err();
    assert!(matches!(e, IndexError::Shape { level: 2, .. }), "{e}");
    // Builds and queries that do not fit the domain.
    let leaves: Vec<NDRange> = vec![vec![i32r(0, 1)], vec![i32r(2, 3)]];
    assert!(matches!(
        RTree::build(&d, leaves.clone(), 1),
        Err(IndexError::Fanout {
            fanout: 1,
            leaves: 2
        })
    ));
    let e = RTree::build(&d, vec![vec![i32r(0, 1), i32r(0, 1)]], 10).unwrap_err();
    assert!(e.to_string().starts_with("MBR 0"), "{e}");
    let e = t.tile_overlap(&d, &[Range::Fixed(vec![0; 3])]).unwrap_err();
    assert!(e.to_string().starts_with("subarray dimension 0"), "{e}");
}

/// `leaves_where` finds exactly the leaves a test over every leaf finds, in
/// order, and tests fewer nodes than there are leaves for a narrow query.
#[test]
fn leaves_where_finds_the_leaves_a_full_scan_finds() {
    let (d, t) = tree25();
    let ops = tdb_index::DomainOps::new(&d).unwrap();
    for (lo, hi) in [(0, 249), (35, 47), (95, 95), (240, 300), (-5, -1), (89, 90)] {
        let q = [i32r(lo, hi)];
        let scan: Vec<u64> = (0..t.leaves().len() as u64)
            .filter(|&i| ops.overlaps(&t.leaves()[i as usize], &q))
            .collect();
        let mut tested = 0;
        let found = t.leaves_where(|mbr| {
            tested += 1;
            ops.overlaps(mbr, &q)
        });
        assert_eq!(found, scan, "[{lo}, {hi}]");
        if hi - lo < 20 {
            assert!(tested < 25, "[{lo}, {hi}]: {tested} nodes tested");
        }
    }
    assert!(RTree::empty(10).leaves_where(|_| true).is_empty());
}
