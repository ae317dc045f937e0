//! TileDB's filter rules: `FilterPipeline::check_filter_types` with each
//! filter's `accepts_input_datatype` (`tiledb/sm/filter/*.cc`), and the
//! schema-wide `check_double_delta_compressor`, `check_string_compressor`
//! and `check_webp_filter` of `array_schema.cc`.

use crate::value::{decode, Num};
use crate::{ArraySchema, ValidationError as E};
use tdb_filters::{Filter, FilterPipeline};
use tdb_format::{ArrayType, Datatype, FilterType};

type Check = Result<(), E>;

/// Whether `f` takes `input`, with a hint when not.
fn accepts(f: &Filter, input: Datatype) -> Result<(), &'static str> {
    let integral = input.is_integer()
        || input.is_bool()
        || input.is_datetime()
        || input.is_time()
        || input.is_blob()
        || input.is_geometry();
    match *f {
        Filter::Delta { .. } | Filter::DoubleDelta { .. } => {
            let as_type = f.reinterpret();
            if as_type.unwrap_or(input).is_float() {
                return Err(
                    "delta filters need integers; reinterpret as an integer type first \
                            or use another filter",
                );
            }
            match as_type {
                Some(t) if input.size().checked_rem(t.size()) != Some(0) => {
                    Err("the reinterpret datatype's size must divide the input's")
                }
                _ => Ok(()),
            }
        }
        Filter::BitWidthReduction { .. } | Filter::PositiveDelta { .. } if !integral => {
            Err("it needs integer, datetime, time or byte input")
        }
        Filter::ScaleFloat { .. } if !matches!(input.size(), 4 | 8) => {
            Err("it needs 4- or 8-byte (float) input")
        }
        Filter::Xor if !matches!(input.size(), 1 | 2 | 4 | 8) => {
            Err("it needs 1-, 2-, 4- or 8-byte input")
        }
        Filter::Webp { .. } if input != Datatype::UInt8 => Err("WebP needs UINT8 input"),
        _ => Ok(()),
    }
}

/// `FilterPipeline::check_filter_types` for a field's own pipeline.
pub(crate) fn check_pipeline(field: &str, p: &FilterPipeline, dt: Datatype, var: bool) -> Check {
    if var && matches!(dt, Datatype::StringAscii | Datatype::StringUtf8) {
        string_filters_first(field, p)?;
    }
    let mut input = dt;
    for (index, f) in p.filters.iter().enumerate() {
        // TileDB skips the check for a leading NONE filter only.
        if !(index == 0 && matches!(f, Filter::None)) {
            accepts(f, input).map_err(|hint| E::FilterDatatype {
                field: field.to_owned(),
                index,
                filter: f.filter_type().name(),
                datatype: input.name(),
                hint,
            })?;
        }
        input = f.output_datatype(input);
    }
    Ok(())
}

/// RLE and DICTIONARY must come first on var-length strings.
fn string_filters_first(field: &str, p: &FilterPipeline) -> Check {
    let Some(first) = p.filters.first().map(Filter::filter_type) else {
        return Ok(());
    };
    for t in [FilterType::Rle, FilterType::Dictionary] {
        if first != t && p.filters.iter().any(|f| f.filter_type() == t) {
            return Err(E::StringFilterNotFirst {
                field: field.to_owned(),
                filter: t.name(),
            });
        }
    }
    Ok(())
}

/// The coordinate filters, as dimensions without their own inherit them.
pub(crate) fn check_coords_filters(s: &ArraySchema) -> Check {
    let coords = &s.coords_filters;
    let has = |t| coords.filters.iter().any(|f| f.filter_type() == t);
    for d in s
        .domain
        .dimensions
        .iter()
        .filter(|d| d.filters.filters.is_empty())
    {
        if has(FilterType::DoubleDelta) && d.datatype.is_float() {
            return Err(E::CoordsDoubleDeltaOnFloat {
                dim: d.name.clone(),
            });
        }
        if d.datatype == Datatype::StringAscii && d.is_var() {
            string_filters_first("coordinate filters", coords)?;
        }
    }
    Ok(())
}

/// WebP: UINT8 attributes of dense arrays with two dimensions of one
/// integer type (its extents become the image's).
pub(crate) fn check_webp(s: &ArraySchema) -> Check {
    let webp = |a: &&crate::Attribute| {
        a.filters
            .filters
            .iter()
            .any(|f| matches!(f, Filter::Webp { .. }))
    };
    let Some(a) = s.attributes.iter().find(webp) else {
        return Ok(());
    };
    let fail = |reason: String| Err(E::Webp { reason });
    if let Some(a) = s
        .attributes
        .iter()
        .filter(webp)
        .find(|a| a.datatype != Datatype::UInt8)
    {
        return fail(format!(
            "attribute {} is {}; WebP supports only UINT8",
            a.name,
            a.datatype.name()
        ));
    }
    if s.array_type != ArrayType::Dense {
        return fail(format!("attribute {}: WebP needs a dense array", a.name));
    }
    let dims = &s.domain.dimensions;
    let [y, x] = dims.as_slice() else {
        return fail(format!(
            "WebP needs exactly 2 dimensions (Y, X), not {}",
            dims.len()
        ));
    };
    if y.datatype != x.datatype || !x.datatype.is_integer() {
        return fail(format!(
            "dimensions {} and {} must share one integer type, not {} and {}",
            y.name,
            x.name,
            y.datatype.name(),
            x.datatype.name()
        ));
    }
    // `WebpFilter::set_extents`: the tile is the image, X holding whole pixels.
    let extent =
        |d: &crate::Dimension| match d.tile_extent.as_deref().and_then(|e| decode(d.datatype, e)) {
            Some(Num::Int(e)) => e,
            _ => 0,
        };
    let (rows, cols) = (extent(y), extent(x));
    for f in s.attributes.iter().flat_map(|a| &a.filters.filters) {
        if let Filter::Webp { format, .. } = f {
            let depth = if *format < 3 { 3 } else { 4 };
            if cols.checked_rem(depth) != Some(0) {
                return fail(format!(
                    "the tile extent of {} is {cols}, not a multiple of the {depth} bytes of a pixel",
                    x.name
                ));
            }
            let pixels = cols.checked_div(depth).unwrap_or(0);
            if rows > 16383 || pixels > 16383 {
                return fail(format!(
                    "tiles of {rows}x{pixels} pixels exceed WebP's 16383x16383"
                ));
            }
        }
    }
    Ok(())
}
