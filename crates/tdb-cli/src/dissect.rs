//! `tdb dissect`: [`tdb_fragment::dissect`]'s explanations as a listing or
//! as JSON.

use serde_json::{json, Value};
use std::fmt::Write as _;
use tdb_format::span::{Document, Span, SpanValue};
use tdb_fragment::Dissection;

fn value(v: &SpanValue) -> Value {
    match v {
        SpanValue::U64(x) => json!(x),
        SpanValue::I64(x) => json!(x),
        SpanValue::F64(x) => json!(x),
        SpanValue::Bool(x) => json!(x),
        SpanValue::Text(s) => json!(s),
        SpanValue::U64s(v) => json!(v),
        SpanValue::Bytes(_) => json!(v.to_string()),
        _ => Value::Null,
    }
}

fn field(s: &Span) -> Value {
    json!({
        "offset": s.offset,
        "length": s.length,
        "path": s.path,
        "type": s.ty,
        "value": value(&s.value),
    })
}

/// The documents decoded from document `parent`'s bytes.
fn children(d: &Dissection, parent: usize) -> impl Iterator<Item = (usize, &Document)> {
    d.documents
        .iter()
        .enumerate()
        .filter(move |(_, doc)| doc.decoded_from.is_some_and(|f| f.document == parent))
}

fn document_json(d: &Dissection, i: usize, doc: &Document) -> Value {
    let mut v = json!({
        "size": doc.size,
        "fields": doc.leaves().iter().map(field).collect::<Vec<_>>(),
        "unexplained": doc.unexplained().iter().map(|&(o, l)| json!([o, l])).collect::<Vec<_>>(),
    });
    let decoded: Vec<Value> = children(d, i)
        .map(|(j, child)| {
            let mut c = document_json(d, j, child);
            if let Some(from) = child.decoded_from {
                c["decoded_from"] = json!([from.offset, from.length]);
            }
            c["what"] = json!(child.what);
            c
        })
        .collect();
    if !decoded.is_empty() {
        v["decoded"] = json!(decoded);
    }
    v
}

/// The shape: `{"file", "size", "fields", "unexplained"}`, plus
/// `kind`, `error` when parsing stopped early, and `decoded`: the documents
/// generic tiles unfiltered to, each with the stored bytes it came from
/// (`decoded_from`: `[offset, length]` in its parent).
pub fn json(d: &Dissection) -> Value {
    let Some(file) = d.file_document() else {
        return json!({ "file": d.file, "kind": d.kind, "error": d.error });
    };
    let mut v = document_json(d, 0, file);
    v["file"] = json!(d.file);
    v["kind"] = json!(d.kind);
    if let Some(e) = &d.error {
        v["error"] = json!(e);
    }
    v
}

fn document_text(d: &Dissection, i: usize, doc: &Document, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    let mut pending: Vec<(usize, &Document)> = children(d, i).collect();
    let child = |out: &mut String, j: usize, c: &Document| {
        let from = c
            .decoded_from
            .map(|f| format!(" from {}+{}", f.offset, f.length))
            .unwrap_or_default();
        let _ = writeln!(out, "{pad}  {} ({} bytes{from}):", c.what, c.size);
        document_text(d, j, c, indent + 4, out);
    };
    for s in doc.leaves() {
        let _ = write!(
            out,
            "{pad}{:>8} {:>6}  {:<10} {}",
            s.offset, s.length, s.ty, s.path
        );
        if s.value != SpanValue::Null {
            let _ = write!(out, " = {}", s.value);
        }
        out.push('\n');
        // Decoded bytes come right after the field holding the last of the
        // bytes they were decoded from.
        let (now, later): (Vec<_>, Vec<_>) = pending.into_iter().partition(|(_, c)| {
            c.decoded_from.is_some_and(|f| {
                let end = f.offset.saturating_add(f.length);
                s.offset < end && end <= s.end()
            })
        });
        pending = later;
        for (j, c) in now {
            child(out, j, c);
        }
    }
    for (j, c) in pending {
        child(out, j, c);
    }
    let gaps = doc.unexplained();
    if !gaps.is_empty() {
        let list: Vec<String> = gaps.iter().map(|(o, l)| format!("{o}+{l}")).collect();
        let _ = writeln!(out, "{pad}unexplained: {}", list.join(", "));
    }
}

/// A listing: the file, then one line per field (offset, length, type,
/// path = value), decoded tiles indented under their header, unexplained
/// bytes last.
pub fn text(d: &Dissection) -> String {
    let mut out = String::new();
    let size = d.file_document().map_or(0, |f| f.size);
    let _ = writeln!(out, "{} ({}, {size} bytes)", d.file, d.kind);
    if let Some(file) = d.file_document() {
        document_text(d, 0, file, 2, &mut out);
    }
    if let Some(e) = &d.error {
        let _ = writeln!(out, "  stopped: {e}");
    }
    out
}

/// The columns of [`csv_rows`].
pub const CSV_HEADER: [&str; 7] = [
    "file", "document", "offset", "length", "path", "type", "value",
];

/// One row per field of every document (0: the file; others: decoded
/// bytes, numbered as in the dissection), then one per unexplained range
/// (type `unexplained`): for a spreadsheet or a script.
pub fn csv_rows(d: &Dissection) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for (i, doc) in d.documents.iter().enumerate() {
        let row = |offset: u64, length: u64, path: &str, ty: &str, value: String| {
            vec![
                d.file.clone(),
                i.to_string(),
                offset.to_string(),
                length.to_string(),
                path.to_owned(),
                ty.to_owned(),
                value,
            ]
        };
        for s in doc.leaves() {
            let value = match &s.value {
                SpanValue::Text(t) => t.clone(),
                v => v.to_string(),
            };
            rows.push(row(s.offset, s.length, &s.path, s.ty, value));
        }
        for (o, l) in doc.unexplained() {
            rows.push(row(o, l, "", "unexplained", String::new()));
        }
    }
    rows
}
