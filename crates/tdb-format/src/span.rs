//! Spans: where each parsed field lies in its file, recorded by the parsers
//! themselves.
//!
//! `tdb dissect` explains every byte of a file with the same parsers that
//! read it, not a second set: every primitive of [`le`](crate::le) reports
//! the slice it took to a thread-local recorder, which is off unless
//! [`record`] runs. A field's offset is its slice's address minus the
//! address of the buffer being dissected, so parsers stay pure functions
//! over `&[u8]` and need no offsets threaded through them.
//!
//! Generic tiles are stored filtered (compressed, encrypted); the parser of
//! their contents reads a new buffer. [`decoded`] registers that buffer as a
//! nested [`Document`], so its fields are explained in its own offsets and
//! it points back at the stored bytes it came from.
//!
//! Cost when off: one relaxed atomic load per primitive.

use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Threads recording now: the fast path when none is.
static RECORDING: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static RECORDER: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

/// The decoded value of a field, as far as it is worth showing.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SpanValue {
    /// Nothing worth showing (long opaque bytes).
    Null,
    /// An unsigned integer.
    U64(u64),
    /// A signed integer.
    I64(i64),
    /// A float.
    F64(f64),
    /// A flag.
    Bool(bool),
    /// Text (names, URIs), cut at [`MAX_TEXT`] characters.
    Text(String),
    /// Short opaque bytes (at most [`MAX_BYTES`]).
    Bytes(Vec<u8>),
    /// A run of unsigned integers (offsets, sizes, counts), at most
    /// [`MAX_LIST`] of them.
    U64s(Vec<u64>),
}

/// The longest text a value keeps.
pub const MAX_TEXT: usize = 256;
/// The longest opaque bytes a value keeps.
pub const MAX_BYTES: usize = 32;
/// The longest run of integers a value keeps.
pub const MAX_LIST: usize = 256;

impl SpanValue {
    /// Bytes shown as text when they are printable UTF-8, as bytes when
    /// short, else not at all.
    pub fn of_bytes(b: &[u8]) -> SpanValue {
        match std::str::from_utf8(b) {
            Ok(s) if !s.is_empty() && !s.chars().any(char::is_control) => {
                SpanValue::Text(s.chars().take(MAX_TEXT).collect())
            }
            _ if b.len() <= MAX_BYTES => SpanValue::Bytes(b.to_vec()),
            _ => SpanValue::Null,
        }
    }

    /// A run of values, or nothing when it is too long to show.
    pub fn of_u64s(values: impl ExactSizeIterator<Item = u64>) -> SpanValue {
        if values.len() <= MAX_LIST {
            SpanValue::U64s(values.collect())
        } else {
            SpanValue::Null
        }
    }
}

impl fmt::Display for SpanValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpanValue::Null => Ok(()),
            SpanValue::U64(v) => write!(f, "{v}"),
            SpanValue::I64(v) => write!(f, "{v}"),
            SpanValue::F64(v) => write!(f, "{v}"),
            SpanValue::Bool(v) => write!(f, "{v}"),
            SpanValue::Text(s) => write!(f, "{s:?}"),
            SpanValue::Bytes(b) => {
                f.write_str("0x")?;
                b.iter().try_for_each(|x| write!(f, "{x:02x}"))
            }
            SpanValue::U64s(v) => write!(f, "{v:?}"),
        }
    }
}

/// One field: where it is, what it is, what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// Byte offset in its document.
    pub offset: u64,
    /// Bytes it takes.
    pub length: u64,
    /// The structures it sits in and its name, `/`-separated.
    pub path: String,
    /// Its type (`u32`, `u64 length`, `bytes`, `text`...).
    pub ty: &'static str,
    /// Its decoded value.
    pub value: SpanValue,
}

impl Span {
    /// One past its last byte.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.length)
    }
}

/// Bytes a document's fields came from in another document: a generic
/// tile's stored payload, for the buffer it unfilters to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodedFrom {
    /// The index of the document holding the stored bytes.
    pub document: usize,
    /// Their offset there.
    pub offset: u64,
    /// Their length.
    pub length: u64,
}

