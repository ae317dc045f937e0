//! The builder: TileDB's defaults, one test per validation rule (variant and
//! message), and schemas built for corpus cases writing TileDB's bytes.

use tdb_filters::Filter;
use tdb_format::{single_generic_tile, ArrayType, DataOrder, Datatype, Layout};
use tdb_schema::{
    ArraySchema, ArraySchemaBuilder, Attribute, Dimension, DimensionBuilder, Range, SchemaError,
    ValidationError as V,
};

fn dense() -> ArraySchemaBuilder {
    ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("x", 1i32..=100).tile_extent(10i32))
        .attribute(Attribute::builder("a", Datatype::Int32))
}

fn sparse() -> ArraySchemaBuilder {
    ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", 1i32..=100).tile_extent(10i32))
        .attribute(Attribute::builder("a", Datatype::Int32))
}

/// The validation error of a build, and its message.
fn rejects(b: ArraySchemaBuilder) -> (V, String) {
    match b.build() {
        Err(SchemaError::Validation(v)) => {
            let msg = v.to_string();
            (*v, msg)
        }
        other => panic!("expected a validation error, got {other:?}"),
    }
}

#[test]
fn defaults_are_tiledbs() {
    let s = ArraySchema::builder(ArrayType::Sparse)
        .dimension(Dimension::builder("x", Datatype::Int64).domain(0i64, 9))
        .dimension(DimensionBuilder::string("s"))
        .attribute(Attribute::builder("a", Datatype::Float64))
        .attribute(Attribute::builder("v", Datatype::Int32).var())
        .build()
        .unwrap();
    assert_eq!(s.version.get(), 22);
    assert_eq!((s.capacity, s.allows_dups), (10_000, false));
    assert_eq!(
        (s.tile_order, s.cell_order),
        (Layout::RowMajor, Layout::RowMajor)
    );
    assert_eq!(s.coords_filters.filters, [Filter::Zstd { level: -1 }]);
    assert_eq!(s.offsets_filters.filters, [Filter::Zstd { level: -1 }]);
    assert_eq!(s.validity_filters.filters, [Filter::Rle { level: -1 }]);
    assert_eq!(s.offsets_filters.max_chunk_size, 65536);
    let [x, str_dim] = s.domain.dimensions.as_slice() else {
        panic!()
    };
    // No extent given: TileDB's default, the whole range.
    assert_eq!(x.tile_extent.as_deref(), Some(&10i64.to_le_bytes()[..]));
    assert!(str_dim.is_var() && str_dim.domain.is_empty() && str_dim.tile_extent.is_none());
    assert_eq!(s.attributes[0].fill, f64::NAN.to_le_bytes());
    assert_eq!(s.attributes[1].fill, i32::MIN.to_le_bytes());
    assert!(s.current_domain.ranges.is_none());
}

#[test]
fn hilbert_keeps_a_missing_extent_unset_and_floats_default_to_hi_minus_lo() {
    let s = ArraySchema::builder(ArrayType::Sparse)
        .cell_order(Layout::Hilbert)
        .dimension(DimensionBuilder::range("x", 0.0f64..=1.0))
        .attribute(Attribute::builder("a", Datatype::Int32))
        .build()
        .unwrap();
    assert_eq!(s.domain.dimensions[0].tile_extent, None);
    let s = sparse()
        .dimension(DimensionBuilder::range("f", -1.5f32..=2.5))
        .build()
        .unwrap();
    assert_eq!(
        s.domain.dimensions[1].tile_extent.as_deref(),
        Some(&4f32.to_le_bytes()[..])
    );
}

#[test]
fn typed_fill_is_repeated_for_each_value_of_the_cell() {
    let s = dense()
        .attribute(
            Attribute::builder("p", Datatype::UInt16)
                .cell_val_num(3)
                .fill(7u16),
        )
        .attribute(Attribute::builder("t", Datatype::DatetimeMs).fill(-1i64))
        .build()
        .unwrap();
    assert_eq!(s.attributes[1].fill, [7, 0, 7, 0, 7, 0]);
    assert_eq!(s.attributes[2].fill, (-1i64).to_le_bytes());
}

macro_rules! rule {
    ($name:ident, $builder:expr, $pat:pat, $msg:expr) => {
        #[test]
        fn $name() {
            let (v, msg) = rejects($builder);
            assert!(matches!(v, $pat), "{v:?}");
            assert_eq!(msg, $msg);
        }
    };
}

