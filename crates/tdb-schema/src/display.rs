//! The human-readable dump of a schema (`tdb schema`): one line per
//! setting, dimension and attribute, values decoded by datatype.

use crate::{ArraySchema, Range};
use std::fmt;
use tdb_format::{Datatype, Layout, Scalar};

/// Bytes of `datatype` as text: numbers decoded, strings quoted, anything
/// else as hex.
fn cells(datatype: Datatype, bytes: &[u8]) -> String {
    if datatype.is_string() {
        if let Ok(s) = std::str::from_utf8(bytes) {
            return format!("{s:?}");
        }
    }
    let size = datatype.size() as usize;
    let decoded: Option<Vec<String>> = (bytes.len().checked_rem(size) == Some(0))
        .then(|| {
            bytes
                .chunks(size)
                .map(|c| Scalar::decode(datatype, c).map(|v| v.to_string()))
                .collect()
        })
        .flatten();
    match decoded.as_deref() {
        Some([one]) => one.clone(),
        Some(v) => format!("[{}]", v.join(", ")),
        None => {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            format!("0x{hex}")
        }
    }
}

/// How many values a cell holds, when not one: ` x3`, ` var`.
fn cell_val_num(n: u32) -> String {
    match n {
        1 => String::new(),
        crate::VAR_NUM => " var".to_owned(),
        n => format!(" x{n}"),
    }
}

impl fmt::Display for ArraySchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} array, format v{}",
            self.array_type.name(),
            self.version.get()
        )?;
        let tile_order = self.reported_tile_order().map_or("-", Layout::name);
        writeln!(
            f,
            "  cell order {}, tile order {}, capacity {}, duplicates {}",
            self.cell_order.name(),
            tile_order,
            self.capacity,
            if self.allows_dups {
                "allowed"
            } else {
                "not allowed"
            }
        )?;
        writeln!(f, "  coords filters: {}", self.coords_filters)?;
        writeln!(f, "  offsets filters: {}", self.offsets_filters)?;
        writeln!(f, "  validity filters: {}", self.validity_filters)?;
        writeln!(f, "  dimensions:")?;
        for d in &self.domain.dimensions {
            write!(f, "    {}: {}", d.name, d.datatype.name())?;
            f.write_str(&cell_val_num(d.cell_val_num))?;
            if let Some((lo, hi)) = d.bounds() {
                write!(f, " [{}, {}]", cells(d.datatype, lo), cells(d.datatype, hi))?;
            }
            if let Some(t) = &d.tile_extent {
                write!(f, " tile {}", cells(d.datatype, t))?;
            }
            writeln!(
                f,
                "; filters: {}",
                d.effective_filters(self.version, &self.coords_filters)
            )?;
        }
        writeln!(f, "  attributes:")?;
        for a in &self.attributes {
            write!(f, "    {}: {}", a.name, a.datatype.name())?;
            f.write_str(&cell_val_num(a.cell_val_num))?;
            if a.nullable {
                write!(f, " nullable (fill validity {})", a.fill_validity)?;
            }
            write!(f, " fill {}", cells(a.datatype, &a.fill))?;
            if let Some(e) = &a.enumeration {
                write!(f, " enumeration {e}")?;
            }
            writeln!(f, "; filters: {}", a.filters)?;
        }
        for e in &self.enumerations {
            writeln!(f, "  enumeration {} ({})", e.name, e.path)?;
        }
        for l in &self.dimension_labels {
            let dim = self.domain.dimensions.get(l.dimension as usize);
            let var = if l.cell_val_num == crate::VAR_NUM {
                " var"
            } else {
                ""
            };
            writeln!(
                f,
                "  dimension label {} on {}: {}{var} {}, in {}",
                l.name,
                dim.map_or_else(|| format!("dimension {}", l.dimension), |d| d.name.clone()),
                l.datatype.name(),
                l.order.name(),
                l.uri
            )?;
        }
        if let Some(ranges) = &self.current_domain.ranges {
            write!(f, "  current domain:")?;
            for (r, d) in ranges.iter().zip(&self.domain.dimensions) {
                let (lo, hi) = r.bounds();
                let text = |b: &[u8]| match r {
                    Range::Fixed(_) => cells(d.datatype, b),
                    Range::Var { .. } => format!("{:?}", String::from_utf8_lossy(b)),
                };
                write!(f, " {} [{}, {}]", d.name, text(lo), text(hi))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