/// The fields found in one buffer: the file itself (document 0), or bytes
/// a generic tile unfiltered to.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Document {
    /// Where the bytes came from; `None` for the file.
    pub decoded_from: Option<DecodedFrom>,
    /// What the bytes are (`"decoded generic tile"`), empty for the file.
    pub what: String,
    /// Size of the buffer.
    pub size: u64,
    /// The fields, in the order they were parsed.
    pub fields: Vec<Span>,
}

impl Document {
    /// The fields that explain the bytes, sorted by offset: a field another
    /// field lies within is dropped (its parts explain it: a tile's payload
    /// and its chunks), and of fields over the same bytes the last parsed
    /// is kept (a second, more exact reading of them).
    pub fn leaves(&self) -> Vec<Span> {
        let mut order: Vec<(usize, &Span)> = self.fields.iter().enumerate().collect();
        // By offset, longest first, then latest first.
        order.sort_by_key(|&(i, f)| (f.offset, std::cmp::Reverse(f.length), std::cmp::Reverse(i)));
        let same = |a: &Span, b: &Span| a.offset == b.offset && a.length == b.length;
        let mut out: Vec<Span> = Vec::with_capacity(order.len());
        let mut previous: Option<&Span> = None;
        for (k, &(_, f)) in order.iter().enumerate() {
            if previous.is_some_and(|p| same(p, f)) {
                continue;
            }
            previous = Some(f);
            let holds_next = order
                .iter()
                .skip(k.saturating_add(1))
                .map(|&(_, g)| g)
                .find(|g| !same(g, f))
                .is_some_and(|g| g.end() <= f.end());
            if !holds_next {
                out.push(f.clone());
            }
        }
        out
    }

    /// The byte ranges `(offset, length)` no leaf field covers.
    pub fn unexplained(&self) -> Vec<(u64, u64)> {
        gaps(&self.leaves(), self.size)
    }

    /// Pairs of leaf fields that share bytes (a parser bug: each byte has
    /// one meaning).
    pub fn overlaps(&self) -> Vec<(Span, Span)> {
        let leaves = self.leaves();
        leaves
            .iter()
            .zip(leaves.iter().skip(1))
            .filter(|(a, b)| b.offset < a.end())
            .map(|(a, b)| (a.clone(), b.clone()))
            .collect()
    }
}

/// The ranges of `[0, size)` that no span covers (spans sorted by offset).
fn gaps(spans: &[Span], size: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut at = 0u64;
    for s in spans {
        if let Some(gap) = s.offset.checked_sub(at).filter(|&g| g > 0) {
            out.push((at, gap));
        }
        at = at.max(s.end());
    }
    if let Some(gap) = size.checked_sub(at).filter(|&g| g > 0) {
        out.push((at, gap));
    }
    out
}

/// Memory whose bytes are those of a document from `base` on: the
/// document's own buffer, or a copy of part of it.
struct Buffer {
    start: usize,
    end: usize,
    document: usize,
    base: u64,
}

#[derive(Default)]
struct Recorder {
    documents: Vec<Document>,
    buffers: Vec<Buffer>,
    path: Vec<String>,
}

impl Recorder {
    /// The document of the newest buffer holding all of `slice`, and the
    /// slice's offset there.
    fn locate(&self, slice: &[u8]) -> Option<(usize, u64)> {
        let start = slice.as_ptr() as usize;
        let end = start.checked_add(slice.len())?;
        let b = self
            .buffers
            .iter()
            .rev()
            .find(|b| b.start <= start && end <= b.end)?;
        let offset = (start.checked_sub(b.start)? as u64).checked_add(b.base)?;
        Some((b.document, offset))
    }

    /// A new document over `bytes`.
    fn add(&mut self, bytes: &[u8], doc: Document) -> usize {
        let document = self.documents.len();
        self.documents.push(doc);
        self.alias(bytes, document, 0);
        document
    }

    /// Records that `bytes` are document `document`'s from `base` on.
    /// Buffers registered before that share its memory were freed since
    /// (two live allocations never overlap): they are forgotten, so bytes
    /// parsed there are not taken for theirs.
    fn alias(&mut self, bytes: &[u8], document: usize, base: u64) {
        let start = bytes.as_ptr() as usize;
        let end = start.saturating_add(bytes.len());
        self.buffers.retain(|b| b.end <= start || end <= b.start);
        self.buffers.push(Buffer {
            start,
            end,
            document,
            base,
        });
    }