rule!(
    no_dimensions,
    ArraySchema::builder(ArrayType::Sparse).attribute(Attribute::builder("a", Datatype::Int32)),
    V::NoDimensions,
    "the domain has no dimensions; add at least one dimension"
);
rule!(
    duplicate_names,
    dense().attribute(Attribute::builder("x", Datatype::Int8)),
    V::DuplicateName { .. },
    "name \"x\" is used twice; dimensions, attributes and labels need unique names"
);
rule!(
    reserved_attribute_name,
    dense().attribute(Attribute::builder("__coords", Datatype::Int8)),
    V::ReservedName { .. },
    "attribute \"__coords\": names starting with \"__\" are reserved; rename it"
);
rule!(
    bad_dimension_type,
    sparse().dimension(Dimension::builder("b", Datatype::Bool)),
    V::DimensionDatatype { .. },
    "dimension b: BOOL cannot be a dimension type; use an integer, float, datetime, time or \
     STRING_ASCII"
);
rule!(
    missing_domain,
    sparse().dimension(Dimension::builder("y", Datatype::Int32)),
    V::MissingDomain { .. },
    "dimension y: no domain; set its lower and upper bounds"
);
rule!(
    string_dimension_with_domain,
    sparse().dimension(DimensionBuilder::string("s").domain(0u8, 9)),
    V::StringDimensionDomain { .. },
    "dimension s: string dimensions take no domain or tile extent; remove them"
);
rule!(
    lower_above_upper,
    sparse().dimension(Dimension::builder("y", Datatype::Int32).domain(5i32, 1)),
    V::DomainBounds { .. },
    "dimension y: lower bound 5 is above upper bound 1; swap them"
);
rule!(
    nan_bound,
    sparse().dimension(DimensionBuilder::range("f", 0.0f64..=f64::NAN)),
    V::DomainNotFinite { .. },
    "dimension f: domain [0, NaN] is not finite; use finite bounds"
);
rule!(
    infinite_bound,
    sparse().dimension(DimensionBuilder::range("f", 0.0f32..=f32::INFINITY)),
    V::DomainNotFinite { .. },
    "dimension f: domain [0, inf] is not finite; use finite bounds"
);
rule!(
    full_range_domain,
    sparse().dimension(DimensionBuilder::range("u", 0u8..=255).tile_extent(1u8)),
    V::DomainFullRange { .. },
    "dimension u: domain spans every UINT8 value; shrink it by at least one"
);
rule!(
    tile_extent_larger_than_domain,
    sparse().dimension(DimensionBuilder::range("y", 1i32..=100).tile_extent(200i32)),
    V::TileExtentTooLarge { .. },
    "dimension y: tile extent 200 exceeds the domain range 1..=100; use an extent of at most 100"
);
rule!(
    zero_tile_extent,
    sparse().dimension(DimensionBuilder::range("y", 1i32..=100).tile_extent(0i32)),
    V::TileExtentNotPositive { .. },
    "dimension y: tile extent 0 must be greater than 0"
);
rule!(
    negative_float_tile_extent,
    sparse().dimension(DimensionBuilder::range("f", 0.0f64..=1.0).tile_extent(-0.5f64)),
    V::TileExtentNotPositive { .. },
    "dimension f: tile extent -0.5 must be greater than 0"
);
rule!(
    tile_extent_overflow,
    sparse().dimension(DimensionBuilder::range("y", 0i64..=i64::MAX - 1).tile_extent(3i64)),
    V::TileExtentOverflow { .. },
    "dimension y: the domain expanded to whole tiles of 3 overflows INT64; lower the upper \
     bound 9223372036854775806 by one tile extent"
);
rule!(
    value_of_the_wrong_type,
    sparse().dimension(Dimension::builder("y", Datatype::Int64).domain(0i32, 9)),
    V::ValueType { .. },
    "dimension y domain: a INT32 value cannot be stored as INT64; use the matching Rust type"
);
rule!(
    float_dimension_on_dense,
    ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("f", 0.0f64..=1.0))
        .attribute(Attribute::builder("a", Datatype::Int32)),
    V::DenseDimensionType { .. },
    "dimension f: dense arrays need integer, datetime or time dimensions, not FLOAT64; make the \
     array sparse or change the type"
);
rule!(
    string_dimension_on_dense,
    dense().dimension(DimensionBuilder::string("s")),
    V::DenseMixedTypes { .. },
    "dense arrays need all dimensions of one datatype; dimension s is STRING_ASCII but the first \
     is INT32"
);
rule!(
    dense_without_attributes,
    ArraySchema::builder(ArrayType::Dense).dimension(DimensionBuilder::range("x", 1i32..=4)),
    V::DenseWithoutAttributes,
    "dense arrays need at least one attribute; add one"
);
rule!(
    dense_with_duplicates,
    dense().allows_duplicates(true),
    V::DenseAllowsDuplicates,
    "dense arrays cannot allow duplicates; make the array sparse or disallow them"
);
rule!(
    hilbert_on_dense,
    dense().cell_order(Layout::Hilbert),
    V::HilbertOnDense,
    "Hilbert cell order is only for sparse arrays; use row-major or col-major"
);
rule!(
    hilbert_tile_order,
    sparse().tile_order(Layout::Hilbert),
    V::TileOrder { .. },
    "hilbert is not a tile order; use row-major or col-major"
);
rule!(
    unordered_cell_order,
    sparse().cell_order(Layout::Unordered),
    V::CellOrder { .. },
    "unordered is not a cell order; use row-major, col-major or (sparse) hilbert"
);
rule!(
    zero_capacity,
    sparse().capacity(0),
    V::ZeroCapacity,
    "sparse arrays need a capacity above 0"
);
rule!(
    double_delta_coords_on_float_dims,
    sparse()
        .coords_filters([Filter::DoubleDelta {
            level: -1,
            reinterpret: None
        }])
        .dimension(DimensionBuilder::range("f", 0.0f64..=1.0).tile_extent(0.5f64)),
    V::CoordsDoubleDeltaOnFloat { .. },
    "dimension f: float dimensions cannot inherit coordinate filters with DOUBLE_DELTA; give the \
     dimension its own filters or drop DOUBLE_DELTA"
);
rule!(
    delta_on_floats,
    sparse().attribute(
        Attribute::builder("f", Datatype::Float32).filters([Filter::Delta {
            level: 0,
            reinterpret: None
        }])
    ),
    V::FilterDatatype { .. },
    "attribute f: filter 0 (DELTA) does not accept FLOAT32 input; delta filters need integers; \
     reinterpret as an integer type first or use another filter"
);
rule!(
    scale_float_on_two_byte_input,
    sparse().attribute(
        Attribute::builder("i", Datatype::Int16).filters([Filter::ScaleFloat {
            scale: 1.0,
            offset: 0.0,
            byte_width: 2
        }])
    ),
    V::FilterDatatype { .. },
    "attribute i: filter 0 (SCALE_FLOAT) does not accept INT16 input; it needs 4- or 8-byte \
     (float) input"
);
rule!(
    bit_width_reduction_after_float_input,
    sparse().attribute(Attribute::builder("f", Datatype::Float64).filters([
        Filter::Zstd { level: 1 },
        Filter::BitWidthReduction { max_window: 256 }
    ])),
    V::FilterDatatype { index: 1, .. },
    "attribute f: filter 1 (BIT_WIDTH_REDUCTION) does not accept FLOAT64 input; it needs \
     integer, datetime, time or byte input"
);
rule!(
    rle_not_first_on_var_strings,
    sparse().attribute(
        Attribute::builder("s", Datatype::StringUtf8)
            .var()
            .filters([Filter::Zstd { level: 1 }, Filter::Rle { level: 0 }])
    ),
    V::StringFilterNotFirst { .. },
    "attribute s: RLE must be the first filter on var-length strings; move it first"
);
rule!(
    dictionary_not_first_in_inherited_coords_filters,
    sparse()
        .coords_filters([Filter::Zstd { level: 1 }, Filter::Dictionary { level: 0 }])
        .dimension(DimensionBuilder::string("s")),
    V::StringFilterNotFirst { .. },
    "coordinate filters: DICTIONARY must be the first filter on var-length strings; move it \
     first"
);
rule!(
    webp_on_sparse,
    sparse().attribute(Attribute::builder("p", Datatype::UInt8).filters([webp()])),
    V::Webp { .. },
    "WebP: attribute p: WebP needs a dense array"
);
rule!(
    webp_on_one_dimension,
    dense().attribute(Attribute::builder("p", Datatype::UInt8).filters([webp()])),
    V::Webp { .. },
    "WebP: WebP needs exactly 2 dimensions (Y, X), not 1"
);
rule!(
    webp_on_int32,
    dense().attribute(Attribute::builder("p", Datatype::Int32).filters([webp()])),
    V::FilterDatatype { .. },
    "attribute p: filter 0 (WEBP) does not accept INT32 input; WebP needs UINT8 input"
);
rule!(
    webp_tile_not_whole_pixels,
    dense()
        .dimension(DimensionBuilder::range("y", 1i32..=100).tile_extent(10i32))
        .attribute(Attribute::builder("p", Datatype::UInt8).filters([webp()])),
    V::Webp { .. },
    "WebP: the tile extent of y is 10, not a multiple of the 3 bytes of a pixel"
);
rule!(
    current_domain_outside_the_domain,
    sparse().current_domain(vec![Range::from_bounds(
        &0i32.to_le_bytes(),
        &5i32.to_le_bytes(),
        false
    )]),
    V::CurrentDomain { .. },
    "current domain: dimension x: [0, 5] is empty or outside the domain"
);
rule!(
    current_domain_of_the_wrong_rank,
    sparse().current_domain(Vec::new()),
    V::CurrentDomain { .. },
    "current domain: 0 ranges for 1 dimensions; give one per dimension"
);

