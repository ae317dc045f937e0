//! Writes of Arrow record batches: one fragment per write.

use crate::from_arrow::{from_array, Target};
use crate::{Error, Result};
use arrow_array::RecordBatch;
use tdb::{Array, FieldBuffer, Subarray, WriteSpec, Written};
use tdb_format::ArrayType;

/// How record batches are written: all of a write's batches (one schema)
/// are the cells of one fragment.
///
/// Columns are matched to the array's fields by name; every attribute must
/// have one. Sparse arrays take a column per dimension too, rows in any
/// order. Dense arrays take either the box the rows fill in row-major
/// order ([`ArrowWrite::with_subarray`]; none: the whole domain), or a
/// column per dimension whose coordinates fill a box exactly once each, in
/// any order.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ArrowWrite {
    /// Dense writes without coordinate columns: the box written.
    pub subarray: Option<Subarray>,
    /// The fragment's timestamp (milliseconds since the epoch); `None`:
    /// now.
    pub timestamp: Option<u64>,
    /// Leave the fragment for the caller to commit (see
    /// `tdb::WriteSpec::uncommitted`).
    pub uncommitted: bool,
}

impl ArrowWrite {
    /// A write now, over the whole domain or the coordinates given.
    pub fn new() -> Self {
        ArrowWrite::default()
    }

    /// A dense write of the box `subarray`, rows in row-major order.
    pub fn with_subarray(mut self, subarray: Subarray) -> Self {
        self.subarray = Some(subarray);
        self
    }

    /// The fragment's timestamp.
    pub fn at(mut self, t: u64) -> Self {
        self.timestamp = Some(t);
        self
    }

    /// Writes the fragment uncommitted: no reader sees it until
    /// `Array::commit_fragments` names it.
    pub fn uncommitted(mut self) -> Self {
        self.uncommitted = true;
        self
    }
}

pub(crate) fn write<S: tdb::Storage>(
    array: &Array<S>,
    batches: &[RecordBatch],
    options: &ArrowWrite,
) -> Result<Written> {
    let schema = array.schema();
    let dense = schema.array_type == ArrayType::Dense;
    let Some(first) = batches.first() else {
        return Err(Error::Write("a write of no record batches".into()));
    };
    let columns = first.schema();
    for f in columns.fields() {
        if schema.dimension(f.name()).is_none() && schema.attribute(f.name()).is_none() {
            return Err(Error::Write(format!(
                "column {:?} is no field of the array (its fields: {})",
                f.name(),
                schema.field_names()
            )));
        }
    }
    if let Some(b) = batches
        .iter()
        .find(|b| b.schema().fields() != columns.fields())
    {
        return Err(Error::Write(format!(
            "the batches of one write have different columns: {:?} and {:?}",
            names(&columns),
            names(&b.schema())
        )));
    }
    let mut targets = Vec::new();
    for d in &schema.domain.dimensions {
        if columns.index_of(&d.name).is_ok() {
            targets.push(Target {
                name: &d.name,
                datatype: d.datatype,
                cell_val_num: d.cell_val_num,
                nullable: false,
                enumeration: None,
            });
        } else if !dense {
            return Err(missing(&d.name, "dimension of a sparse array"));
        }
    }
    for a in &schema.attributes {
        if columns.index_of(&a.name).is_err() {
            return Err(missing(&a.name, "attribute"));
        }
        let enumeration = match &a.enumeration {
            Some(e) => Some(array.snapshot().enumerations.get(e).ok_or_else(|| {
                Error::field(&a.name, format!("enumeration {e:?} was not loaded"))
            })?),
            None => None,
        };
        targets.push(Target {
            name: &a.name,
            datatype: a.datatype,
            cell_val_num: a.cell_val_num,
            nullable: a.nullable,
            enumeration,
        });
    }
    let mut buffers = Vec::with_capacity(targets.len());
    for t in &targets {
        let mut all: Option<FieldBuffer> = None;
        for b in batches {
            let column = b
                .column_by_name(t.name)
                .ok_or_else(|| missing(t.name, "field"))?;
            let part = from_array(t, column.as_ref())?;
            match &mut all {
                None => all = Some(part),
                Some(all) => all.extend_from(&part, 0..column.len()),
            }
        }
        buffers.extend(all);
    }
    let has_coordinates = buffers.len() > schema.attributes.len();
    let mut spec = if !dense {
        if options.subarray.is_some() {
            return Err(Error::Write(
                "a sparse write takes no subarray: its dimension columns place the cells".into(),
            ));
        }
        WriteSpec::new(buffers)
    } else if has_coordinates {
        if options.subarray.is_some() {
            return Err(Error::Write(
                "a dense write takes coordinate columns or a subarray, not both".into(),
            ));
        }
        WriteSpec::from_coordinates(schema, buffers).map_err(tdb::Error::from)?
    } else {
        let spec = WriteSpec::new(buffers);
        match &options.subarray {
            Some(s) => spec.with_subarray(s.clone()),
            None => spec,
        }
    };
    if let Some(t) = options.timestamp {
        spec = spec.at(t);
    }
    if options.uncommitted {
        spec = spec.uncommitted();
    }
    Ok(array.write(spec)?)
}

fn names(schema: &arrow_schema::Schema) -> Vec<&str> {
    schema.fields().iter().map(|f| f.name().as_str()).collect()
}

fn missing(name: &str, what: &str) -> Error {
    Error::Write(format!(
        "no column {name:?}: every {what} needs one in a write"
    ))
}
