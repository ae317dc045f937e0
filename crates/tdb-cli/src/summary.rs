//! The schema summary of the conformance format (`expected.json`'s
//! `schema` section, `/work/shared/conformance/FORMAT.md`): what
//! `tdb schema --json` prints. It lives here, not in `tdb-schema`, because
//! library layers carry no serde. Values are encoded by [`crate::values`].

use crate::values::cell as value;
use serde_json::{json, Map, Value};
use tdb_filters::{Filter, FilterPipeline};
use tdb_format::{ArrayType, CurrentDomainType, Datatype, FilterOption, FilterType, Layout};
use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder, Enumeration, Range, VAR_NUM};

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
    let mut out = json!({
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
    });
    // An extension of the format, present only when the schema has labels
    // (summaries without them keep the format's keys exactly).
    if !schema.dimension_labels.is_empty() {
        let labels: Vec<Value> = schema
            .dimension_labels
            .iter()
            .map(|l| {
                json!({
                    "name": l.name,
                    "dim_index": l.dimension,
                    "order": l.order.name(),
                    "datatype": l.datatype.name(),
                    "cell_val_num": l.cell_val_num,
                    "uri": l.uri,
                    "label_attr_name": l.attribute,
                })
            })
            .collect();
        out["dim_labels"] = Value::Array(labels);
    }
    out
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

/// The schema (and its enumerations) a summary describes: the inverse of
/// [`summary`], for `tdb create --schema`. Keys left out take TileDB's
/// defaults; `schema_format_version` is ignored (new schemas are v22). A
/// dimension whose filters equal `coords_filters` inherits them, as the
/// summary shows inherited filters. The schema is validated by TileDB's
/// rules.
pub fn parse(v: &Value) -> Result<(ArraySchema, Vec<Enumeration>), String> {
    let name = |k: &str| v.get(k).and_then(Value::as_str);
    let array_type = ArrayType::from_name(name("array_type").ok_or("array_type is missing")?)
        .map_err(|e| e.to_string())?;
    let mut b = ArraySchema::builder(array_type);
    if let Some(order) = name("cell_order") {
        b = b.cell_order(Layout::from_name(order).map_err(|e| e.to_string())?);
    }
    if let Some(order) = name("tile_order") {
        b = b.tile_order(Layout::from_name(order).map_err(|e| e.to_string())?);
    }
    if let Some(c) = v.get("capacity").filter(|c| !c.is_null()) {
        b = b.capacity(c.as_u64().ok_or("capacity must be a count")?);
    }
    if let Some(d) = v.get("allows_duplicates").filter(|d| !d.is_null()) {
        b = b.allows_duplicates(d.as_bool().ok_or("allows_duplicates must be a bool")?);
    }
    let pipeline = |k: &str| match v.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(p) => parse_pipeline(p).map(Some).map_err(|e| format!("{k}: {e}")),
    };
    if let Some(p) = pipeline("offsets_filters")? {
        b = b.offsets_filter_pipeline(p);
    }
    if let Some(p) = pipeline("validity_filters")? {
        b = b.validity_filter_pipeline(p);
    }
    // Dimensions showing the coordinate filters inherit them.
    let coords = pipeline("coords_filters")?;
    if let Some(p) = &coords {
        b = b.coords_filter_pipeline(p.clone());
    }
    let dims = list(v, "dims")?;
    for d in dims {
        b = b.dimension(parse_dimension(d, coords.as_ref())?);
    }
    for a in list(v, "attrs")? {
        b = b.attribute(parse_attribute(a)?);
    }
    let mut enumerations = Vec::new();
    for e in list(v, "enumerations")? {
        let e = parse_enumeration(e)?;
        b = b.enumeration(e.clone());
        enumerations.push(e);
    }
    for l in list(v, "dim_labels")? {
        let label = name_of(l, "a dimension label")?;
        let dim = l
            .get("dim_index")
            .and_then(Value::as_u64)
            .and_then(|i| dims.get(usize::try_from(i).ok()?))
            .ok_or_else(|| format!("dimension label {label}: dim_index names no dimension"))?;
        let order = l
            .get("order")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("dimension label {label}: order is missing"))?;
        let order = tdb_format::DataOrder::from_name(order).map_err(|e| e.to_string())?;
        b = b.dimension_label(
            name_of(dim, "a dimension")?,
            label,
            order,
            datatype_of(l, label)?,
        );
    }
    if let Some(cd) = v.get("current_domain").filter(|c| !c.is_null()) {
        let ranges = cd
            .get("ranges")
            .and_then(Value::as_array)
            .ok_or("current_domain needs ranges")?;
        if ranges.len() != dims.len() {
            return Err(format!(
                "current_domain: {} ranges for {} dimensions",
                ranges.len(),
                dims.len()
            ));
        }
        let ranges = ranges
            .iter()
            .zip(dims)
            .map(|(r, d)| {
                let name = name_of(d, "a dimension")?;
                let datatype = datatype_of(d, name)?;
                let var = datatype == Datatype::StringAscii;
                match r.as_array().map(Vec::as_slice) {
                    Some([lo, hi]) => crate::values::range(datatype, var, lo, hi)
                        .map_err(|e| format!("current_domain of {name}: {e}")),
                    _ => Err(format!("current_domain of {name}: give [lo, hi]")),
                }
            })
            .collect::<Result<_, String>>()?;
        b = b.current_domain(ranges);
    }
    let schema = b.build().map_err(|e| e.to_string())?;
    Ok((schema, enumerations))
}