    fn path(&self, field: impl fmt::Display) -> String {
        let mut p = String::new();
        for s in &self.path {
            p.push_str(s);
            p.push('/');
        }
        let _ = fmt::write(&mut p, format_args!("{field}"));
        p
    }
}

/// Runs `f` with recording on for `file`: every field parsed from it (and
/// from buffers [`decoded`] from it) is returned with the result, document 0
/// being the file. Recordings nest: an inner one sees only its own fields.
pub fn record<T>(file: &[u8], f: impl FnOnce() -> T) -> (T, Vec<Document>) {
    struct On(Option<Recorder>);
    impl Drop for On {
        fn drop(&mut self) {
            RECORDER.with(|r| *r.borrow_mut() = self.0.take());
            RECORDING.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let mut recorder = Recorder::default();
    recorder.add(
        file,
        Document {
            size: file.len() as u64,
            ..Document::default()
        },
    );
    let outer = RECORDER.with(|r| r.borrow_mut().replace(recorder));
    RECORDING.fetch_add(1, Ordering::Relaxed);
    let on = On(outer);
    let value = f();
    let mine = RECORDER.with(|r| r.borrow_mut().take());
    drop(on);
    let docs = mine.map(|m| m.documents).unwrap_or_default();
    (value, docs)
}

/// Runs `f` unrecorded (loading the context a parser needs, a schema say,
/// whose fields are not the file's).
pub fn paused<T>(f: impl FnOnce() -> T) -> T {
    record(&[], f).0
}

/// Whether this thread records: lets a caller skip work done only for the
/// record.
pub fn recording() -> bool {
    RECORDING.load(Ordering::Relaxed) != 0
        && RECORDER.with(|r| r.try_borrow().is_ok_and(|r| r.is_some()))
}

fn with_recorder(f: impl FnOnce(&mut Recorder)) {
    if RECORDING.load(Ordering::Relaxed) == 0 {
        return;
    }
    RECORDER.with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            if let Some(rec) = r.as_mut() {
                f(rec);
            }
        }
    });
}

/// Records that `slice` is the field `field` of type `ty` with the value
/// `value` (computed only when recording). Slices of no recorded buffer,
/// and empty ones, are ignored.
pub fn field(
    field: impl fmt::Display,
    slice: &[u8],
    ty: &'static str,
    value: impl FnOnce() -> SpanValue,
) {
    if slice.is_empty() {
        return;
    }
    with_recorder(|rec| {
        if let Some((i, offset)) = rec.locate(slice) {
            let span = Span {
                offset,
                length: slice.len() as u64,
                path: rec.path(field),
                ty,
                value: value(),
            };
            if let Some(d) = rec.documents.get_mut(i) {
                d.fields.push(span);
            }
        }
    });
}

/// Registers `decoded`, the bytes `stored` unfiltered to, as a nested
/// document; `what` says what they are.
pub fn decoded(stored: &[u8], decoded: &[u8], what: &str) {
    with_recorder(|rec| {
        let from = rec.locate(stored).map(|(document, offset)| DecodedFrom {
            document,
            offset,
            length: stored.len() as u64,
        });
        let doc = Document {
            decoded_from: from,
            what: rec.path(what),
            size: decoded.len() as u64,
            fields: Vec::new(),
        };
        rec.add(decoded, doc);
    });
}

/// Runs `f`, keeping what it recorded only if it succeeds: a parse tried
/// for the detail it may add (a data tile's filter metadata) leaves no
/// half of itself behind when it fails.
pub fn attempt<T, E>(f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    struct Mark {
        documents: usize,
        fields: Vec<usize>,
        buffers: usize,
    }
    let mut mark = None;
    with_recorder(|rec| {
        mark = Some(Mark {
            documents: rec.documents.len(),
            fields: rec.documents.iter().map(|d| d.fields.len()).collect(),
            buffers: rec.buffers.len(),
        });
    });
    let out = f();
    if let (Err(_), Some(mark)) = (&out, mark) {
        with_recorder(|rec| {
            rec.documents.truncate(mark.documents);
            for (d, n) in rec.documents.iter_mut().zip(mark.fields) {
                d.fields.truncate(n);
            }
            // Buffers only grow while `f` runs, but may have evicted
            // older ones: forgetting an evicted one is safe.
            rec.buffers.truncate(mark.buffers);
            rec.buffers.retain(|b| b.document < mark.documents);
        });
    }
    out
}

