//! TileDB's schema rules (TileDB 2.30 `array_schema.cc`, `dimension.cc`,
//! `attribute.cc`), run on built and parsed schemas alike. The filter rules
//! live in `validate_filters`.

use crate::validate_filters::{check_coords_filters, check_pipeline, check_webp};
use crate::value::{decode, int_limits, Num};
use crate::{ArraySchema, Attribute, Dimension, Enumeration, SchemaError, ValidationError as E};
use std::collections::HashSet;
use tdb_format::{ArrayType, DataOrder, Datatype, Layout};

/// Result of one check.
type Check = Result<(), E>;

/// TileDB's `Hilbert::HC_MAX_DIM`.
const HILBERT_MAX_DIMS: usize = 16;

impl ArraySchema {
    /// Checks the schema against TileDB's rules for creating an array
    /// (`ArraySchema::check_without_config` and the setters' checks). The
    /// enumerations' values are not at hand, so whether an attribute's type
    /// can index all of them is left to [`crate::ArraySchemaBuilder`].
    pub fn validate(&self) -> Result<(), E> {
        check(self, &[])
    }
}

/// Every rule; `enumerations` are the values of the schema's enumerations
/// when known.
pub(crate) fn check(s: &ArraySchema, enumerations: &[Enumeration]) -> Check {
    let dims = &s.domain.dimensions;
    let Some(first) = dims.first() else {
        return Err(E::NoDimensions);
    };
    check_names(s)?;
    check_orders(s)?;
    for d in dims {
        check_dimension(d)?;
        check_pipeline(
            &format!("dimension {}", d.name),
            &d.filters,
            d.datatype,
            d.is_var(),
        )?;
    }
    check_coords_filters(s)?;
    let dense = s.array_type == ArrayType::Dense;
    if dense {
        check_dense(s, first)?;
    } else if s.capacity == 0 {
        return Err(E::ZeroCapacity);
    }
    for a in &s.attributes {
        check_attribute(s, a, enumerations)?;
        check_pipeline(
            &format!("attribute {}", a.name),
            &a.filters,
            a.datatype,
            a.is_var(),
        )?;
    }
    check_current_domain(s)?;
    for l in &s.dimension_labels {
        check_label(s, l)?;
    }
    check_webp(s)
}

/// `ArraySchema::add_dimension_label` and `DimensionLabel`'s constructors:
/// an ordered label of a dimension datatype on an integer (datetime, time)
/// dimension; ASCII labels var-length, others one value.
fn check_label(s: &ArraySchema, l: &crate::DimensionLabel) -> Check {
    let fail = |reason: String| {
        Err(E::DimensionLabel {
            label: l.name.clone(),
            reason,
        })
    };
    let Some(d) = s.domain.dimensions.get(l.dimension as usize) else {
        return fail(format!(
            "dimension {} does not exist; the array has {}",
            l.dimension,
            s.domain.dimensions.len()
        ));
    };
    let t = d.datatype;
    if !(t.is_integer() || t.is_datetime() || t.is_time()) {
        return fail(format!(
            "labels go on integer, datetime or time dimensions, not {} ({})",
            d.name,
            t.name()
        ));
    }
    if l.order == DataOrder::Unordered {
        return fail("unordered labels are not supported; use increasing or decreasing".into());
    }
    let lt = l.datatype;
    if lt.is_bool()
        || lt.is_blob()
        || lt.is_geometry()
        || lt == Datatype::Any
        || lt == Datatype::Char
        || (lt.is_string() && lt != Datatype::StringAscii)
    {
        return fail(format!(
            "{} is no dimension datatype; labels take the datatypes dimensions do",
            lt.name()
        ));
    }
    let want = if lt == Datatype::StringAscii {
        crate::VAR_NUM
    } else {
        1
    };
    if l.cell_val_num != want {
        return fail(format!(
            "cell_val_num {} is not allowed; {} labels take {}",
            l.cell_val_num,
            lt.name(),
            if want == 1 { "1" } else { "var" }
        ));
    }
    if !l.is_external && !l.relative_uri {
        return fail("labels stored inside their array need a relative URI".into());
    }
    Ok(())
}

