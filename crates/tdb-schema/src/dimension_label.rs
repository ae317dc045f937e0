//! Dimension labels (v18): a reference to the array that stores a label of
//! a dimension. The layout follows TileDB's `DimensionLabel::serialize`
//! (the spec's table lists the fields in a different order).

use crate::read::{datatype, lift, name_u32, name_u64, SResult};
use crate::{ArraySchema, AttributeBuilder, Dimension, DimensionBuilder, Result, VAR_NUM};
use tdb_filters::FilterPipeline;
use tdb_format::le;
use tdb_format::names::LABELS_DIR;
use tdb_format::{ArrayType, DataOrder, Datatype};

/// The name of a label array's attribute (TileDB's, for labels it creates).
pub const LABEL_ATTRIBUTE: &str = "label";

/// The name of a label array's dimension.
pub const INDEX_DIMENSION: &str = "index";

/// A dimension label.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DimensionLabel {
    /// Index of the labelled dimension.
    pub dimension: u32,
    /// The label's name.
    pub name: String,
    /// Whether `uri` is relative to the array.
    pub relative_uri: bool,
    /// Where the label's array lives.
    pub uri: String,
    /// The attribute of the label array holding the labels.
    pub attribute: String,
    /// Order of the label values.
    pub order: DataOrder,
    /// Datatype of the labels.
    pub datatype: Datatype,
    /// Values per label.
    pub cell_val_num: u32,
    /// Whether the label array lives outside this array.
    pub is_external: bool,
}

impl DimensionLabel {
    /// A label of dimension `dimension` stored inside its array, the
    /// `index`-th label the schema adds (TileDB's `add_dimension_label`:
    /// `__labels/l<index>`, attribute `label`; ASCII labels are var-length,
    /// others one value).
    pub fn new(
        dimension: u32,
        name: impl Into<String>,
        index: usize,
        order: DataOrder,
        datatype: Datatype,
    ) -> Self {
        DimensionLabel {
            dimension,
            name: name.into(),
            relative_uri: true,
            uri: format!("{LABELS_DIR}/l{index}"),
            attribute: LABEL_ATTRIBUTE.to_owned(),
            order,
            datatype,
            cell_val_num: if datatype == Datatype::StringAscii {
                VAR_NUM
            } else {
                1
            },
            is_external: false,
        }
    }

    /// The schema of the label's own array, as TileDB makes it
    /// (`DimensionLabel`'s constructor): dense, one dimension `index` with
    /// `labelled`'s datatype, domain and tile extent (or `tile_extent`,
    /// raw bytes of that datatype), one attribute holding the labels in
    /// order, filtered by `filters`; TileDB's defaults otherwise.
    pub fn array_schema(
        &self,
        labelled: &Dimension,
        tile_extent: Option<Vec<u8>>,
        filters: FilterPipeline,
    ) -> Result<ArraySchema> {
        let (lo, hi) = labelled.bounds().unwrap_or_default();
        let mut index = DimensionBuilder::new(INDEX_DIMENSION, labelled.datatype)
            .domain_bytes(lo.to_vec(), hi.to_vec());
        if let Some(e) = tile_extent.or_else(|| labelled.tile_extent.clone()) {
            index = index.tile_extent_bytes(e);
        }
        ArraySchema::builder(ArrayType::Dense)
            .dimension(index)
            .attribute(
                AttributeBuilder::new(&self.attribute, self.datatype)
                    .cell_val_num(self.cell_val_num)
                    .order(self.order)
                    .filter_pipeline(filters),
            )
            .build()
    }

    pub(crate) fn parse(input: &[u8], index: usize) -> SResult<'_, Self> {
        let field = |what: &str| format!("dimension label {index} {what}");
        let (input, dimension) = lift(le::u32("dimension id")(input), || field("dimension"))?;
        let (input, name) = name_u32(input, || field("name"))?;
        let (input, relative_uri) = lift(le::bool("relative uri")(input), || field("relative"))?;
        let (input, uri) = name_u64(input, || field("uri"))?;
        let (input, attribute) = name_u32(input, || field("attribute name"))?;
        let (input, code) = lift(le::u8("order")(input), || field("order"))?;
        let order =
            DataOrder::from_code(code).map_err(|e| crate::read::format_error(field("order"), e))?;
        let (input, dt) = datatype(input, || field("datatype"))?;
        let (input, cell_val_num) = lift(le::u32("cell_val_num")(input), || field("cell_val_num"))?;
        let (input, is_external) = lift(le::bool("is external")(input), || field("external"))?;
        Ok((
            input,
            DimensionLabel {
                dimension,
                name,
                relative_uri,
                uri,
                attribute,
                order,
                datatype: dt,
                cell_val_num,
                is_external,
            },
        ))
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) -> Result<()> {
        le::put_u32(out, self.dimension);
        crate::read::put_name_u32(out, "dimension label name", &self.name)?;
        le::put_bool(out, self.relative_uri);
        le::put_bytes_u64(out, self.uri.as_bytes());
        crate::read::put_name_u32(out, "dimension label attribute", &self.attribute)?;
        le::put_u8(out, self.order.code());
        le::put_u8(out, self.datatype.code());
        le::put_u32(out, self.cell_val_num);
        le::put_bool(out, self.is_external);
        Ok(())
    }
}
