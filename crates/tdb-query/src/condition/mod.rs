//! Query conditions: TileDB-Py's expression syntax parsed into the condition
//! tree TileDB serializes ([`tdb_fragment::Condition`]), bound to a schema,
//! and evaluated over columns of cells.
//!
//! PLACEHOLDER: being written (helper). The signatures below are the
//! contract the reader uses.

use crate::column::Columns;
use crate::{QueryError, Result};
use std::collections::HashMap;
use tdb_fragment::Condition;
use tdb_schema::{ArraySchema, Enumeration};

/// Parses `expr` (TileDB-Py syntax) into a condition tree whose values are
/// encoded in their fields' datatypes under `schema`.
pub fn parse(expr: &str, schema: &ArraySchema) -> Result<Condition> {
    let _ = schema;
    Err(QueryError::condition(
        expr,
        "query conditions are not supported yet",
    ))
}

/// A condition checked against a schema and ready to evaluate.
#[derive(Debug, Clone)]
pub struct BoundCondition {
    fields: Vec<String>,
}

impl BoundCondition {
    /// Binds `condition` to `schema` (enumerated attributes compare labels
    /// through `enumerations`, keyed by enumeration name).
    pub fn new(
        condition: &Condition,
        schema: &ArraySchema,
        enumerations: &HashMap<String, Enumeration>,
    ) -> Result<Self> {
        let _ = (condition, schema, enumerations);
        Err(QueryError::condition(
            "",
            "query conditions are not supported yet",
        ))
    }

    /// The fields the condition reads.
    pub fn fields(&self) -> &[String] {
        &self.fields
    }

    /// Clears `mask[i]` for every cell `i` where the condition does not
    /// hold; `mask.len()` is the number of cells.
    pub fn evaluate(&self, columns: &dyn Columns, mask: &mut [bool]) -> Result<()> {
        let _ = (columns, mask);
        Ok(())
    }
}