/// The list at `k`, empty when absent.
fn list<'a>(v: &'a Value, k: &str) -> Result<&'a [Value], String> {
    match v.get(k) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(format!("{k} must be a list")),
    }
}

fn datatype_of(v: &Value, what: &str) -> Result<Datatype, String> {
    let name = v
        .get("datatype")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{what}: datatype is missing"))?;
    Datatype::from_name(name).map_err(|e| format!("{what}: {e}"))
}

fn name_of<'a>(v: &'a Value, what: &str) -> Result<&'a str, String> {
    v.get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{what} without a name"))
}

/// A dimension's builder.
fn parse_dimension(d: &Value, coords: Option<&FilterPipeline>) -> Result<DimensionBuilder, String> {
    let name = name_of(d, "a dimension")?;
    let what = format!("dimension {name}");
    let datatype = datatype_of(d, &what)?;
    let mut b = DimensionBuilder::new(name, datatype);
    let bytes =
        |x: &Value| crate::values::to_bytes(datatype, x).map_err(|e| format!("{what}: {e}"));
    match d.get("domain") {
        None | Some(Value::Null) => {}
        Some(Value::Array(bounds)) if bounds.len() == 2 => {
            b = b.domain_bytes(bytes(&bounds[0])?, bytes(&bounds[1])?)
        }
        Some(_) => return Err(format!("{what}: domain must be [lo, hi] or null")),
    }
    if let Some(e) = d.get("tile").filter(|e| !e.is_null()) {
        b = b.tile_extent_bytes(bytes(e)?);
    }
    if let Some(p) = d.get("filters").filter(|p| !p.is_null()) {
        let p = parse_pipeline(p).map_err(|e| format!("{what}: {e}"))?;
        if coords != Some(&p) {
            b = b.filter_pipeline(p);
        }
    }
    Ok(b)
}

fn parse_attribute(a: &Value) -> Result<AttributeBuilder, String> {
    let name = name_of(a, "an attribute")?;
    let what = format!("attribute {name}");
    let datatype = datatype_of(a, &what)?;
    let mut b = AttributeBuilder::new(name, datatype);
    let var = a.get("var").and_then(Value::as_bool).unwrap_or(false);
    match a.get("cell_val_num").and_then(Value::as_u64) {
        _ if var => b = b.var(),
        Some(n) => {
            let n = u32::try_from(n).map_err(|_| format!("{what}: cell_val_num {n}"))?;
            b = if n == VAR_NUM {
                b.var()
            } else {
                b.cell_val_num(n)
            };
        }
        None => {}
    }
    let nullable = a.get("nullable").and_then(Value::as_bool).unwrap_or(false);
    b = b.nullable(nullable);
    if let Some(fill) = a.get("fill").filter(|f| !f.is_null()) {
        let bytes =
            crate::values::to_bytes(datatype, fill).map_err(|e| format!("{what} fill: {e}"))?;
        b = b.fill_bytes(bytes);
    }
    if let Some(valid) = a.get("fill_validity").and_then(Value::as_bool) {
        b = b.fill_validity(valid);
    }
    if let Some(p) = a.get("filters").filter(|p| !p.is_null()) {
        b = b.filter_pipeline(parse_pipeline(p).map_err(|e| format!("{what}: {e}"))?);
    }
    if let Some(e) = a.get("enumeration").and_then(Value::as_str) {
        b = b.enumeration(e);
    }
    Ok(b)
}