#[test]
fn webp_takes_its_image_tile_from_the_two_tile_extents() {
    let s = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("y", 1u16..=100).tile_extent(10u16))
        .dimension(DimensionBuilder::range("x", 1u16..=300).tile_extent(30u16))
        .attribute(Attribute::builder("p", Datatype::UInt8).filters([webp()]))
        .build()
        .unwrap();
    assert!(matches!(
        s.attributes[0].filters.filters[0],
        Filter::Webp {
            y_extent: 10,
            x_extent: 30,
            ..
        }
    ));
}

rule!(
    ordered_attribute_on_sparse,
    sparse().attribute(Attribute::builder("o", Datatype::Int32).order(DataOrder::Increasing)),
    V::OrderedAttribute { .. },
    "attribute o: ordered attributes are only supported on dense arrays with 1 dimension"
);
rule!(
    zero_cell_val_num,
    dense().attribute(Attribute::builder("z", Datatype::Int32).cell_val_num(0)),
    V::AttributeCellValNum { .. },
    "attribute z: cell_val_num 0 is not allowed; use 1 or more, or var"
);
rule!(
    fill_of_the_wrong_size,
    dense().attribute(
        Attribute::builder("p", Datatype::Int32)
            .cell_val_num(2)
            .fill_bytes([1, 2])
    ),
    V::FillSize { .. },
    "attribute p: fill value of 2 bytes; use one cell of 8 bytes"
);
rule!(
    fill_of_the_wrong_type,
    dense().attribute(Attribute::builder("p", Datatype::Int32).fill(1.5f32)),
    V::ValueType { .. },
    "attribute p fill value: a FLOAT32 value cannot be stored as INT32; use the matching Rust \
     type"
);
rule!(
    unknown_enumeration,
    dense().attribute(Attribute::builder("e", Datatype::UInt8).enumeration("colors")),
    V::UnknownEnumeration { .. },
    "attribute e: refers to enumeration \"colors\", which the schema lacks; add the enumeration"
);
rule!(
    enumeration_on_float,
    dense()
        .enumeration(colors(3))
        .attribute(Attribute::builder("e", Datatype::Float32).enumeration("colors")),
    V::EnumerationType { .. },
    "attribute e: attributes with an enumeration need an integer type, not FLOAT32"
);
rule!(
    enumeration_on_multi_value_cells,
    dense().enumeration(colors(3)).attribute(
        Attribute::builder("e", Datatype::UInt8)
            .cell_val_num(2)
            .enumeration("colors")
    ),
    V::EnumerationCellValNum { .. },
    "attribute e: attributes with an enumeration need cell_val_num 1, not 2"
);
rule!(
    enumeration_too_large_for_the_type,
    dense()
        .enumeration(colors(200))
        .attribute(Attribute::builder("e", Datatype::Int8).enumeration("colors")),
    V::EnumerationTooLarge { .. },
    "attribute e: INT8 cannot index all 200 values of enumeration \"colors\"; use a wider \
     integer type"
);
rule!(
    duplicate_enumeration,
    dense().enumeration(colors(1)).enumeration(colors(2)),
    V::DuplicateEnumeration { .. },
    "enumeration \"colors\" is added twice; enumeration names must be unique"
);
rule!(
    enumeration_with_offsets_beyond_its_data,
    dense()
        .enumeration(tdb_schema::Enumeration::new(
            "colors",
            "__colors_0",
            Datatype::StringUtf8,
            tdb_schema::VAR_NUM,
            b"redblue".to_vec(),
            [0u64, 3, 99].iter().flat_map(|o| o.to_le_bytes()).collect(),
        ))
        .attribute(Attribute::builder("e", Datatype::UInt8).enumeration("colors")),
    V::EnumerationOffsets { .. },
    "enumeration \"colors\": bad offset 99; give increasing u64 offsets within its data"
);

