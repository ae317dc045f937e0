//! Small parser helpers shared by the schema parsers: they lift the primitive
//! parsers of `tdb_format::le` and the pipeline parser of `tdb_filters` into
//! [`SchemaError`], naming the schema field.

use crate::SchemaError;
use tdb_filters::{filter_pipeline, FilterPipeline};
use tdb_format::le::{self, PResult};
use tdb_format::{Datatype, FormatError, FormatVersion};

/// A parser result (the rest and the value) whose error is [`SchemaError`].
pub(crate) type SResult<'a, T> = PResult<'a, T, SchemaError>;

/// Lifts a primitive parse result, naming the field only on failure.
pub(crate) fn lift<'a, T>(r: PResult<'a, T>, field: impl FnOnce() -> String) -> SResult<'a, T> {
    r.map_err(|source| format_error(field(), source))
}

/// A [`FormatError`] in `field`, file not yet known.
pub(crate) fn format_error(field: String, source: FormatError) -> SchemaError {
    SchemaError::Format {
        file: String::new(),
        field,
        source,
    }
}

/// The value of a parse that must use up all of `file`'s `what` bytes.
pub(crate) fn finish<T>(file: &str, what: &str, parsed: SResult<'_, T>) -> crate::Result<T> {
    match parsed {
        Ok(([], v)) => Ok(v),
        Ok((rest, _)) => {
            Err(SchemaError::invalid(what, format!("{} trailing bytes", rest.len())).in_file(file))
        }
        Err(e) => Err(e.in_file(file)),
    }
}

/// Fails a parse with `e`.
pub(crate) fn fail<T>(e: SchemaError) -> Result<T, SchemaError> {
    Err(e)
}

/// A `u32`-length-prefixed name. TileDB's names are byte strings; tdb asks
/// for UTF-8 so they can be `String`s.
pub(crate) fn name_u32(input: &[u8], field: impl Fn() -> String) -> SResult<'_, String> {
    let (rest, b) = lift(le::bytes_u32("name")(input), &field)?;
    utf8(b, field).map(|s| (rest, s))
}

/// A `u64`-length-prefixed string (dimension label URIs).
pub(crate) fn name_u64(input: &[u8], field: impl Fn() -> String) -> SResult<'_, String> {
    let (rest, b) = lift(le::bytes_u64("name")(input), &field)?;
    utf8(b, field).map(|s| (rest, s))
}

fn utf8(b: &[u8], field: impl Fn() -> String) -> Result<String, SchemaError> {
    String::from_utf8(b.to_vec())
        .map_err(|e| SchemaError::invalid(field(), format!("not UTF-8: {e}")))
}

/// A datatype code.
pub(crate) fn datatype(input: &[u8], field: impl Fn() -> String) -> SResult<'_, Datatype> {
    lift(le::code("datatype", Datatype::from_code)(input), field)
}

/// A serialized filter pipeline of format `version`.
pub(crate) fn pipeline(
    input: &[u8],
    version: FormatVersion,
    field: impl FnOnce() -> String,
) -> SResult<'_, FilterPipeline> {
    let field = field();
    let _pipeline = tdb_format::span::scope(&field);
    filter_pipeline(version)(input).map_err(|source| SchemaError::Filters {
        file: String::new(),
        field,
        source: Box::new(source),
    })
}

/// Writes a `u32`-length-prefixed name.
pub(crate) fn put_name_u32(out: &mut Vec<u8>, field: &'static str, s: &str) -> crate::Result<()> {
    le::put_bytes_u32(out, field, s.as_bytes()).map_err(|e| format_error(field.into(), e))
}
