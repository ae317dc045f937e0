//! The R-tree against every fragment real TileDB wrote in `testdata/` (all
//! format versions, arrays in groups, encrypted arrays): parse, write back
//! (v22), rebuild from the leaves, truncations, and overlap queries against a
//! scan of the leaves.

use std::sync::OnceLock;
use tdb_format::{classify, fragment_metadata_tiles, le, FormatVersion, ObjectFile};
use tdb_index::{DomainOps, IndexError, NDRange, RTree, Range, DEFAULT_FANOUT};
use tdb_schema::Domain;
use tdb_storage::LocalStorage;
use tdb_tile::read_generic_tile;

/// One fragment's index as TileDB stored it.
struct Fragment {
    label: String,
    version: FormatVersion,
    domain: Domain,
    dense: bool,
    encrypted: bool,
    nested: bool,
    stored: Stored,
}

enum Stored {
    /// v3+: the R-tree generic tile, unfiltered.
    Tree(Vec<u8>),
    /// v1–v2: the MBR list of the single metadata tile.
    Mbrs(Vec<NDRange>),
}

fn fragments() -> &'static [Fragment] {
    static ALL: OnceLock<Vec<Fragment>> = OnceLock::new();
    ALL.get_or_init(load)
}

fn load() -> Vec<Fragment> {
    let mut out = Vec::new();
    for obj in tdb_testdata::objects() {
        let metas: Vec<&String> = obj
            .files
            .iter()
            .filter(|f| matches!(classify(f), ObjectFile::FragmentMetadata { .. }))
            .collect();
        if metas.is_empty() {
            continue;
        }
        let storage = LocalStorage::new(&obj.dir);
        let history = tdb_fragment::load_schemas(&storage, "", obj.key.as_ref())
            .unwrap_or_else(|e| panic!("{}: {e}", obj.case));
        let domain = history.latest().schema.domain.clone();
        for path in metas {
            let label = format!("{}/{path}", obj.case);
            let bytes = obj.read(path);
            let (tiles, footer) = fragment_metadata_tiles(&bytes).unwrap();
            let version = tiles[0].tile.header.version;
            let content = read_generic_tile(&label, &tiles[0].tile, obj.key.as_ref())
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            let fragment_dir = path.rsplit_once('/').map_or("", |(d, _)| d);
            let (dense, stored) = if version.has_fragment_metadata_footer() {
                (footer_dense(footer, version), Stored::Tree(content))
            } else {
                let coords = format!("{fragment_dir}/__coords.tdb");
                (
                    !obj.files.contains(&coords),
                    Stored::Mbrs(legacy_mbrs(&content, &domain)),
                )
            };
            out.push(Fragment {
                label,
                version,
                domain: domain.clone(),
                dense,
                encrypted: obj.key.is_some(),
                nested: obj.expected.is_none(),
                stored,
            });
        }
    }
    out
}

/// The dense flag of a v3+ footer: after the version and (v10+) the schema
/// name.
fn footer_dense(footer: &[u8], version: FormatVersion) -> bool {
    let (_, mut rest) = le::run(le::u32("version"), footer).unwrap();
    if version.get() >= 10 {
        rest = le::run(le::bytes_u64("schema name"), rest).unwrap().1;
    }
    le::run(le::bool("dense"), rest).unwrap().0
}

/// v1–v2 fragment metadata: version, non-empty domain (`u64` size + bytes),
/// then the MBR count and MBRs of two fixed values per dimension.
fn legacy_mbrs(content: &[u8], domain: &Domain) -> Vec<NDRange> {
    let (_, rest) = le::run(le::u32("version"), content).unwrap();
    let (_, rest) = le::run(le::bytes_u64("non-empty domain"), rest).unwrap();
    let (n, mut rest) = le::run(le::u64("MBR count"), rest).unwrap();
    (0..n)
        .map(|_| domain.read_nd_range(&mut rest, "MBR").unwrap())
        .collect()
}

fn parse(f: &Fragment) -> RTree {
    match &f.stored {
        Stored::Tree(bytes) => RTree::parse(bytes, &f.domain, f.version)
            .unwrap_or_else(|e| panic!("{}: {e} ({:?})", f.label, std::error::Error::source(&e))),
        Stored::Mbrs(mbrs) => RTree::build(&f.domain, mbrs.clone(), DEFAULT_FANOUT).unwrap(),
    }
}