fn parse_enumeration(e: &Value) -> Result<Enumeration, String> {
    let name = name_of(e, "an enumeration")?;
    let what = format!("enumeration {name}");
    let datatype = datatype_of(e, &what)?;
    let cell_val_num = e
        .get("cell_val_num")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| format!("{what}: cell_val_num is missing"))?;
    let values = list(e, "values")
        .map_err(|m| format!("{what}: {m}"))?
        .iter()
        .map(|v| crate::values::to_bytes(datatype, v).map_err(|m| format!("{what}: {m}")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut enumeration = Enumeration::from_values(name, datatype, cell_val_num, values);
    enumeration.ordered = e.get("ordered").and_then(Value::as_bool).unwrap_or(false);
    Ok(enumeration)
}

/// A filter list, `{max_chunk_size, filters}`.
fn parse_pipeline(p: &Value) -> Result<FilterPipeline, String> {
    let mut pipeline = FilterPipeline::new(
        list(p, "filters")?
            .iter()
            .map(parse_filter)
            .collect::<Result<Vec<_>, _>>()?,
    );
    if let Some(size) = p.get("max_chunk_size").and_then(Value::as_u64) {
        pipeline.max_chunk_size =
            u32::try_from(size).map_err(|_| format!("max_chunk_size {size} is too large"))?;
    }
    Ok(pipeline)
}

/// One filter, `{type, options}`; options left out take the defaults of
/// TileDB's `FilterCreate::make`.
fn parse_filter(f: &Value) -> Result<Filter, String> {
    let name = f
        .get("type")
        .and_then(Value::as_str)
        .ok_or("a filter without a type")?;
    let t = FilterType::from_name(name).map_err(|e| e.to_string())?;
    let options = f.get("options");
    let opt = |o: FilterOption| options.and_then(|m| m.get(o.name()));
    let int = |o: FilterOption, default: i64| -> Result<i64, String> {
        opt(o).map_or(Ok(default), |v| {
            v.as_i64()
                .ok_or_else(|| format!("{name}: {} must be an integer", o.name()))
        })
    };
    let float = |o: FilterOption, default: f64| -> Result<f64, String> {
        opt(o).map_or(Ok(default), |v| {
            v.as_f64()
                .ok_or_else(|| format!("{name}: {} must be a number", o.name()))
        })
    };
    let narrow = |o: FilterOption, x: i64| -> Result<u32, String> {
        u32::try_from(x).map_err(|_| format!("{name}: {} {x} is out of range", o.name()))
    };
    let level = || -> Result<i32, String> {
        let l = int(FilterOption::CompressionLevel, -1)?;
        i32::try_from(l).map_err(|_| format!("{name}: compression level {l} is out of range"))
    };
    let reinterpret = || -> Result<Option<Datatype>, String> {
        match opt(FilterOption::CompressionReinterpretDatatype).and_then(Value::as_str) {
            None => Ok(None),
            Some(d) => Datatype::from_name(d)
                .map(|d| (d != Datatype::Any).then_some(d))
                .map_err(|e| format!("{name}: {e}")),
        }
    };
    let window = |o: FilterOption| narrow(o, int(o, 256)?);
    Ok(match t {
        FilterType::None => Filter::None,
        FilterType::Gzip => Filter::Gzip { level: level()? },
        FilterType::Zstd => Filter::Zstd { level: level()? },
        FilterType::Lz4 => Filter::Lz4 { level: level()? },
        FilterType::Rle => Filter::Rle { level: level()? },
        FilterType::Bzip2 => Filter::Bzip2 { level: level()? },
        FilterType::Dictionary => Filter::Dictionary { level: level()? },
        FilterType::Delta => Filter::Delta {
            level: level()?,
            reinterpret: reinterpret()?,
        },
        FilterType::DoubleDelta => Filter::DoubleDelta {
            level: level()?,
            reinterpret: reinterpret()?,
        },
        FilterType::BitWidthReduction => Filter::BitWidthReduction {
            max_window: window(FilterOption::BitWidthMaxWindow)?,
        },
        FilterType::PositiveDelta => Filter::PositiveDelta {
            max_window: window(FilterOption::PositiveDeltaMaxWindow)?,
        },
        FilterType::Bitshuffle => Filter::Bitshuffle,
        FilterType::Byteshuffle => Filter::Byteshuffle,
        FilterType::ChecksumMd5 => Filter::ChecksumMd5,
        FilterType::ChecksumSha256 => Filter::ChecksumSha256,
        FilterType::Xor => Filter::Xor,
        FilterType::ScaleFloat => Filter::ScaleFloat {
            scale: float(FilterOption::ScaleFloatFactor, 1.0)?,
            offset: float(FilterOption::ScaleFloatOffset, 0.0)?,
            byte_width: u64::try_from(int(FilterOption::ScaleFloatBytewidth, 8)?)
                .map_err(|_| format!("{name}: a negative byte width"))?,
        },
        FilterType::Webp => Filter::Webp {
            quality: float(FilterOption::WebpQuality, 100.0)? as f32,
            format: u8::try_from(int(FilterOption::WebpInputFormat, 0)?)
                .map_err(|_| format!("{name}: bad input format"))?,
            lossless: u8::from(opt(FilterOption::WebpLossless).is_some_and(|v| {
                v.as_bool().unwrap_or(false) || v.as_u64().is_some_and(|n| n != 0)
            })),
            y_extent: 0,
            x_extent: 0,
            padding: [0; 2],
        },
        other => {
            return Err(format!(
                "filter {} cannot be given in a schema",
                other.name()
            ))
        }
    })
}
