//! What one schema evolution changed, found by comparing the two schemas.
//!
//! TileDB 2.30's `ArraySchemaEvolution::evolve_schema` can add and extend
//! enumerations, add and drop attributes, drop enumerations and expand the
//! current domain, and nothing else; anything else seen between two schemas
//! is reported as [`SchemaChange::Other`] rather than refused.

use crate::{ArraySchema, Enumeration, Range, Result};

/// One difference between consecutive schemas.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaChange {
    /// A new attribute.
    AttributeAdded(String),
    /// An attribute no longer in the schema.
    AttributeDropped(String),
    /// A new enumeration and its file.
    EnumerationAdded {
        /// Its name.
        name: String,
        /// Its file under `__schema/__enumerations/`.
        path: String,
    },
    /// Values appended to an enumeration; the whole extended enumeration is
    /// written to a new file.
    EnumerationExtended {
        /// Its name.
        name: String,
        /// The file of the earlier values.
        old_path: String,
        /// The file of all values.
        new_path: String,
        /// The appended values' bytes.
        added: Vec<Vec<u8>>,
    },
    /// An enumeration no longer in the schema.
    EnumerationDropped(String),
    /// The current domain's new ranges (TileDB only lets evolution expand it;
    /// that is not checked again here).
    CurrentDomainExpanded {
        /// Before: `None` when empty.
        old: Option<Vec<Range>>,
        /// After.
        new: Option<Vec<Range>>,
    },
    /// Any other difference, which TileDB's evolution does not make: e.g.
    /// `attribute a changed`, `domain changed`, `format version 19 -> 22`.
    Other(String),
}

/// The changes from `old` to `new`. `load` reads an enumeration file by
/// path; it is called only for enumerations whose path changed, since files
/// are never rewritten in place.
pub fn diff(
    old: &ArraySchema,
    new: &ArraySchema,
    load: &mut dyn FnMut(&str) -> Result<Enumeration>,
) -> Result<Vec<SchemaChange>> {
    let mut out = Vec::new();
    if old.version != new.version {
        out.push(SchemaChange::Other(format!(
            "format version {} -> {}",
            old.version.get(),
            new.version.get()
        )));
    }
    let fields = [
        ("allows dups", old.allows_dups == new.allows_dups),
        ("array type", old.array_type == new.array_type),
        ("tile order", old.tile_order == new.tile_order),
        ("cell order", old.cell_order == new.cell_order),
        ("capacity", old.capacity == new.capacity),
        ("coords filters", old.coords_filters == new.coords_filters),
        (
            "offsets filters",
            old.offsets_filters == new.offsets_filters,
        ),
        (
            "validity filters",
            old.validity_filters == new.validity_filters,
        ),
        ("domain", old.domain == new.domain),
        (
            "dimension labels",
            old.dimension_labels == new.dimension_labels,
        ),
    ];
    for (field, _) in fields.iter().filter(|(_, same)| !same) {
        out.push(SchemaChange::Other(format!("{field} changed")));
    }
    attributes(old, new, &mut out);
    enumerations(old, new, load, &mut out)?;
    if old.current_domain != new.current_domain {
        out.push(SchemaChange::CurrentDomainExpanded {
            old: old.current_domain.ranges.clone(),
            new: new.current_domain.ranges.clone(),
        });
    }
    Ok(out)
}

fn attributes(old: &ArraySchema, new: &ArraySchema, out: &mut Vec<SchemaChange>) {
    for a in &old.attributes {
        match new.attribute(&a.name) {
            None => out.push(SchemaChange::AttributeDropped(a.name.clone())),
            Some(b) if b != a => {
                out.push(SchemaChange::Other(format!("attribute {} changed", a.name)))
            }
            Some(_) => {}
        }
    }
    for b in &new.attributes {
        if old.attribute(&b.name).is_none() {
            out.push(SchemaChange::AttributeAdded(b.name.clone()));
        }
    }
}

fn enumerations(
    old: &ArraySchema,
    new: &ArraySchema,
    load: &mut dyn FnMut(&str) -> Result<Enumeration>,
    out: &mut Vec<SchemaChange>,
) -> Result<()> {
    let find =
        |s: &ArraySchema, name: &str| s.enumerations.iter().find(|e| e.name == name).cloned();
    for e in &old.enumerations {
        match find(new, &e.name) {
            None => out.push(SchemaChange::EnumerationDropped(e.name.clone())),
            Some(n) if n.path != e.path => {
                let (before, after) = (load(&e.path)?, load(&n.path)?);
                out.push(match appended(&before, &after) {
                    Some(added) => SchemaChange::EnumerationExtended {
                        name: e.name.clone(),
                        old_path: e.path.clone(),
                        new_path: n.path,
                        added,
                    },
                    None => SchemaChange::Other(format!(
                        "enumeration {} replaced by one that does not extend it",
                        e.name
                    )),
                });
            }
            Some(_) => {}
        }
    }
    for n in &new.enumerations {
        if find(old, &n.name).is_none() {
            out.push(SchemaChange::EnumerationAdded {
                name: n.name.clone(),
                path: n.path.clone(),
            });
        }
    }
    Ok(())
}

/// The values `after` appends to `before`, if it is an extension of it by
/// TileDB's `Enumeration::is_extension_of`: same name, type, cell size and
/// order flag, and `before`'s data and offsets as prefixes.
fn appended(before: &Enumeration, after: &Enumeration) -> Option<Vec<Vec<u8>>> {
    let same = before.name == after.name
        && before.datatype == after.datatype
        && before.cell_val_num == after.cell_val_num
        && before.ordered == after.ordered;
    let var = before.cell_val_num == crate::VAR_NUM;
    let extends = after.data.starts_with(&before.data)
        && (!var
            || (after.offsets.len() > before.offsets.len()
                && after.offsets.starts_with(&before.offsets)));
    if !(same && extends) {
        return None;
    }
    let values = after.values().ok()?;
    let kept = before.values().ok()?.len();
    Some(values.get(kept..)?.iter().map(|v| v.to_vec()).collect())
}