fn webp() -> Filter {
    Filter::Webp {
        quality: 100.0,
        format: 1,
        lossless: 1,
        y_extent: 0,
        x_extent: 0,
        padding: [0; 2],
    }
}

fn colors(n: u8) -> tdb_schema::Enumeration {
    tdb_schema::Enumeration::new(
        "colors",
        "__colors_0",
        Datatype::UInt8,
        1,
        (0..n).collect(),
        Vec::new(),
    )
}

#[test]
fn enumerations_that_fit_are_accepted_and_recorded() {
    let s = dense()
        .enumeration(colors(3))
        .attribute(Attribute::builder("e", Datatype::Int8).enumeration("colors"))
        .build()
        .unwrap();
    assert_eq!(s.enumerations[0].path, "__colors_0");
}

/// The schema bytes TileDB wrote for a corpus case.
fn tiledb_bytes(case: &str) -> Vec<u8> {
    let object = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == case)
        .unwrap();
    let storage = tdb_storage::LocalStorage::new(&object.dir);
    let file = tdb_fragment::load_schemas(&storage, "", None)
        .unwrap()
        .latest()
        .file();
    let bytes = object.read(&file);
    let tile = single_generic_tile(&bytes).unwrap();
    tdb_tile::read_generic_tile(&file, &tile, None).unwrap()
}