fn check_current_domain(s: &ArraySchema) -> Check {
    let Some(ranges) = &s.current_domain.ranges else {
        return Ok(());
    };
    let dims = &s.domain.dimensions;
    let fail = |reason: String| Err(E::CurrentDomain { reason });
    if ranges.len() != dims.len() {
        return fail(format!(
            "{} ranges for {} dimensions; give one per dimension",
            ranges.len(),
            dims.len()
        ));
    }
    for (r, d) in ranges.iter().zip(dims) {
        let (lo, hi) = r.bounds();
        if matches!(r, crate::Range::Var { .. }) != d.is_var() {
            return fail(format!(
                "dimension {}: the range's kind does not fit",
                d.name
            ));
        }
        if d.is_var() {
            if lo > hi {
                return fail(format!("dimension {}: lower bound above upper", d.name));
            }
            continue;
        }
        let (Some(l), Some(h)) = (decode(d.datatype, lo), decode(d.datatype, hi)) else {
            return fail(format!(
                "dimension {}: bounds are not {} values",
                d.name,
                d.datatype.name()
            ));
        };
        let inside = d
            .bounds()
            .and_then(|(a, b)| Some((decode(d.datatype, a)?, decode(d.datatype, b)?)))
            .is_some_and(|(a, b)| a <= l && h <= b);
        if h < l || !inside {
            return fail(format!(
                "dimension {}: [{l}, {h}] is empty or outside the domain",
                d.name
            ));
        }
    }
    Ok(())
}

fn check_names(s: &ArraySchema) -> Check {
    let mut seen = HashSet::new();
    let dims = s.domain.dimensions.iter().map(|d| &d.name);
    let labels = s.dimension_labels.iter().map(|l| &l.name);
    for name in s
        .attributes
        .iter()
        .map(|a| &a.name)
        .chain(dims)
        .chain(labels)
    {
        if !seen.insert(name) {
            return Err(E::DuplicateName { name: name.clone() });
        }
    }
    if let Some(a) = s.attributes.iter().find(|a| a.name.starts_with("__")) {
        return Err(E::ReservedName {
            name: a.name.clone(),
        });
    }
    let mut seen = HashSet::new();
    match s.enumerations.iter().find(|e| !seen.insert(&e.name)) {
        Some(e) => Err(E::DuplicateEnumeration {
            name: e.name.clone(),
        }),
        None => Ok(()),
    }
}

fn check_orders(s: &ArraySchema) -> Check {
    if matches!(
        s.tile_order,
        Layout::Hilbert | Layout::Unordered | Layout::GlobalOrder
    ) {
        return Err(E::TileOrder {
            order: s.tile_order.name(),
        });
    }
    if matches!(s.cell_order, Layout::Unordered | Layout::GlobalOrder) {
        return Err(E::CellOrder {
            order: s.cell_order.name(),
        });
    }
    if s.cell_order == Layout::Hilbert {
        if s.array_type == ArrayType::Dense {
            return Err(E::HilbertOnDense);
        }
        if s.domain.dimensions.len() > HILBERT_MAX_DIMS {
            let dims = s.domain.dimensions.len();
            return Err(E::HilbertTooManyDimensions { dims });
        }
    }
    Ok(())
}

fn check_dense(s: &ArraySchema, first: &Dimension) -> Check {
    if s.allows_dups {
        return Err(E::DenseAllowsDuplicates);
    }
    for d in &s.domain.dimensions {
        if d.datatype != first.datatype {
            return Err(E::DenseMixedTypes {
                dim: d.name.clone(),
                datatype: d.datatype.name(),
                first: first.datatype.name(),
            });
        }
    }
    let t = first.datatype;
    if !(t.is_integer() || t.is_datetime() || t.is_time()) {
        return Err(E::DenseDimensionType {
            dim: first.name.clone(),
            datatype: t.name(),
        });
    }
    if s.attributes.is_empty() {
        return Err(E::DenseWithoutAttributes);
    }
    Ok(())
}

