//! The metadata of a fragment a writer has just written, every section
//! laid out as TileDB 2.30 lays it: one entry per tile in each field's
//! offsets sections (zeros where the field has no such file), TileDB's
//! tile statistics and fragment summaries ([`crate::tile_metadata`]), an
//! empty processed-conditions list unless set
//! ([`FragmentMetadata::set_processed_conditions`]).

use super::{Footer, FragmentMetadata, Section, SectionData};
use crate::tile_metadata::{self, TileMetadata};
use tdb_format::TimestampedName;
use tdb_index::RTree;
use tdb_schema::{ArraySchema, NDRange};

/// What a writer records of one field of a new fragment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WrittenField {
    /// The field's index in the footer.
    pub idx: usize,
    /// Bytes of its fixed (or offsets), var and validity files.
    pub sizes: [u64; 3],
    /// Each tile's offset in the fixed file.
    pub fixed_offsets: Vec<u64>,
    /// Var-size fields: each tile's offset in the var file, and its
    /// unfiltered size.
    pub var: Option<(Vec<u64>, Vec<u64>)>,
    /// Nullable fields: each tile's offset in the validity file.
    pub validity_offsets: Option<Vec<u64>>,
    /// Each tile's statistics.
    pub metadata: Vec<TileMetadata>,
}

/// A new fragment's extent: what its footer says beside the files.
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenShape {
    /// The non-empty domain (`None`: no cell).
    pub non_empty_domain: Option<NDRange>,
    /// Tiles per field.
    pub tile_num: u64,
    /// TileDB's `last_tile_cell_num`: a dense tile's whole extent, the
    /// cells of a sparse fragment's last tile.
    pub last_tile_cell_num: u64,
}

impl FragmentMetadata {
    /// The metadata of fragment `name`, written with `schema` into the
    /// fields of `footer` ([`Footer::new_written`]), of `shape`, with
    /// `rtree` (empty for dense fragments) and the `fields` written.
    pub fn written(
        schema: &ArraySchema,
        name: TimestampedName,
        mut footer: Footer,
        shape: WrittenShape,
        rtree: &RTree,
        fields: Vec<WrittenField>,
    ) -> FragmentMetadata {
        let tile_num = shape.tile_num;
        footer.non_empty_domain = shape.non_empty_domain;
        footer.sparse_tile_num = if footer.dense { 0 } else { tile_num };
        footer.last_tile_cell_num = shape.last_tile_cell_num;
        let field_num = footer.fields().len();
        let mut stats: Vec<Vec<TileMetadata>> = vec![Vec::new(); field_num];
        for f in &fields {
            let [fixed, var, validity] = f.sizes;
            let slots = [
                (&mut footer.file_sizes, fixed),
                (&mut footer.file_var_sizes, var),
                (&mut footer.file_validity_sizes, validity),
            ];
            for (sizes, size) in slots {
                if let Some(slot) = sizes.get_mut(f.idx) {
                    *slot = size;
                }
            }
        }
        let mut meta = FragmentMetadata::new(name, footer);
        let mut bytes = Vec::new();
        rtree.write(&mut bytes);
        meta.set_section(Section::RTree, SectionData::RTree(bytes));
        let zeros = vec![0u64; tile_num as usize];
        for i in 0..field_num {
            for section in [
                Section::TileOffsets(i),
                Section::VarOffsets(i),
                Section::VarSizes(i),
                Section::ValidityOffsets(i),
            ] {
                meta.set_section(section, SectionData::U64s(zeros.clone()));
            }
        }
        for f in fields {
            let i = f.idx;
            if i >= field_num {
                continue;
            }
            meta.set_section(Section::TileOffsets(i), SectionData::U64s(f.fixed_offsets));
            if let Some((offsets, sizes)) = f.var {
                meta.set_section(Section::VarOffsets(i), SectionData::U64s(offsets));
                meta.set_section(Section::VarSizes(i), SectionData::U64s(sizes));
            }
            if let Some(o) = f.validity_offsets {
                meta.set_section(Section::ValidityOffsets(i), SectionData::U64s(o));
            }
            if let Some(s) = stats.get_mut(i) {
                *s = f.metadata;
            }
        }
        for (i, tiles) in stats.iter().enumerate() {
            let (mins, maxes, sums, nulls) =
                tile_metadata::sections(schema, i, tile_num as usize, tiles);
            meta.set_section(Section::Mins(i), SectionData::Bounds(mins));
            meta.set_section(Section::Maxes(i), SectionData::Bounds(maxes));
            meta.set_section(Section::Sums(i), SectionData::Sums(sums));
            meta.set_section(Section::NullCounts(i), SectionData::U64s(nulls));
        }
        let per_field: Vec<&[TileMetadata]> = stats.iter().map(Vec::as_slice).collect();
        meta.set_section(
            Section::FragmentSummaries,
            SectionData::Summaries(tile_metadata::fragment_summaries(schema, &per_field)),
        );
        meta.set_section(
            Section::ProcessedConditions,
            SectionData::Conditions(Vec::new()),
        );
        meta
    }

    /// The delete and update commits a merged fragment has applied, by
    /// TileDB's condition markers (their paths in the array): reads skip
    /// them for its cells, its delete condition indexes point into them.
    pub fn set_processed_conditions(&mut self, markers: Vec<String>) {
        self.set_section(
            Section::ProcessedConditions,
            SectionData::Conditions(markers),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_not_in_the_footer_are_ignored_not_a_panic() {
        let schema = tdb_schema::ArraySchema::builder(tdb_format::ArrayType::Sparse)
            .dimension(tdb_schema::DimensionBuilder::range("d", 0i32..=9).tile_extent(5i32))
            .attribute(tdb_schema::AttributeBuilder::new(
                "a",
                tdb_format::Datatype::Int32,
            ))
            .build()
            .unwrap();
        let footer = Footer::new_written(&schema, "__1_1_x", false, false);
        let name = TimestampedName::generate(1, 1, None).unwrap();
        let meta = FragmentMetadata::written(
            &schema,
            name,
            footer,
            WrittenShape {
                non_empty_domain: None,
                tile_num: 0,
                last_tile_cell_num: 0,
            },
            &RTree::empty(tdb_index::DEFAULT_FANOUT),
            vec![WrittenField {
                idx: 99,
                ..WrittenField::default()
            }],
        );
        assert_eq!(meta.footer.file_sizes, vec![0; meta.footer.fields().len()]);
    }
}