/// Registers `copy` as a copy of `original` (filters hand the metadata of
/// the filters before them on in a buffer of their own): fields parsed from
/// it are the original's bytes.
pub fn mirror(original: &[u8], copy: &[u8]) {
    if original.len() != copy.len() || copy.is_empty() {
        return;
    }
    with_recorder(|rec| {
        if let Some((document, offset)) = rec.locate(original) {
            rec.alias(copy, document, offset);
        }
    });
}

/// A segment of the path of the fields parsed while it lives.
#[must_use = "the segment ends when the scope is dropped"]
pub struct Scope(bool);

impl Drop for Scope {
    fn drop(&mut self) {
        if self.0 {
            with_recorder(|rec| {
                rec.path.pop();
            });
        }
    }
}

/// Names the structure the next fields belong to (`dims[2]`), until the
/// returned guard drops. `name` is formatted only when recording.
pub fn scope(name: impl fmt::Display) -> Scope {
    let mut pushed = false;
    with_recorder(|rec| {
        rec.path.push(name.to_string());
        pushed = true;
    });
    Scope(pushed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(offset: u64, length: u64, path: &str) -> Span {
        Span {
            offset,
            length,
            path: path.into(),
            ty: "bytes",
            value: SpanValue::Null,
        }
    }

    #[test]
    fn records_offsets_paths_and_nested_documents() {
        let file = [1u8, 0, 0, 0, 7, 8, 9];
        let decoded_bytes = vec![5u8, 6];
        let ((), docs) = record(&file, || {
            field("a", &file[..4], "u32", || SpanValue::U64(1));
            let _s = scope(format_args!("dims[{}]", 0));
            field("b", &file[4..], "bytes", || SpanValue::of_bytes(&file[4..]));
            decoded(&file[4..], &decoded_bytes, "payload");
            field("c", &decoded_bytes[1..], "u8", || SpanValue::U64(6));
            // Not a recorded buffer: ignored.
            field("d", &[1, 2][..], "u8", || SpanValue::Null);
        });
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].fields[0], span_u32());
        assert_eq!(docs[0].fields[1].path, "dims[0]/b");
        assert_eq!((docs[0].fields[1].offset, docs[0].fields[1].length), (4, 3));
        assert!(docs[0].unexplained().is_empty());
        let from = docs[1].decoded_from.unwrap();
        assert_eq!((from.document, from.offset, from.length), (0, 4, 3));
        assert_eq!(docs[1].what, "dims[0]/payload");
        assert_eq!(docs[1].fields[0].offset, 1);
        assert_eq!(docs[1].unexplained(), [(0, 1)]);
        assert!(!recording());
    }

    #[test]
    fn copies_record_into_their_original() {
        let file = [0u8, 1, 2, 3, 4, 5];
        let ((), docs) = record(&file, || {
            let copy = file[2..].to_vec();
            mirror(&file[2..], &copy);
            field("x", &copy[1..3], "bytes", || SpanValue::Null);
        });
        assert_eq!(docs.len(), 1);
        assert_eq!((docs[0].fields[0].offset, docs[0].fields[0].length), (3, 2));
    }

    fn span_u32() -> Span {
        Span {
            offset: 0,
            length: 4,
            path: "a".into(),
            ty: "u32",
            value: SpanValue::U64(1),
        }
    }

    #[test]
    fn leaves_drop_containers_and_repeats() {
        let doc = Document {
            size: 20,
            fields: vec![
                span(0, 10, "payload"),
                span(0, 4, "count"),
                span(4, 6, "chunk"),
                span(12, 4, "x"),
                span(12, 4, "x again"),
                span(14, 4, "overlapping"),
            ],
            ..Document::default()
        };
        let leaves: Vec<_> = doc.leaves().into_iter().map(|s| s.path).collect();
        assert_eq!(leaves, ["count", "chunk", "x again", "overlapping"]);
        assert_eq!(doc.unexplained(), [(10, 2), (18, 2)]);
        assert_eq!(doc.overlaps().len(), 1);
    }
}