/// tiledb-py's own defaults: no coordinate filters, ZSTD on each dimension.
fn py(array_type: ArrayType) -> ArraySchemaBuilder {
    ArraySchema::builder(array_type).coords_filters([])
}

#[test]
fn sparse_2d_int_writes_tiledbs_bytes() {
    let zstd = [Filter::Zstd { level: -1 }];
    let s = py(ArrayType::Sparse)
        .capacity(16)
        .dimension(
            DimensionBuilder::range("x", 1i32..=100)
                .tile_extent(10i32)
                .filters(zstd),
        )
        .dimension(
            DimensionBuilder::range("y", 1i32..=100)
                .tile_extent(10i32)
                .filters(zstd),
        )
        .attribute(Attribute::builder("a", Datatype::Int64))
        .attribute(Attribute::builder("f", Datatype::Float32))
        .build()
        .unwrap();
    assert!(s.write().unwrap() == tiledb_bytes("sparse_2d_int"));
}

#[test]
fn dense_var_nullable_writes_tiledbs_bytes() {
    let s = py(ArrayType::Dense)
        .dimension(
            DimensionBuilder::range("d", 0i32..=7)
                .tile_extent(4i32)
                .filters([Filter::Zstd { level: -1 }]),
        )
        .attribute(
            Attribute::builder("s", Datatype::StringUtf8)
                .var()
                .nullable(true),
        )
        .attribute(Attribute::builder("v", Datatype::Int32).var())
        .attribute(Attribute::builder("n", Datatype::Float32).nullable(true))
        .build()
        .unwrap();
    assert!(s.write().unwrap() == tiledb_bytes("dense_var_nullable"));
}

#[test]
fn filter_delta_writes_tiledbs_bytes() {
    let s = py(ArrayType::Dense)
        .dimension(
            DimensionBuilder::range("d", 0i32..=199)
                .tile_extent(50i32)
                .filters([Filter::Zstd { level: -1 }]),
        )
        .attribute(
            Attribute::builder("a", Datatype::Int64).filters([Filter::Delta {
                level: -1,
                reinterpret: Some(Datatype::Any),
            }]),
        )
        .build()
        .unwrap();
    assert!(s.write().unwrap() == tiledb_bytes("filter_delta"));
}

