//! The schema summary of the conformance format (`expected.json`'s
//! `schema` section, `/work/shared/conformance/FORMAT.md`): what
//! `tdb schema --json` prints. It lives here, not in `tdb-schema`, because
//! library layers carry no serde. Values are encoded by [`crate::values`].

use crate::values::cell as value;
use serde_json::{json, Map, Value};
use tdb_filters::{Filter, FilterPipeline};
use tdb_format::{CurrentDomainType, Datatype, FilterOption, Layout};
use tdb_schema::{ArraySchema, Enumeration, Range};

/// The summary of `schema`. `enumerations` are the enumeration summaries,
/// which live in their own files.
pub fn summary(schema: &ArraySchema, enumerations: Vec<Value>) -> Value {
    let dims: Vec<Value> = schema
        .domain
        .dimensions
        .iter()
        .map(|d| {
            let one = |b: &[u8]| value(d.datatype, 1, b);
            json!({
                "name": d.name,
                "datatype": d.datatype.name(),
                "cell_val_num": d.cell_val_num,
                "var": d.is_var(),
                "domain": d.bounds().map(|(lo, hi)| json!([one(lo), one(hi)])),
                "tile": d.tile_extent.as_deref().map(one),
                "filters": pipeline(d.effective_filters(schema.version, &schema.coords_filters)),
            })
        })
        .collect();
    let attrs: Vec<Value> = schema
        .attributes
        .iter()
        .map(|a| {
            json!({
                "name": a.name,
                "datatype": a.datatype.name(),
                "cell_val_num": a.cell_val_num,
                "var": a.is_var(),
                "nullable": a.nullable,
                "fill": value(a.datatype, a.cell_val_num, &a.fill),
                "fill_validity": a.nullable.then_some(a.fill_validity),
                "filters": pipeline(&a.filters),
                "enumeration": a.enumeration,
            })
        })
        .collect();
    let current_domain = schema.current_domain.ranges.as_ref().map(|ranges| {
        let ranges: Vec<Value> = ranges
            .iter()
            .zip(&schema.domain.dimensions)
            .map(|(r, d)| {
                let (lo, hi) = r.bounds();
                let one = |b: &[u8]| match r {
                    Range::Fixed(_) => value(d.datatype, 1, b),
                    Range::Var { .. } => value(d.datatype, tdb_schema::VAR_NUM, b),
                };
                json!([one(lo), one(hi)])
            })
            .collect();
        json!({"type": CurrentDomainType::NdRectangle.name(), "ranges": ranges})
    });
    json!({
        "array_type": schema.array_type.name(),
        "cell_order": schema.cell_order.name(),
        "tile_order": schema.reported_tile_order().map(Layout::name),
        "capacity": schema.capacity,
        "allows_duplicates": schema.allows_dups,
        "schema_format_version": schema.version.get(),
        "coords_filters": pipeline(&schema.coords_filters),
        "offsets_filters": pipeline(&schema.offsets_filters),
        "validity_filters": pipeline(&schema.validity_filters),
        "dims": dims,
        "attrs": attrs,
        "enumerations": enumerations,
        "current_domain": current_domain,
    })
}

/// A filter list.
fn pipeline(p: &FilterPipeline) -> Value {
    let filters: Vec<Value> = p.filters.iter().map(filter).collect();
    json!({"max_chunk_size": p.max_chunk_size, "filters": filters})
}

fn filter(f: &Filter) -> Value {
    let mut o = Map::new();
    let mut put = |k: FilterOption, v: Value| {
        o.insert(k.name().to_owned(), v);
    };
    match *f {
        Filter::Gzip { level }
        | Filter::Zstd { level }
        | Filter::Lz4 { level }
        | Filter::Rle { level }
        | Filter::Bzip2 { level }
        | Filter::Dictionary { level } => put(FilterOption::CompressionLevel, json!(level)),
        Filter::Delta { level, reinterpret } | Filter::DoubleDelta { level, reinterpret } => {
            put(FilterOption::CompressionLevel, json!(level));
            let dt = reinterpret.unwrap_or(Datatype::Any);
            put(
                FilterOption::CompressionReinterpretDatatype,
                json!(dt.name()),
            );
        }
        Filter::BitWidthReduction { max_window } => {
            put(FilterOption::BitWidthMaxWindow, json!(max_window))
        }
        Filter::PositiveDelta { max_window } => {
            put(FilterOption::PositiveDeltaMaxWindow, json!(max_window))
        }
        Filter::ScaleFloat {
            scale,
            offset,
            byte_width,
        } => {
            put(FilterOption::ScaleFloatBytewidth, json!(byte_width));
            put(FilterOption::ScaleFloatFactor, json!(scale));
            put(FilterOption::ScaleFloatOffset, json!(offset));
        }
        Filter::Webp {
            quality,
            format,
            lossless,
            ..
        } => {
            put(FilterOption::WebpInputFormat, json!(format));
            put(FilterOption::WebpLossless, json!(lossless));
            put(FilterOption::WebpQuality, json!(f64::from(quality)));
        }
        _ => {}
    }
    json!({"type": f.filter_type().name(), "options": o})
}

/// One value of a one-value cell (a dimension bound), in the conformance
/// encoding.
pub fn cell(datatype: Datatype, bytes: &[u8]) -> Value {
    value(datatype, 1, bytes)
}

/// An enumeration of the `enumerations` list.
pub fn enumeration(e: &Enumeration) -> Result<Value, tdb_schema::SchemaError> {
    let values: Vec<Value> = e
        .values()?
        .into_iter()
        .map(|v| value(e.datatype, e.cell_val_num, v))
        .collect();
    Ok(json!({
        "name": e.name,
        "datatype": e.datatype.name(),
        "cell_val_num": e.cell_val_num,
        "ordered": e.ordered,
        "values": values,
    }))
}
