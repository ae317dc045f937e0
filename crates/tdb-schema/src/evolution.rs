//! Schema evolution as TileDB 2.30's `ArraySchemaEvolution::evolve_schema`
//! does it: add enumerations, extend them, add attributes, drop
//! attributes, drop enumerations, expand the current domain, in that order,
//! then finish the result as the builder does (WebP extents, the schema
//! rules). The evolved schema is stored
//! as a new schema file (at the written format version) beside the old
//! ones, and fragments keep naming the schema they were written with: that
//! is `tdb-fragment`'s job; here the new schema and the enumeration files
//! it needs are worked out.

use crate::builder::finish;
use crate::value::decode;
use crate::{
    ArraySchema, AttributeBuilder, Enumeration, EnumerationRef, Range, Result, ValidationError,
    VAR_NUM,
};

/// The changes of one schema evolution, collected then applied at once.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SchemaEvolution {
    add_enumerations: Vec<Enumeration>,
    extend_enumerations: Vec<(String, Vec<Vec<u8>>)>,
    add_attributes: Vec<AttributeBuilder>,
    drop_attributes: Vec<String>,
    drop_enumerations: Vec<String>,
    current_domain: Option<Vec<Range>>,
}

/// An applied evolution: the new schema, and the enumeration files it
/// refers to that do not exist yet.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Evolved {
    /// The new schema.
    pub schema: ArraySchema,
    /// Enumerations to write before the schema.
    pub enumerations: Vec<Enumeration>,
}

fn refuse<T>(reason: impl Into<String>) -> Result<T> {
    Err(ValidationError::Evolution {
        reason: reason.into(),
    }
    .into())
}

impl SchemaEvolution {
    /// No changes yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an attribute (after the existing ones).
    pub fn add_attribute(mut self, attribute: AttributeBuilder) -> Self {
        self.add_attributes.push(attribute);
        self
    }

    /// Drops an attribute: reads of every fragment no longer see it.
    pub fn drop_attribute(mut self, name: impl Into<String>) -> Self {
        self.drop_attributes.push(name.into());
        self
    }

    /// Adds an enumeration (its `path` is the file it will be stored in).
    pub fn add_enumeration(mut self, enumeration: Enumeration) -> Self {
        self.add_enumerations.push(enumeration);
        self
    }

    /// Appends `values` to enumeration `name`: the whole extended
    /// enumeration goes to a new file, as TileDB stores it.
    pub fn extend_enumeration(mut self, name: impl Into<String>, values: Vec<Vec<u8>>) -> Self {
        self.extend_enumerations.push((name.into(), values));
        self
    }

    /// Drops an enumeration no attribute uses.
    pub fn drop_enumeration(mut self, name: impl Into<String>) -> Self {
        self.drop_enumerations.push(name.into());
        self
    }

    /// Sets a current domain that covers the old one (one range per
    /// dimension).
    pub fn expand_current_domain(mut self, ranges: Vec<Range>) -> Self {
        self.current_domain = Some(ranges);
        self
    }