#[test]
fn every_fragment_parses_with_a_leaf_per_sparse_tile() {
    let mut versions = std::collections::BTreeSet::new();
    let (mut sparse, mut dense, mut legacy, mut var) = (0, 0, 0, 0);
    let (mut encrypted, mut nested) = (0, 0);
    for f in fragments() {
        let tree = parse(f);
        versions.insert(f.version.get());
        if f.dense {
            assert!(
                tree.leaves().is_empty(),
                "{}: dense fragment with MBRs",
                f.label
            );
            dense += 1;
        } else {
            assert!(!tree.leaves().is_empty(), "{}: no leaves", f.label);
            sparse += 1;
        }
        encrypted += usize::from(f.encrypted);
        nested += usize::from(f.nested);
        if matches!(f.stored, Stored::Mbrs(_)) {
            legacy += 1;
        }
        if f.domain.dimensions.iter().any(|d| d.is_var()) {
            var += 1;
        }
        for level in &tree.levels {
            for mbr in level {
                DomainOps::new(&f.domain)
                    .unwrap()
                    .check(mbr, &f.label)
                    .unwrap();
            }
        }
    }
    eprintln!(
        "versions {versions:?}: {sparse} sparse, {dense} dense, {legacy} legacy, \
         {var} with string dimensions, {encrypted} encrypted, {nested} in groups"
    );
    assert!(sparse > 30 && dense > 10 && legacy > 0 && var > 0 && encrypted > 0);
    assert!(versions.len() > 15, "{versions:?}");
}

#[test]
fn v22_trees_write_back_byte_for_byte() {
    let mut n = 0;
    for f in fragments() {
        let Stored::Tree(bytes) = &f.stored else {
            continue;
        };
        if f.version != FormatVersion::WRITTEN {
            continue;
        }
        let mut out = Vec::new();
        parse(f).write(&mut out);
        assert!(out == *bytes, "{}: written R-tree differs", f.label);
        n += 1;
    }
    assert!(n > 30, "{n}");
}

#[test]
fn building_from_the_leaves_gives_the_stored_tree() {
    let (mut multi_level, mut two) = (0, 0);
    for f in fragments() {
        let tree = parse(f);
        let rebuilt = RTree::build(&f.domain, tree.leaves().to_vec(), tree.fanout).unwrap();
        if tree.leaves().is_empty() {
            // TileDB stores an empty tree as no levels (or one empty one).
            assert!(tree.levels.iter().all(Vec::is_empty), "{}", f.label);
            continue;
        }
        assert_eq!(tree.fanout, DEFAULT_FANOUT, "{}", f.label);
        assert!(rebuilt == tree, "{}: rebuilt tree differs", f.label);
        if tree.height() > 2 {
            multi_level += 1;
        }
        if tree.height() == 2 {
            two += 1;
        }
    }
    eprintln!("{multi_level} trees above two levels, {two} of two");
    // `sparse_many_tiles` (150 tiles) has a three-level tree: TileDB's
    // build of deeper trees is pinned on its bytes, not only by hand.
    assert!(multi_level >= 1 && two > 30, "{multi_level} {two}");
}

#[test]
fn every_truncation_is_a_typed_error() {
    let mut n = 0;
    let mut seen_bytes = std::collections::BTreeSet::new();
    for f in fragments() {
        let Stored::Tree(bytes) = &f.stored else {
            continue;
        };
        // Same bytes under the same domain layout need no second pass.
        if !seen_bytes.insert((bytes.clone(), f.version.get() >= 5)) {
            continue;
        }
        for len in 0..bytes.len() {
            match RTree::parse(&bytes[..len], &f.domain, f.version) {
                Err(
                    IndexError::Field { .. }
                    | IndexError::Mbr { .. }
                    | IndexError::TooManyMbrs { .. }
                    | IndexError::Shape { .. },
                ) => {}
                Err(e) => panic!("{}: cut at {len}: unexpected {e}", f.label),
                Ok(_) => panic!("{}: cut at {len} parsed", f.label),
            }
            n += 1;
        }
    }
    assert!(n > 1000, "{n}");
}

/// A random subarray inside the domain (fixed dimensions) or among the
/// leaves' bounds (strings).
struct Rng(tdb_testdata::XorShift);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn pick<'a>(&mut self, v: &'a [Vec<u8>]) -> &'a [u8] {
        &v[(self.next() % v.len() as u64) as usize]
    }
}

