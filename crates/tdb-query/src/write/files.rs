//! A new fragment's data files, filled tile by tile as uploads (nothing is
//! visible until the fragment is finished), and what its metadata records
//! of them: each tile's offset in each file, unfiltered var sizes, tile
//! metadata.

use crate::{QueryError, Result};
use bytes::Bytes;
use tdb_format::{DataField, DataPart};
use tdb_fragment::fragment_metadata::WrittenField;
use tdb_fragment::tile_metadata::TileMetadata;
use tdb_storage::{Upload, WritableStorage};

/// One tile of one field, built and filtered.
#[derive(Default)]
pub(crate) struct Built {
    pub fixed: Vec<u8>,
    pub var: Vec<u8>,
    pub validity: Vec<u8>,
    /// Unfiltered var bytes.
    pub var_size: u64,
    pub metadata: TileMetadata,
}

/// One file being filled, and where each tile landed in it.
struct File<'a> {
    key: String,
    upload: Box<dyn Upload + 'a>,
    size: u64,
    offsets: Vec<u64>,
}

impl<'a> File<'a> {
    fn open<S: WritableStorage + ?Sized>(storage: &'a S, key: String) -> Result<Self> {
        let upload = storage.upload(&key).map_err(|source| QueryError::Storage {
            file: key.clone(),
            source,
        })?;
        Ok(File {
            key,
            upload,
            size: 0,
            offsets: Vec::new(),
        })
    }

    fn put(&mut self, tile: Vec<u8>) -> Result<()> {
        self.begin_tile();
        self.append(tile)
    }

    /// The next tile starts here.
    fn begin_tile(&mut self) {
        self.offsets.push(self.size);
    }

    /// More bytes of the tile begun last.
    fn append(&mut self, bytes: Vec<u8>) -> Result<()> {
        self.size = self.size.saturating_add(bytes.len() as u64);
        self.upload
            .put(Bytes::from(bytes))
            .map_err(|source| QueryError::Storage {
                file: self.key.clone(),
                source,
            })
    }

    fn finish(self) -> Result<(u64, Vec<u64>)> {
        let File {
            key,
            upload,
            size,
            offsets,
        } = self;
        upload
            .finish()
            .map_err(|source| QueryError::Storage { file: key, source })?;
        Ok((size, offsets))
    }
}

/// One field's files in a new fragment.
pub(crate) struct FieldFiles<'a> {
    /// The field's index in the fragment footer.
    pub idx: usize,
    fixed: File<'a>,
    var: Option<File<'a>>,
    validity: Option<File<'a>>,
    var_sizes: Vec<u64>,
    metadata: Vec<TileMetadata>,
}

impl<'a> FieldFiles<'a> {
    /// Starts the files of `field` (footer index `idx`) in `frag_dir`.
    pub fn open<S: WritableStorage + ?Sized>(
        storage: &'a S,
        frag_dir: &str,
        idx: usize,
        field: &DataField,
        var: bool,
        nullable: bool,
    ) -> Result<Self> {
        let key = |p: DataPart| tdb_storage::join(frag_dir, &field.file_name(p));
        Ok(FieldFiles {
            idx,
            fixed: File::open(storage, key(DataPart::Fixed))?,
            var: var
                .then(|| File::open(storage, key(DataPart::Var)))
                .transpose()?,
            validity: nullable
                .then(|| File::open(storage, key(DataPart::Validity)))
                .transpose()?,
            var_sizes: Vec::new(),
            metadata: Vec::new(),
        })
    }

    /// Appends the field's next tile.
    pub fn push(&mut self, b: Built) -> Result<()> {
        self.fixed.put(b.fixed)?;
        if let Some(v) = &mut self.var {
            v.put(b.var)?;
            self.var_sizes.push(b.var_size);
        }
        if let Some(v) = &mut self.validity {
            v.put(b.validity)?;
        }
        self.metadata.push(b.metadata);
        Ok(())
    }

    /// Starts the field's next tile, to be uploaded in pieces as it is
    /// filtered ([`FieldFiles::append`], then [`FieldFiles::end_tile`]).
    pub fn begin_tile(&mut self) {
        self.fixed.begin_tile();
        for v in [&mut self.var, &mut self.validity].into_iter().flatten() {
            v.begin_tile();
        }
    }

    /// More filtered bytes of part `kind` of the tile begun last.
    pub fn append(&mut self, kind: DataPart, bytes: Vec<u8>) -> Result<()> {
        match (kind, &mut self.var, &mut self.validity) {
            (DataPart::Validity, _, Some(v)) | (DataPart::Var, Some(v), _) => v.append(bytes),
            (DataPart::Fixed, _, _) => self.fixed.append(bytes),
            _ => Err(QueryError::invalid(format!(
                "{}: no {kind:?} part to append to",
                self.fixed.key
            ))),
        }
    }

    /// The tile begun last is whole: its metadata, and its unfiltered var
    /// bytes (var-size fields).
    pub fn end_tile(&mut self, metadata: TileMetadata, var_size: u64) {
        if self.var.is_some() {
            self.var_sizes.push(var_size);
        }
        self.metadata.push(metadata);
    }

    /// Makes the field's files visible (still uncommitted: no reader
    /// looks at a fragment without its commit file).
    pub fn finish(self) -> Result<WrittenField> {
        let (fixed_size, fixed_offsets) = self.fixed.finish()?;
        let (var_size, var) = match self.var {
            Some(f) => {
                let (s, o) = f.finish()?;
                (s, Some((o, self.var_sizes)))
            }
            None => (0, None),
        };
        let (validity_size, validity_offsets) = match self.validity {
            Some(f) => {
                let (s, o) = f.finish()?;
                (s, Some(o))
            }
            None => (0, None),
        };
        Ok(WrittenField {
            idx: self.idx,
            sizes: [fixed_size, var_size, validity_size],
            fixed_offsets,
            var,
            validity_offsets,
            metadata: self.metadata,
        })
    }
}
