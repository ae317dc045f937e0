//! One attribute: name, datatype, values per cell, filters, fill value,
//! nullability, data order and enumeration, with the version each arrived in.

use crate::dimension::VAR_NUM;
use crate::read::{datatype, fail, lift, name_u32, pipeline, put_name_u32, SResult};
use crate::{Result, SchemaError};
use tdb_filters::FilterPipeline;
use tdb_format::le;
use tdb_format::{DataOrder, Datatype, FormatVersion};

/// The largest default fill tdb builds for a pre-v6 attribute (TileDB's
/// default fill repeats one value `cell_val_num` times; a corrupt count must
/// not turn into a huge allocation).
const MAX_DEFAULT_FILL: u64 = 1 << 20;

/// An attribute of the schema.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Attribute {
    /// The name.
    pub name: String,
    /// Datatype of the values.
    pub datatype: Datatype,
    /// Values per cell, or [`VAR_NUM`] for var-length cells.
    pub cell_val_num: u32,
    /// The filter pipeline of the attribute's tiles.
    pub filters: FilterPipeline,
    /// One cell's fill bytes (stored from v6; before, TileDB's default:
    /// the datatype's default value repeated for each value of a cell, once
    /// for var-length cells).
    pub fill: Vec<u8>,
    /// Whether cells may be null (v7).
    pub nullable: bool,
    /// The validity byte of fill cells (v7; 0 before).
    pub fill_validity: u8,
    /// Order of the data (v17; unordered before).
    pub order: DataOrder,
    /// The enumeration the values index into (v20).
    pub enumeration: Option<String>,
}

impl Attribute {
    /// Whether cells are var-length.
    pub fn is_var(&self) -> bool {
        self.cell_val_num == VAR_NUM
    }

    /// TileDB's default fill for a datatype and cell_val_num.
    pub fn default_fill(datatype: Datatype, cell_val_num: u32) -> Result<Vec<u8>> {
        let n = if cell_val_num == VAR_NUM {
            1
        } else {
            cell_val_num
        };
        let one = datatype.default_fill();
        let size = u64::from(n).saturating_mul(one.len() as u64);
        if size > MAX_DEFAULT_FILL {
            return Err(SchemaError::invalid(
                "cell_val_num",
                format!("a default fill of {size} bytes is beyond tdb's limit"),
            ));
        }
        Ok(one.repeat(n as usize))
    }

    /// Parses attribute `index` of format `version`.
    pub(crate) fn parse(input: &[u8], version: FormatVersion, index: usize) -> SResult<'_, Self> {
        let (input, name) = name_u32(input, || format!("attribute {index} name"))?;
        let field = |what: &str| format!("attribute {index} ({name}) {what}");
        let (input, dt) = datatype(input, || field("datatype"))?;
        let (input, cell_val_num) = lift(le::u32("cell_val_num")(input), || field("cell_val_num"))?;
        if cell_val_num == 0 {
            return fail(SchemaError::invalid(field("cell_val_num"), "zero"));
        }
        let (mut input, filters) = pipeline(input, version, || field("filters"))?;
        let fill = if version.has_fill_values() {
            let fill;
            (input, fill) = lift(le::bytes_u64("fill value")(input), || field("fill value"))?;
            if fill.is_empty() {
                return fail(SchemaError::invalid(field("fill value"), "empty"));
            }
            fill.to_vec()
        } else {
            Attribute::default_fill(dt, cell_val_num)
                .map_err(|e| SchemaError::invalid(field("fill value"), e.to_string()))?
        };
        let (mut nullable, mut fill_validity) = (false, 0);
        if version.has_validity() {
            (input, nullable) = lift(le::bool("nullable")(input), || field("nullable"))?;
            (input, fill_validity) =
                lift(le::u8("fill validity")(input), || field("fill validity"))?;
        }
        let mut order = DataOrder::Unordered;
        if version.has_attribute_order() {
            let code;
            (input, code) = lift(le::u8("order")(input), || field("order"))?;
            order = DataOrder::from_code(code)
                .map_err(|e| crate::read::format_error(field("order"), e))?;
        }
        let mut enumeration = None;
        if version.has_enumerations() {
            let e;
            (input, e) = name_u32(input, || field("enumeration name"))?;
            enumeration = (!e.is_empty()).then_some(e);
        }
        Ok((
            input,
            Attribute {
                datatype: dt,
                cell_val_num,
                filters,
                fill,
                nullable,
                fill_validity,
                order,
                enumeration,
                name,
            },
        ))
    }

    /// Writes the layout of format `version` (v20 or later).
    pub(crate) fn write(&self, version: FormatVersion, out: &mut Vec<u8>) -> Result<()> {
        put_name_u32(out, "attribute name", &self.name)?;
        le::put_u8(out, self.datatype.code());
        le::put_u32(out, self.cell_val_num);
        self.filters.write(version, out);
        le::put_bytes_u64(out, &self.fill);
        le::put_bool(out, self.nullable);
        le::put_u8(out, self.fill_validity);
        le::put_u8(out, self.order.code());
        put_name_u32(
            out,
            "enumeration name",
            self.enumeration.as_deref().unwrap_or(""),
        )
    }
}