#[test]
fn hilbert_with_more_than_16_dimensions() {
    let mut b = ArraySchema::builder(ArrayType::Sparse)
        .cell_order(tdb_format::Layout::Hilbert)
        .attribute(Attribute::builder("a", Datatype::Int32));
    for i in 0..17 {
        b = b.dimension(DimensionBuilder::range(format!("d{i}"), 0i32..=9));
    }
    let (v, msg) = rejects(b);
    assert!(
        matches!(v, V::HilbertTooManyDimensions { dims: 17 }),
        "{v:?}"
    );
    assert_eq!(msg, "Hilbert order supports at most 16 dimensions, not 17");
}

/// The builder cannot give a dimension several values per coordinate, but a
/// schema's public fields can; `validate` rejects it as TileDB does.
#[test]
fn dimension_with_several_values_per_coordinate() {
    let mut s = sparse().build().unwrap();
    s.domain.dimensions[0].cell_val_num = 2;
    let v = s.validate().unwrap_err();
    assert!(
        matches!(
            v,
            V::DimensionCellValNum {
                cell_val_num: 2,
                ..
            }
        ),
        "{v:?}"
    );
    assert_eq!(
        v.to_string(),
        "dimension x: cell_val_num 2 is not supported; use 1 (one value per coordinate)"
    );
}

#[test]
fn dimension_labels_write_tiledbs_bytes() {
    let zstd = [Filter::Zstd { level: -1 }];
    let s = py(ArrayType::Dense)
        .dimension(
            DimensionBuilder::range("x", 0i32..=9)
                .tile_extent(4i32)
                .filters(zstd),
        )
        .dimension(
            DimensionBuilder::range("y", 1i32..=6)
                .tile_extent(3i32)
                .filters(zstd),
        )
        .attribute(Attribute::builder("a", Datatype::Int32))
        .dimension_label("x", "lx", DataOrder::Increasing, Datatype::Float64)
        .dimension_label("x", "tx", DataOrder::Increasing, Datatype::StringAscii)
        .dimension_label("y", "ky", DataOrder::Decreasing, Datatype::Int16)
        .dimension_label("y", "sy", DataOrder::Decreasing, Datatype::StringAscii)
        .build()
        .unwrap();
    assert!(s.write().unwrap() == tiledb_bytes("dim_labels_dense"));
}

#[test]
fn dimension_labels_keep_tiledbs_rules() {
    let base = || {
        ArraySchema::builder(ArrayType::Sparse)
            .dimension(DimensionBuilder::range("x", 0i64..=9).tile_extent(5i64))
            .dimension(DimensionBuilder::range("f", 0.0f64..=1.0).tile_extent(0.5f64))
            .attribute(Attribute::builder("a", Datatype::Int32))
    };
    let e = |b: ArraySchemaBuilder| b.build().unwrap_err().to_string();
    let float_dim = e(base().dimension_label("f", "l", DataOrder::Increasing, Datatype::Int32));
    assert!(
        float_dim.contains("integer, datetime or time dimensions"),
        "{float_dim}"
    );
    let unordered = e(base().dimension_label("x", "l", DataOrder::Unordered, Datatype::Int32));
    assert!(unordered.contains("unordered labels"), "{unordered}");
    let utf8 = e(base().dimension_label("x", "l", DataOrder::Increasing, Datatype::StringUtf8));
    assert!(utf8.contains("no dimension datatype"), "{utf8}");
    let missing = e(base().dimension_label("z", "l", DataOrder::Increasing, Datatype::Int32));
    assert!(missing.contains("no dimension \"z\""), "{missing}");
    let twice = e(base().dimension_label("x", "a", DataOrder::Increasing, Datatype::Int32));
    assert!(twice.contains("used twice"), "{twice}");
    let ok = base()
        .dimension_label("x", "l", DataOrder::Decreasing, Datatype::StringAscii)
        .build()
        .unwrap();
    assert_eq!(ok.dimension_labels[0].uri, "__labels/l0");
    assert_eq!(ok.dimension_labels[0].cell_val_num, tdb_schema::VAR_NUM);
}