    /// The schema after the changes, from `schema` and the values of its
    /// enumerations `known` (at least those extended, and those that added
    /// attributes refer to). Refused changes name what is wrong.
    pub fn apply(&self, schema: &ArraySchema, known: &[Enumeration]) -> Result<Evolved> {
        let mut s = schema.clone();
        let mut values: Vec<Enumeration> = known.to_vec();
        let mut files = Vec::new();
        for e in &self.add_enumerations {
            if s.enumeration(&e.name).is_some() {
                return Err(ValidationError::DuplicateEnumeration {
                    name: e.name.clone(),
                }
                .into());
            }
            s.enumerations.push(EnumerationRef {
                name: e.name.clone(),
                path: e.path.clone(),
            });
            values.retain(|v| v.name != e.name);
            values.push(e.clone());
            files.push(e.clone());
        }
        for (name, added) in &self.extend_enumerations {
            let Some(i) = s.enumerations.iter().position(|r| &r.name == name) else {
                return refuse(format!(
                    "enumeration {name:?} cannot be extended: the schema has none of that name"
                ));
            };
            let Some(old) = values.iter().find(|v| &v.name == name) else {
                return refuse(format!(
                    "enumeration {name:?} cannot be extended: its values are not loaded"
                ));
            };
            let extended = extend(old, added)?;
            if let Some(r) = s.enumerations.get_mut(i) {
                r.path = extended.path.clone();
            }
            values.retain(|v| &v.name != name);
            values.push(extended.clone());
            files.push(extended);
        }
        for a in &self.add_attributes {
            let a = a.clone().build()?;
            if a.name.starts_with("__") {
                return Err(ValidationError::ReservedName { name: a.name }.into());
            }
            s.attributes.push(a);
        }
        for name in &self.drop_attributes {
            let Some(i) = s.attributes.iter().position(|a| &a.name == name) else {
                return refuse(format!(
                    "attribute {name:?} cannot be dropped: it is a dimension or does not exist"
                ));
            };
            s.attributes.remove(i);
        }
        for name in &self.drop_enumerations {
            if let Some(a) = s
                .attributes
                .iter()
                .find(|a| a.enumeration.as_deref() == Some(name))
            {
                return refuse(format!(
                    "enumeration {name:?} cannot be dropped: attribute {:?} uses it",
                    a.name
                ));
            }
            s.enumerations.retain(|r| &r.name != name);
        }
        if let Some(ranges) = &self.current_domain {
            if let Some(old) = &s.current_domain.ranges {
                covers(&s, ranges, old)?;
            }
            s.current_domain.ranges = Some(ranges.clone());
        }
        let used: Vec<Enumeration> = values
            .into_iter()
            .filter(|v| s.enumeration(&v.name).is_some())
            .collect();
        finish(&mut s, &used)?;
        files.retain(|f| s.enumeration(&f.name).is_some_and(|r| r.path == f.path));
        Ok(Evolved {
            schema: s,
            enumerations: files,
        })
    }
}

/// `old` with `added` appended, in a new file; every value stays unique.
fn extend(old: &Enumeration, added: &[Vec<u8>]) -> Result<Enumeration> {
    let var = old.cell_val_num == VAR_NUM;
    let cell = old.datatype.cell_size(old.cell_val_num) as usize;
    let mut seen: std::collections::HashSet<&[u8]> = old.values()?.into_iter().collect();
    let mut e = old.clone();
    e.path = Enumeration::new_path();
    if added.is_empty() {
        return refuse(format!("enumeration {:?}: no values to add", old.name));
    }
    for v in added {
        if !var && v.len() != cell {
            return refuse(format!(
                "enumeration {:?}: a value of {} bytes, its values have {cell}",
                old.name,
                v.len()
            ));
        }
        if !seen.insert(v) {
            return refuse(format!(
                "enumeration {:?}: a value is given twice or is already in it",
                old.name
            ));
        }
        e.push(v);
    }
    Ok(e)
}

/// Whether `new` covers `old`, dimension by dimension.
fn covers(s: &ArraySchema, new: &[Range], old: &[Range]) -> Result<()> {
    for ((d, n), o) in s.domain.dimensions.iter().zip(new).zip(old) {
        let ((nl, nh), (ol, oh)) = (n.bounds(), o.bounds());
        let covered = if d.is_var() {
            nl <= ol && oh <= nh
        } else {
            match (
                decode(d.datatype, nl),
                decode(d.datatype, nh),
                decode(d.datatype, ol),
                decode(d.datatype, oh),
            ) {
                (Some(nl), Some(nh), Some(ol), Some(oh)) => nl <= ol && oh <= nh,
                _ => false,
            }
        };
        if !covered {
            return refuse(format!(
                "the current domain can only grow: dimension {}'s new range does not cover the old one",
                d.name
            ));
        }
    }
    Ok(())
}