/// `Dimension::ensure_datatype_is_supported`, `set_cell_val_num`,
/// `check_domain` and `check_tile_extent`.
fn check_dimension(d: &Dimension) -> Check {
    let dim = || d.name.clone();
    let t = d.datatype;
    if t.is_bool()
        || t.is_blob()
        || t.is_geometry()
        || t == Datatype::Any
        || (t.is_string() && t != Datatype::StringAscii)
    {
        return Err(E::DimensionDatatype {
            dim: dim(),
            datatype: t.name(),
        });
    }
    if t == Datatype::StringAscii {
        if !d.is_var() {
            let expected = "string dimensions are var-length";
            let cell_val_num = d.cell_val_num;
            return Err(E::DimensionCellValNum {
                dim: dim(),
                cell_val_num,
                expected,
            });
        }
        if !d.domain.is_empty() || d.tile_extent.is_some() {
            return Err(E::StringDimensionDomain { dim: dim() });
        }
        return Ok(());
    }
    if d.cell_val_num != 1 {
        let expected = "use 1 (one value per coordinate)";
        let cell_val_num = d.cell_val_num;
        return Err(E::DimensionCellValNum {
            dim: dim(),
            cell_val_num,
            expected,
        });
    }
    let Some((lo, hi)) = d
        .bounds()
        .and_then(|(l, h)| Some((decode(t, l)?, decode(t, h)?)))
    else {
        return Err(E::MissingDomain { dim: dim() });
    };
    let (los, his) = (lo.to_string(), hi.to_string());
    if let (Num::Float(l), Num::Float(h)) = (lo, hi) {
        if !l.is_finite() || !h.is_finite() {
            return Err(E::DomainNotFinite {
                dim: dim(),
                lo: los,
                hi: his,
            });
        }
    }
    if hi < lo {
        return Err(E::DomainBounds {
            dim: dim(),
            lo: los,
            hi: his,
        });
    }
    if let (Num::Int(l), Num::Int(h)) = (lo, hi) {
        if (l, h) == int_limits(t) {
            return Err(E::DomainFullRange {
                dim: dim(),
                datatype: t.name(),
            });
        }
    }
    match d.tile_extent.as_deref().map(|e| decode(t, e)) {
        None => Ok(()),
        Some(None) => Err(E::MissingDomain { dim: dim() }),
        Some(Some(e)) => check_extent(d, lo, hi, e),
    }
}

fn check_extent(d: &Dimension, lo: Num, hi: Num, extent: Num) -> Check {
    let too_large = |range: String| E::TileExtentTooLarge {
        dim: d.name.clone(),
        extent: extent.to_string(),
        lo: lo.to_string(),
        hi: hi.to_string(),
        range,
    };
    let not_positive = || E::TileExtentNotPositive {
        dim: d.name.clone(),
        extent: extent.to_string(),
    };
    match (lo, hi, extent) {
        (Num::Float(l), Num::Float(h), Num::Float(e)) => {
            // NaN extents fail here too: TileDB's `<= 0` lets them through,
            // but no tile arithmetic survives them.
            if e.is_nan() || e <= 0.0 {
                return Err(not_positive());
            }
            if e > h - l + 1.0 {
                return Err(too_large((h - l + 1.0).to_string()));
            }
            Ok(())
        }
        (Num::Int(l), Num::Int(h), Num::Int(e)) => {
            // TileDB compares as `uint64_t`, so a negative extent is huge.
            if e == 0 {
                return Err(not_positive());
            }
            // i128 from values of at most 64 bits: nothing here saturates.
            let range = h.saturating_sub(l).saturating_add(1);
            if e < 0 || e > range {
                return Err(too_large(range.to_string()));
            }
            let max = int_limits(d.datatype).1;
            let floor_max: i128 = if d.datatype.is_signed() {
                i64::MAX.into()
            } else {
                u64::MAX.into()
            };
            let upper_floor = range
                .saturating_sub(1)
                .checked_div(e)
                .unwrap_or(0)
                .saturating_mul(e)
                .saturating_add(l);
            let whole = range.checked_rem(e) == Some(0);
            let last_floor = floor_max.saturating_sub(e.saturating_sub(1));
            if !whole && (upper_floor > last_floor || upper_floor > max) {
                return Err(E::TileExtentOverflow {
                    dim: d.name.clone(),
                    extent: e.to_string(),
                    hi: h.to_string(),
                    datatype: d.datatype.name(),
                });
            }
            Ok(())
        }
        _ => Err(E::MissingDomain {
            dim: d.name.clone(),
        }),
    }
}