/// Candidate bound values for dimension `d`: the leaves' bounds, each ±1
/// for integers, and the domain's bounds.
fn candidates(tree: &RTree, domain: &Domain, d: usize) -> Vec<Vec<u8>> {
    let dim = &domain.dimensions[d];
    let mut v: Vec<Vec<u8>> = Vec::new();
    for leaf in tree.leaves() {
        let (lo, hi) = leaf[d].bounds();
        v.push(lo.to_vec());
        v.push(hi.to_vec());
    }
    if let Some((lo, hi)) = dim.bounds() {
        v.push(lo.to_vec());
        v.push(hi.to_vec());
    }
    if dim.datatype.is_integer() || dim.datatype.is_datetime() || dim.datatype.is_time() {
        let size = dim.datatype.size() as usize;
        let extra: Vec<Vec<u8>> = v
            .iter()
            .flat_map(|b| {
                let mut x = [0u8; 8];
                x[..size].copy_from_slice(b);
                let n = u64::from_le_bytes(x);
                [n.wrapping_add(1), n.wrapping_sub(1)].map(|m| m.to_le_bytes()[..size].to_vec())
            })
            .collect();
        v.extend(extra);
    }
    if dim.is_var() {
        v.push(b"".to_vec());
        v.push(b"zzzz".to_vec());
    }
    v
}

#[test]
fn tile_overlap_agrees_with_a_scan_of_the_leaves() {
    let mut queries = 0;
    let (mut full, mut partial) = (0, 0);
    let mut rng = Rng(tdb_testdata::XorShift::new(0x9e37_79b9_7f4a_7c15));
    let mut seen = std::collections::BTreeSet::new();
    for f in fragments() {
        let tree = parse(f);
        if tree.leaves().is_empty() || !seen.insert(format!("{:?}", tree)) {
            continue;
        }
        let ops = DomainOps::new(&f.domain).unwrap();
        let cands: Vec<Vec<Vec<u8>>> = (0..f.domain.dimensions.len())
            .map(|d| candidates(&tree, &f.domain, d))
            .collect();
        for _ in 0..60 {
            let subarray: NDRange = ops
                .dims()
                .iter()
                .enumerate()
                .map(|(d, op)| {
                    let (a, b) = (rng.pick(&cands[d]), rng.pick(&cands[d]));
                    let var = f.domain.dimensions[d].is_var();
                    let r = Range::from_bounds(a, b, var);
                    let swapped = Range::from_bounds(b, a, var);
                    // Order the bounds by the dimension's own comparison
                    // (a range overlaps itself only when lo <= hi).
                    if op.overlaps(&r, &r) {
                        r
                    } else {
                        swapped
                    }
                })
                .collect();
            let got = tree.tile_overlap(&f.domain, &subarray).unwrap();
            // Brute force: each leaf alone.
            let mut covered = Vec::new();
            let mut parts = Vec::new();
            for (i, leaf) in tree.leaves().iter().enumerate() {
                let ratio = ops.overlap_ratio(&subarray, &[], leaf);
                if ratio == 1.0 {
                    covered.push(i as u64);
                } else if ratio > 0.0 {
                    parts.push((i as u64, ratio));
                }
            }
            let mut got_covered: Vec<u64> =
                got.tile_ranges.iter().flat_map(|&(a, b)| a..=b).collect();
            assert!(
                got_covered.windows(2).all(|w| w[0] < w[1]),
                "{}: ranges out of order",
                f.label
            );
            assert!(got.tiles.windows(2).all(|w| w[0].0 < w[1].0), "{}", f.label);
            got_covered.sort_unstable();
            assert_eq!(got_covered, covered, "{}: {subarray:?}", f.label);
            assert_eq!(got.tiles, parts, "{}: {subarray:?}", f.label);
            // The multi-range form with one range per dimension keeps every
            // tile that overlaps.
            let multi = tree
                .tile_ranges_multi(
                    &f.domain,
                    &subarray.iter().map(|r| vec![r.clone()]).collect::<Vec<_>>(),
                )
                .unwrap();
            let mut any: Vec<u64> = covered.clone();
            any.extend(parts.iter().map(|p| p.0));
            any.sort_unstable();
            let multi: Vec<u64> = multi.iter().flat_map(|&(a, b)| a..=b).collect();
            assert_eq!(multi, any, "{}: {subarray:?}", f.label);
            full += usize::from(!covered.is_empty());
            partial += usize::from(!parts.is_empty());
            queries += 1;
        }
    }
    eprintln!("{queries} queries: {full} with covered tiles, {partial} with partial ones");
    assert!(queries > 1000 && full > 100 && partial > 100);
}
