//! `SchemaEvolution::apply` on its own: an added attribute is finished as
//! a built one is (WebP extents from the tile extents), an unused
//! enumeration drops, an extension goes to a new file and keeps the old
//! values first.

use tdb_filters::Filter;
use tdb_format::{ArrayType, Datatype};
use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder, Enumeration, SchemaEvolution};

fn shapes() -> Enumeration {
    Enumeration::new(
        "shapes",
        "__shapes_0",
        Datatype::UInt8,
        1,
        vec![1, 2],
        Vec::new(),
    )
}

fn image() -> ArraySchema {
    ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("y", 1u16..=100).tile_extent(10u16))
        .dimension(DimensionBuilder::range("x", 1u16..=300).tile_extent(30u16))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .enumeration(shapes())
        .build()
        .unwrap()
}

#[test]
fn an_added_webp_attribute_gets_its_extents() {
    let webp = Filter::Webp {
        quality: 100.0,
        format: 1,
        lossless: 1,
        y_extent: 0,
        x_extent: 0,
        padding: [0; 2],
    };
    let evolved = SchemaEvolution::new()
        .add_attribute(AttributeBuilder::new("p", Datatype::UInt8).filters([webp]))
        .apply(&image(), &[shapes()])
        .unwrap();
    assert!(matches!(
        evolved.schema.attributes[1].filters.filters[0],
        Filter::Webp {
            y_extent: 10,
            x_extent: 30,
            ..
        }
    ));
}

#[test]
fn unused_enumerations_drop_and_extensions_get_a_new_file() {
    let evolved = SchemaEvolution::new()
        .extend_enumeration("shapes", vec![vec![7]])
        .apply(&image(), &[shapes()])
        .unwrap();
    let new = &evolved.enumerations[0];
    assert_ne!(new.path, "__shapes_0");
    assert_eq!(evolved.schema.enumeration("shapes").unwrap().path, new.path);
    assert_eq!(new.values().unwrap(), [&[1u8][..], &[2], &[7]]);

    let dropped = SchemaEvolution::new()
        .drop_enumeration("shapes")
        .apply(&image(), &[shapes()])
        .unwrap();
    assert!(dropped.schema.enumerations.is_empty());
    assert!(dropped.enumerations.is_empty());
}
