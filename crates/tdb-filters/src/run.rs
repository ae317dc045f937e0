//! Running a whole pipeline over one chunk, each filter seeing the datatype
//! the filters before it produced.

use crate::buffer::{Parts, Stage, Unfiltered};
use crate::workspace::Workspace;
use crate::{Filter, FilterPipeline, Result};
use tdb_format::{Datatype, FormatVersion};

impl FilterPipeline {
    fn has(&self, f: impl Fn(&Filter) -> bool) -> bool {
        self.filters.iter().any(f)
    }

    /// TileDB's ASCII rule: string RLE (from v12) or dictionary encoding
    /// (from v13) take the whole tile with its offsets.
    fn string_codec_takes_whole_tile(&self, version: FormatVersion) -> bool {
        (version.rle_ascii_offsets_in_data() && self.has(|f| matches!(f, Filter::Rle { .. })))
            || (version.dictionary_ascii_offsets_in_data()
                && self.has(|f| matches!(f, Filter::Dictionary { .. })))
    }

    /// Whether TileDB stores no offsets tile for a var-size field of
    /// `datatype` under this pipeline, because RLE or dictionary encoding
    /// keep the offsets inside the data tile (ASCII RLE from v12, ASCII
    /// dictionary from v13, UTF-8 from v17). Such offsets tiles are written
    /// as a tile of zero chunks, and reverse filtering rebuilds the offsets.
    /// `version` is the array schema's format version, as TileDB uses it.
    pub fn skip_offsets_filtering(&self, datatype: Datatype, version: FormatVersion) -> bool {
        match datatype {
            Datatype::StringAscii => self.string_codec_takes_whole_tile(version),
            Datatype::StringUtf8 => {
                version.utf8_offsets_in_data()
                    && self.has(|f| matches!(f, Filter::Rle { .. } | Filter::Dictionary { .. }))
            }
            _ => false,
        }
    }

    /// Whether TileDB cuts tiles of a field into chunks under this pipeline
    /// (it does not when string RLE or dictionary encoding, or WebP, need
    /// the whole tile). TileDB applies the ASCII version rule to UTF-8 here.
    pub fn use_tile_chunking(&self, var: bool, version: FormatVersion, datatype: Datatype) -> bool {
        if self.max_chunk_size == 0 {
            false
        } else if var && matches!(datatype, Datatype::StringAscii | Datatype::StringUtf8) {
            !self.string_codec_takes_whole_tile(version)
        } else {
            !self.has(|f| matches!(f, Filter::Webp { .. }))
        }
    }

    /// The input datatype of each filter, chained from the field's datatype
    /// the way TileDB's `FilterPipeline::deserialize` chains them.
    pub fn stage_datatypes(&self, field: Datatype) -> Vec<Datatype> {
        self.stage_types(field).collect()
    }

    fn stage_types(&self, field: Datatype) -> impl Iterator<Item = Datatype> + '_ {
        let mut t = field;
        self.filters.iter().map(move |f| {
            let input = t;
            t = f.output_datatype(t);
            input
        })
    }

    /// Filters one chunk forward. `st.datatype` is the field's datatype;
    /// `ws` the calling thread's workspace (its codec contexts serve every
    /// chunk the thread filters). Returns the chunk's metadata and data as
    /// TileDB stores them.
    pub fn forward_chunk(
        &self,
        st: &Stage<'_>,
        ws: &mut Workspace,
        chunk: Vec<u8>,
    ) -> Result<(Vec<u8>, Vec<u8>)> {
        let mut metadata = Parts::new();
        let mut data = Parts::one(chunk);
        for (filter, datatype) in self.filters.iter().zip(self.stage_types(st.datatype)) {
            let stage = Stage { datatype, ..*st };
            (metadata, data) = filter.forward(&stage, &mut ws.codecs, metadata, data)?;
        }
        Ok((metadata.concat(), data.concat()))
    }

    /// Unfilters one chunk, appending its data to `out.data` (and, for a
    /// string tile with offsets inside, its cell offsets, counted from the
    /// chunk's start, to `out.offsets`), so a caller decodes a tile's
    /// chunks straight into the tile. `ws` is the calling thread's
    /// workspace: give it every chunk the thread decodes.
    /// `st.datatype` is the field's datatype.
    pub fn reverse_chunk(
        &self,
        st: &Stage<'_>,
        ws: &mut Workspace,
        metadata: &[u8],
        data: &[u8],
        out: &mut Unfiltered,
    ) -> Result<()> {
        let result = self.reverse_stages(st, ws, metadata, data, out);
        ws.trim();
        result
    }

    /// [`FilterPipeline::reverse_chunk`] before the workspace is trimmed.
    fn reverse_stages(
        &self,
        st: &Stage<'_>,
        ws: &mut Workspace,
        metadata: &[u8],
        data: &[u8],
        out: &mut Unfiltered,
    ) -> Result<()> {
        // A NONE filter hands its input on untouched: skip it rather than
        // copy the chunk through it.
        if self.filters.iter().all(|f| matches!(f, Filter::None)) {
            out.data.extend_from_slice(data);
            return Ok(());
        }
        let Workspace {
            a,
            b,
            types,
            codecs,
        } = ws;
        types.clear();
        types.extend(self.stage_types(st.datatype));
        let (mut src, mut dst) = (a, b);
        let last = self
            .filters
            .iter()
            .position(|f| !matches!(f, Filter::None))
            .unwrap_or(0);
        let run = self
            .filters
            .iter()
            .zip(types.iter().copied())
            .enumerate()
            .rev()
            .filter(|(_, (f, _))| !matches!(f, Filter::None));
        for (step, (i, (filter, datatype))) in run.enumerate() {
            let stage = st.with_datatype(datatype);
            let (m, d): (&[u8], &[u8]) = if step == 0 {
                (metadata, data)
            } else {
                (&src.metadata, &src.data)
            };
            if i == last {
                // The pipeline's first filter is the last to reverse: it
                // writes into the caller's buffer.
                filter.reverse(&stage, codecs, m, d, out)?;
            } else {
                dst.clear();
                filter.reverse(&stage, codecs, m, d, dst)?;
                std::mem::swap(&mut src, &mut dst);
            }
        }
        Ok(())
    }
}
