//! Builds an [`Attribute`] with TileDB's defaults: one value per cell, the
//! datatype's default fill, no filters, unordered, not nullable.

use crate::value::compatible;
use crate::{Attribute, ValidationError, Value, VAR_NUM};
use tdb_filters::{Filter, FilterPipeline};
use tdb_format::{DataOrder, Datatype};

/// The fill as given: one typed value for every value of the cell, or bytes.
#[derive(Debug, Clone)]
enum Fill {
    Default,
    Value(Datatype, Vec<u8>),
    Bytes(Vec<u8>),
}

/// Builds an [`Attribute`].
#[derive(Debug, Clone)]
pub struct AttributeBuilder {
    name: String,
    datatype: Datatype,
    cell_val_num: u32,
    nullable: bool,
    fill: Fill,
    fill_validity: bool,
    filters: FilterPipeline,
    order: DataOrder,
    enumeration: Option<String>,
}

impl Attribute {
    /// A builder for an attribute of `datatype`.
    pub fn builder(name: impl Into<String>, datatype: Datatype) -> AttributeBuilder {
        AttributeBuilder::new(name, datatype)
    }
}

impl AttributeBuilder {
    /// One value of `datatype` per cell (var-length for ANY, as TileDB does).
    pub fn new(name: impl Into<String>, datatype: Datatype) -> Self {
        AttributeBuilder {
            name: name.into(),
            datatype,
            cell_val_num: if datatype == Datatype::Any {
                VAR_NUM
            } else {
                1
            },
            nullable: false,
            fill: Fill::Default,
            fill_validity: false,
            filters: FilterPipeline::default(),
            order: DataOrder::Unordered,
            enumeration: None,
        }
    }

    /// Values per cell.
    pub fn cell_val_num(mut self, n: u32) -> Self {
        self.cell_val_num = n;
        self
    }

    /// Var-length cells (strings, lists).
    pub fn var(self) -> Self {
        self.cell_val_num(VAR_NUM)
    }

    /// Whether cells may be null.
    pub fn nullable(mut self, nullable: bool) -> Self {
        self.nullable = nullable;
        self
    }

    /// The fill of unwritten cells: `value` for every value of a fixed cell,
    /// once for a var cell.
    pub fn fill<T: Value>(mut self, value: T) -> Self {
        self.fill = Fill::Value(T::DATATYPE, value.to_le());
        self
    }

    /// The fill of unwritten cells as raw bytes (one whole fixed cell).
    pub fn fill_bytes(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.fill = Fill::Bytes(bytes.into());
        self
    }

    /// Whether the fill of a nullable attribute is a valid value (TileDB's
    /// default: the fill is null).
    pub fn fill_validity(mut self, valid: bool) -> Self {
        self.fill_validity = valid;
        self
    }

    /// The attribute's filters.
    pub fn filters(mut self, filters: impl IntoIterator<Item = Filter>) -> Self {
        self.filters = FilterPipeline::new(filters);
        self
    }

    /// The attribute's pipeline, chunk size included.
    pub fn filter_pipeline(mut self, pipeline: FilterPipeline) -> Self {
        self.filters = pipeline;
        self
    }

    /// Declares the values sorted (dimension-label arrays).
    pub fn order(mut self, order: DataOrder) -> Self {
        self.order = order;
        self
    }

    /// Values are indexes into the schema's enumeration `name`.
    pub fn enumeration(mut self, name: impl Into<String>) -> Self {
        self.enumeration = Some(name.into());
        self
    }

    pub(crate) fn build(self) -> Result<Attribute, ValidationError> {
        let values = if self.cell_val_num == VAR_NUM {
            1
        } else {
            self.cell_val_num as usize
        };
        let fill = match self.fill {
            Fill::Default => {
                // Sizes are checked by validation; an absurd cell_val_num
                // must not allocate, so an empty fill stands in for it.
                Attribute::default_fill(self.datatype, self.cell_val_num).unwrap_or_default()
            }
            Fill::Value(given, bytes) => {
                if !compatible(given, self.datatype) {
                    return Err(ValidationError::ValueType {
                        field: format!("attribute {} fill value", self.name),
                        datatype: self.datatype.name(),
                        given: given.name(),
                    });
                }
                if values > 1 << 20 {
                    Vec::new()
                } else {
                    bytes.repeat(values)
                }
            }
            Fill::Bytes(b) => b,
        };
        Ok(Attribute {
            datatype: self.datatype,
            cell_val_num: self.cell_val_num,
            filters: self.filters,
            fill,
            nullable: self.nullable,
            fill_validity: u8::from(self.fill_validity),
            order: self.order,
            enumeration: self.enumeration,
            name: self.name,
        })
    }
}