/// `Attribute::validate_cell_val_num`, `set_fill_value`, `set_nullable`,
/// the ordered-attribute rule of `check_without_config`, and the
/// enumeration rules of `ArraySchema::add_attribute`.
fn check_attribute(s: &ArraySchema, a: &Attribute, enumerations: &[Enumeration]) -> Check {
    let attr = || a.name.clone();
    let cell_val_num = a.cell_val_num;
    if cell_val_num == 0 {
        let expected = "use 1 or more, or var";
        return Err(E::AttributeCellValNum {
            attr: attr(),
            cell_val_num,
            expected,
        });
    }
    if a.datatype == Datatype::Any && !a.is_var() {
        let expected = "ANY attributes are var-length";
        return Err(E::AttributeCellValNum {
            attr: attr(),
            cell_val_num,
            expected,
        });
    }
    let cell = a.datatype.cell_size(cell_val_num);
    if a.fill.is_empty() || (!a.is_var() && a.fill.len() as u64 != cell) {
        let expected = if a.is_var() {
            "use a non-empty value".to_owned()
        } else {
            format!("use one cell of {cell} bytes")
        };
        return Err(E::FillSize {
            attr: attr(),
            got: a.fill.len(),
            expected,
        });
    }
    if a.order != DataOrder::Unordered {
        let reason = if s.array_type == ArrayType::Sparse || s.domain.dimensions.len() != 1 {
            Some("are only supported on dense arrays with 1 dimension")
        } else if a.nullable {
            Some("cannot be nullable")
        } else if a.datatype == Datatype::StringAscii && !a.is_var() {
            Some("of STRING_ASCII must be var-length")
        } else if a.datatype != Datatype::StringAscii && cell_val_num != 1 {
            Some("need cell_val_num 1")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(E::OrderedAttribute {
                attr: attr(),
                reason,
            });
        }
    }
    let Some(name) = &a.enumeration else {
        return Ok(());
    };
    if !s.enumerations.iter().any(|e| &e.name == name) {
        return Err(E::UnknownEnumeration {
            attr: attr(),
            enumeration: name.clone(),
        });
    }
    // TileDB's `datatype_is_integer` counts BOOL.
    if !(a.datatype.is_integer() || a.datatype.is_bool()) {
        return Err(E::EnumerationType {
            attr: attr(),
            datatype: a.datatype.name(),
        });
    }
    if cell_val_num != 1 {
        return Err(E::EnumerationCellValNum {
            attr: attr(),
            cell_val_num,
        });
    }
    if let Some(e) = enumerations.iter().find(|e| &e.name == name) {
        let count = match e.values() {
            Ok(values) => values.len(),
            Err(err) => {
                let reason = match err {
                    SchemaError::Invalid { reason, .. } => reason,
                    other => other.to_string(),
                };
                return Err(E::EnumerationOffsets {
                    name: e.name.clone(),
                    reason,
                });
            }
        };
        let max = if a.datatype.is_bool() {
            1
        } else {
            int_limits(a.datatype).1
        };
        if max <= count as i128 {
            return Err(E::EnumerationTooLarge {
                attr: attr(),
                datatype: a.datatype.name(),
                enumeration: name.clone(),
                count,
            });
        }
    }
    Ok(())
}
