//! `tdb plot`: a picture of an array's fragments, which decides whether to
//! consolidate: each fragment's non-empty domain and tile MBRs over two
//! dimensions (or as bars over one), coloured by timestamp, the fragments
//! the next consolidation would merge and the leftovers a vacuum would
//! remove marked. Drawn as SVG; PNG is that SVG rendered by resvg.
//!
//! [`Plot::load`] gathers (the only I/O), [`Plot::svg`] draws.

use crate::inspect::fragment_schema;
use crate::CliError;
use std::fmt::Write as _;
use tdb_format::{names, Scalar};
use tdb_fragment::{LoadedFragment, OpenArray, Opening, Section, TimeWindow};
use tdb_schema::{ArraySchema, Dimension, NDRange, Range};
use tdb_storage::{join, ByteRange, RangeRequest, Storage};

/// Tile rectangles drawn for one fragment at most; a fragment with more is
/// drawn as its non-empty domain alone (the legend says so).
pub const MAX_TILES_DRAWN: usize = 5_000;

/// What a plot shows, in the plotted dimensions' values.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    /// The array's name (its path's last component), for the title.
    pub title: String,
    /// The plotted dimensions: one (bars) or two (the first down, the
    /// second across, as rows and columns).
    pub axes: Vec<Axis>,
    /// The fragments a read sees, oldest first, then vacuum leftovers.
    pub fragments: Vec<FragmentShape>,
}

/// One plotted dimension.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// The dimension's name.
    pub name: String,
    /// Integer values cover `[v, v + 1)` when drawn; float ones are points.
    pub integer: bool,
}

/// One fragment as drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct FragmentShape {
    /// Its directory name.
    pub name: String,
    /// Its timestamp range.
    pub timestamps: [u64; 2],
    /// Dense or sparse.
    pub dense: bool,
    /// Its cells (sparse) or cells of its tiles (dense).
    pub cells: u64,
    /// Its non-empty domain on each plotted dimension, `[lo, hi]`.
    pub extent: Vec<[f64; 2]>,
    /// Its tiles' MBRs (sparse) or its tiles (dense), each like `extent`;
    /// empty when more than [`MAX_TILES_DRAWN`].
    pub tiles: Vec<Vec<[f64; 2]>>,
    /// How many tiles it has.
    pub tile_count: u64,
    /// The next consolidation (TileDB's default settings) merges it.
    pub candidate: bool,
    /// Consolidation replaced it and a vacuum would remove it.
    pub leftover: bool,
}

impl Plot {
    /// Gathers the fragments of the array in `dir` at `window` over the
    /// dimensions named `dims` (default: the first two, or the only one).
    /// `candidates` names the fragments the next consolidation merges.
    pub fn load(
        storage: &dyn Storage,
        dir: &str,
        window: TimeWindow,
        key: Option<&[u8; 32]>,
        dims: Option<&[String]>,
        candidates: &[String],
    ) -> Result<Plot, CliError> {
        let array = OpenArray::open(storage, dir, window, key)?;
        let schema = &array.schema().schema;
        let chosen = choose_dims(schema, dims)?;
        let mut fragments = array.load_fragments(storage)?;
        let visible = fragments.len();
        // Leftovers are not in a read's view: their footers load apart.
        let leftovers: Vec<_> = {
            let names = &array
                .directory
                .filtered_fragments(true)?
                .fragments_to_vacuum;
            (array.directory.unfiltered_fragments.iter())
                .filter(|f| names.contains(&f.path))
                .cloned()
                .collect()
        };
        if !leftovers.is_empty() {
            let opened = Opening::fragments_of(array.clone(), leftovers)?.run(storage)?;
            fragments.extend(opened.fragments);
        }
        load_rtrees(storage, dir, &array, key, &mut fragments)?;
        let mut shapes = Vec::with_capacity(fragments.len());
        for (i, f) in fragments.iter().enumerate() {
            let schema = fragment_schema(&array.schemas, f)?;
            shapes.push(shape(schema, f, &chosen, i >= visible, candidates)?);
        }
        Ok(Plot {
            title: tdb_storage::last_component(dir.trim_end_matches('/')).to_owned(),
            axes: chosen
                .iter()
                .map(|&d| {
                    let dim = &schema.domain.dimensions[d];
                    Axis {
                        name: dim.name.clone(),
                        integer: !dim.datatype.is_float(),
                    }
                })
                .collect(),
            fragments: shapes,
        })
    }
}

/// The indexes of the plotted dimensions.
fn choose_dims(schema: &ArraySchema, dims: Option<&[String]>) -> Result<Vec<usize>, CliError> {
    let all = &schema.domain.dimensions;
    let chosen: Vec<usize> = match dims {
        Some(names) => names
            .iter()
            .map(|n| {
                all.iter().position(|d| &d.name == n).ok_or_else(|| {
                    CliError::Usage(format!(
                        "--dims: no dimension {n:?}; the array has {}",
                        dim_names(all)
                    ))
                })
            })
            .collect::<Result<_, _>>()?,
        None => (0..all.len().min(2)).collect(),
    };
    if chosen.is_empty() || chosen.len() > 2 || (chosen.len() == 2 && chosen[0] == chosen[1]) {
        return Err(CliError::Usage(
            "--dims takes one dimension (bars) or two different ones (a map)".into(),
        ));
    }
    for &d in &chosen {
        let dim = &all[d];
        if dim.datatype.is_string() {
            let numeric: Vec<&str> = (all.iter())
                .filter(|d| !d.datatype.is_string())
                .map(|d| d.name.as_str())
                .collect();
            return Err(CliError::Usage(format!(
                "dimension {:?} holds strings, which have no place on an axis; choose \
                 numeric ones with --dims ({})",
                dim.name,
                if numeric.is_empty() {
                    "this array has none".to_owned()
                } else {
                    numeric.join(", ")
                }
            )));
        }
    }
    Ok(chosen)
}

fn dim_names(dims: &[Dimension]) -> String {
    dims.iter()
        .map(|d| d.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Loads the R-tree section of every sparse fragment (one batch).
fn load_rtrees(
    storage: &dyn Storage,
    dir: &str,
    array: &OpenArray,
    key: Option<&[u8; 32]>,
    fragments: &mut [LoadedFragment],
) -> Result<(), CliError> {
    let mut wanted = Vec::new();
    let mut requests = Vec::new();
    for (i, f) in fragments.iter().enumerate() {
        let footer = &f.metadata.footer;
        if footer.dense || f.metadata.legacy_mbrs().is_some() {
            continue;
        }
        let name = f.file.file_name().to_owned();
        let r = footer.section_range(Section::RTree, &name)?;
        let file = join(&join(dir, &f.file.path), names::FRAGMENT_METADATA_FILE);
        requests.push(RangeRequest::new(
            file,
            ByteRange::new(r.start, r.end.saturating_sub(r.start)),
        ));
        wanted.push(i);
    }
    let got = storage.read_ranges(&requests)?;
    for (i, read) in wanted.into_iter().zip(got) {
        let f = &mut fragments[i];
        let read = read.ok_or_else(|| {
            tdb_storage::StorageError::not_found(&format!(
                "{}/{}",
                f.file.path,
                names::FRAGMENT_METADATA_FILE
            ))
        })?;
        let schema = fragment_schema(&array.schemas, f)?.clone();
        f.metadata
            .load_section(Section::RTree, &read.bytes, key, &schema)?;
    }
    Ok(())
}

/// A range's bounds on `dim` as numbers.
fn bounds(dim: &Dimension, r: &Range) -> Option<[f64; 2]> {
    let (lo, hi) = r.bounds();
    let v = |b: &[u8]| Scalar::decode(dim.datatype, b).map(Scalar::as_f64);
    Some([v(lo)?, v(hi)?])
}

fn on(dims: &[usize], schema: &ArraySchema, nd: &NDRange) -> Option<Vec<[f64; 2]>> {
    dims.iter()
        .map(|&d| bounds(schema.domain.dimensions.get(d)?, nd.get(d)?))
        .collect()
}

fn shape(
    schema: &ArraySchema,
    f: &LoadedFragment,
    dims: &[usize],
    leftover: bool,
    candidates: &[String],
) -> Result<FragmentShape, CliError> {
    let name = f.file.file_name().to_owned();
    let footer = &f.metadata.footer;
    let bad = |what: &str| {
        CliError::from(tdb_fragment::FragmentError::invalid(
            &f.file.path,
            "non-empty domain",
            what.to_owned(),
        ))
    };
    let ned = footer
        .non_empty_domain
        .as_ref()
        .ok_or_else(|| bad("missing"))?;
    let extent = on(dims, schema, ned).ok_or_else(|| bad("not numeric"))?;
    let (tiles, tile_count) = if footer.dense {
        dense_tiles(schema, ned, dims)
    } else {
        let tree = f.metadata.rtree(&schema.domain)?;
        let leaves = tree.as_ref().map_or(&[][..], |t| t.leaves());
        let count = leaves.len() as u64;
        let drawn = if leaves.len() <= MAX_TILES_DRAWN {
            leaves
                .iter()
                .map(|m| on(dims, schema, m).ok_or_else(|| bad("an MBR is not numeric")))
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        (drawn, count)
    };
    Ok(FragmentShape {
        candidate: candidates.contains(&name),
        name,
        timestamps: [f.file.name.t1, f.file.name.t2],
        dense: footer.dense,
        cells: f.metadata.cell_num(schema).unwrap_or(0),
        extent,
        tiles,
        tile_count,
        leftover,
    })
}

/// A dense fragment's tiles on the plotted dimensions: every tile its
/// non-empty domain touches, clipped to the array's domain (none past
/// [`MAX_TILES_DRAWN`]), and how many tiles it has in all.
fn dense_tiles(schema: &ArraySchema, ned: &NDRange, dims: &[usize]) -> (Vec<Vec<[f64; 2]>>, u64) {
    use tdb_index::dense::{int_range, int_value, origin_and_extent, tile_of};
    let count = tdb_index::dense::tile_count(&schema.domain, ned).unwrap_or(0);
    // Each plotted dimension's tiles as value ranges.
    let per_dim: Option<Vec<Vec<[f64; 2]>>> = dims
        .iter()
        .map(|&d| {
            let dim = schema.domain.dimensions.get(d)?;
            let (lo, hi) = int_range(dim, ned.get(d)?)?;
            let (origin, extent) = origin_and_extent(dim)?;
            let (_, dom_hi) = dim.bounds()?;
            let dom_hi = int_value(dim.datatype, dom_hi)?;
            let (first, last) = (tile_of(lo, origin, extent)?, tile_of(hi, origin, extent)?);
            if last - first >= MAX_TILES_DRAWN as i128 {
                return None;
            }
            Some(
                (first..=last)
                    .map(|k| {
                        let start = origin + k * extent;
                        [start as f64, (start + extent - 1).min(dom_hi) as f64]
                    })
                    .collect(),
            )
        })
        .collect();
    let Some(per_dim) = per_dim else {
        return (Vec::new(), count);
    };
    if per_dim.iter().map(Vec::len).product::<usize>() > MAX_TILES_DRAWN {
        return (Vec::new(), count);
    }
    // Every combination, the last dimension fastest.
    let mut tiles: Vec<Vec<[f64; 2]>> = vec![Vec::new()];
    for ranges in &per_dim {
        tiles = tiles
            .iter()
            .flat_map(|t| {
                ranges.iter().map(move |r| {
                    let mut t = t.clone();
                    t.push(*r);
                    t
                })
            })
            .collect();
    }
    (tiles, count)
}

/// Layout of the drawing, in pixels.
const MARGIN_LEFT: f64 = 90.0;
const MARGIN_TOP: f64 = 50.0;
const MARGIN_BOTTOM: f64 = 60.0;
const LEGEND_WIDTH: f64 = 380.0;
const BAR_HEIGHT: f64 = 22.0;

/// Where a plot's values land: one axis's values to pixels.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Scale {
    /// The pixel of value `v`.
    pub fn at(&self, v: f64) -> f64 {
        if self.hi <= self.lo {
            return self.from;
        }
        self.from + (v - self.lo) / (self.hi - self.lo) * (self.to - self.from)
    }
}

impl Plot {
    /// The drawing's size in pixels for a plot area `width` × `height`
    /// (bars: as tall as the fragments need).
    pub fn size(&self, width: u32, height: u32) -> (u32, u32) {
        let h = if self.axes.len() == 1 {
            MARGIN_TOP + MARGIN_BOTTOM + BAR_HEIGHT * self.fragments.len().max(1) as f64
        } else {
            f64::from(height)
        };
        let legend = MARGIN_TOP + 18.0 * (self.fragments.len() as f64 + 4.0);
        (width + LEGEND_WIDTH as u32, h.max(legend).ceil() as u32)
    }

    /// The value range drawn on axis `i`: the fragments' union, padded a
    /// little; integer values cover `[v, v + 1)`.
    fn span(&self, i: usize) -> [f64; 2] {
        let integer = self.axes.get(i).is_some_and(|a| a.integer);
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for f in &self.fragments {
            if let Some([a, b]) = f.extent.get(i) {
                lo = lo.min(*a);
                hi = hi.max(if integer { b + 1.0 } else { *b });
            }
        }
        if !lo.is_finite() || !hi.is_finite() {
            return [0.0, 1.0];
        }
        if hi <= lo {
            return [lo - 0.5, hi + 0.5];
        }
        let pad = (hi - lo) * 0.03;
        [lo - pad, hi + pad]
    }

    /// The scales of a drawing of `width` × `height` pixels (as
    /// [`Plot::size`] gives): the first axis down (or across, for bars),
    /// the second across.
    pub fn scales(&self, width: u32, height: u32) -> Vec<Scale> {
        let right = f64::from(width) - LEGEND_WIDTH - 20.0;
        let bottom = f64::from(height) - MARGIN_BOTTOM;
        let across = |i: usize| {
            let [lo, hi] = self.span(i);
            Scale {
                lo,
                hi,
                from: MARGIN_LEFT,
                to: right,
            }
        };
        if self.axes.len() == 1 {
            return vec![across(0)];
        }
        let [lo, hi] = self.span(0);
        vec![
            Scale {
                lo,
                hi,
                from: MARGIN_TOP,
                to: bottom,
            },
            across(1),
        ]
    }

    /// The fragment's colour: oldest blue to newest red, by rank.
    pub fn colour(&self, i: usize) -> String {
        let n = self.fragments.len();
        let t = if n <= 1 {
            0.0
        } else {
            i as f64 / (n - 1) as f64
        };
        let mix = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
        let (r, g, b) = (mix(59.0, 180.0), mix(76.0, 4.0), mix(192.0, 38.0));
        format!("#{r:02x}{g:02x}{b:02x}")
    }

    /// The pixel rectangle `[x, y, width, height]` of a box of values
    /// (one per axis) under `scales`; for bars, row `row`.
    pub fn rect(&self, scales: &[Scale], b: &[[f64; 2]], row: usize) -> Option<[f64; 4]> {
        let end = |i: usize, hi: f64| {
            if self.axes.get(i).is_some_and(|a| a.integer) {
                hi + 1.0
            } else {
                hi
            }
        };
        if let [s] = scales {
            let [lo, hi] = *b.first()?;
            let (x0, x1) = (s.at(lo), s.at(end(0, hi)));
            let y = MARGIN_TOP + BAR_HEIGHT * row as f64 + 3.0;
            return Some([x0, y, (x1 - x0).max(1.0), BAR_HEIGHT - 6.0]);
        }
        let (rows, cols) = (scales.first()?, scales.get(1)?);
        let ([r0, r1], [c0, c1]) = (*b.first()?, *b.get(1)?);
        let (y0, y1) = (rows.at(r0), rows.at(end(0, r1)));
        let (x0, x1) = (cols.at(c0), cols.at(end(1, c1)));
        Some([x0, y0, (x1 - x0).max(1.0), (y1 - y0).max(1.0)])
    }

    /// The picture as SVG, `width` × `height` pixels (bars: as tall as
    /// they need). Every fragment's shapes carry `data-fragment`, its
    /// rectangle `class="fragment"` (with `data-state` `candidate`,
    /// `leftover` or empty) and its tiles `class="tile"`; axis ticks are
    /// `class="tick"` with `data-axis` and `data-value`, so a reader (a
    /// test) can map values to pixels without this code.
    pub fn svg(&self, width: u32, height: u32) -> String {
        let (w, h) = self.size(width, height);
        let total_w = f64::from(w);
        let scales = self.scales(w, h);
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Arial, sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r##"<rect width="{w}" height="{h}" fill="#ffffff"/>"##);
        let _ = writeln!(
            s,
            r#"<text x="{MARGIN_LEFT}" y="24" font-size="15">{} — {}</text>"#,
            esc(&self.title),
            plural(
                self.fragments.iter().filter(|f| !f.leftover).count() as u64,
                "fragment"
            )
        );
        self.axes_svg(&mut s, &scales, h);
        // Leftovers first (underneath), then fragments oldest first.
        let order: Vec<usize> = (0..self.fragments.len())
            .filter(|&i| self.fragments[i].leftover)
            .chain((0..self.fragments.len()).filter(|&i| !self.fragments[i].leftover))
            .collect();
        for (row, &i) in order.iter().enumerate() {
            let f = &self.fragments[i];
            let colour = if f.leftover {
                "#757575".to_owned()
            } else {
                self.colour(i)
            };
            let name = esc(&f.name);
            let row = if scales.len() == 1 { i } else { row };
            for t in &f.tiles {
                if let Some([x, y, rw, rh]) = self.rect(&scales, t, row) {
                    let _ = writeln!(
                        s,
                        r#"<rect class="tile" data-fragment="{name}" x="{x:.2}" y="{y:.2}" width="{rw:.2}" height="{rh:.2}" fill="none" stroke="{colour}" stroke-opacity="0.55" stroke-width="0.8"/>"#
                    );
                }
            }
            if let Some([x, y, rw, rh]) = self.rect(&scales, &f.extent, row) {
                let (state, dash, stroke_w) = match (f.leftover, f.candidate) {
                    (true, _) => ("leftover", r#" stroke-dasharray="2 3""#, 1.2),
                    (false, true) => ("candidate", r#" stroke-dasharray="7 4""#, 2.5),
                    (false, false) => ("", "", 1.5),
                };
                let _ = writeln!(
                    s,
                    r#"<rect class="fragment" data-fragment="{name}" data-state="{state}" x="{x:.2}" y="{y:.2}" width="{rw:.2}" height="{rh:.2}" fill="{colour}" fill-opacity="0.22" stroke="{colour}" stroke-width="{stroke_w}"{dash}><title>{name}</title></rect>"#
                );
            }
        }
        self.legend_svg(&mut s, total_w - LEGEND_WIDTH + 10.0);
        s.push_str("</svg>\n");
        s
    }

    fn axes_svg(&self, s: &mut String, scales: &[Scale], h: u32) {
        let bottom = f64::from(h) - MARGIN_BOTTOM;
        let axis_line = |s: &mut String, x1: f64, y1: f64, x2: f64, y2: f64| {
            let _ = writeln!(
                s,
                r##"<line x1="{x1:.2}" y1="{y1:.2}" x2="{x2:.2}" y2="{y2:.2}" stroke="#424242"/>"##
            );
        };
        let across = scales.last().copied();
        if let Some(sc) = across {
            let y = if scales.len() == 1 {
                MARGIN_TOP + BAR_HEIGHT * self.fragments.len().max(1) as f64 + 4.0
            } else {
                bottom + 4.0
            };
            axis_line(s, sc.from, y, sc.to, y);
            let axis = scales.len() - 1;
            for v in ticks(sc.lo, sc.hi) {
                let x = sc.at(v);
                let _ = writeln!(
                    s,
                    r##"<line class="tick" data-axis="{axis}" data-value="{v}" x1="{x:.2}" y1="{y:.2}" x2="{x:.2}" y2="{:.2}" stroke="#424242"/>"##,
                    y + 5.0
                );
                let _ = writeln!(
                    s,
                    r#"<text x="{x:.2}" y="{:.2}" text-anchor="middle">{}</text>"#,
                    y + 18.0,
                    number(v)
                );
            }
            let name = self.axes.last().map_or("", |a| a.name.as_str());
            let _ = writeln!(
                s,
                r#"<text x="{:.2}" y="{:.2}" text-anchor="middle" font-weight="bold">{}</text>"#,
                (sc.from + sc.to) / 2.0,
                y + 38.0,
                esc(name)
            );
        }
        if let [down, _] = scales {
            let x = MARGIN_LEFT - 4.0;
            axis_line(s, x, down.from, x, down.to);
            for v in ticks(down.lo, down.hi) {
                let y = down.at(v);
                let _ = writeln!(
                    s,
                    r##"<line class="tick" data-axis="0" data-value="{v}" x1="{:.2}" y1="{y:.2}" x2="{x:.2}" y2="{y:.2}" stroke="#424242"/>"##,
                    x - 5.0
                );
                let _ = writeln!(
                    s,
                    r#"<text x="{:.2}" y="{:.2}" text-anchor="end">{}</text>"#,
                    x - 8.0,
                    y + 4.0,
                    number(v)
                );
            }
            let name = self.axes.first().map_or("", |a| a.name.as_str());
            let _ = writeln!(
                s,
                r#"<text x="16" y="{:.2}" font-weight="bold" transform="rotate(-90 16 {:.2})" text-anchor="middle">{}</text>"#,
                (down.from + down.to) / 2.0,
                (down.from + down.to) / 2.0,
                esc(name)
            );
        }
    }

    fn legend_svg(&self, s: &mut String, x: f64) {
        let mut y = MARGIN_TOP;
        let line = |s: &mut String, y: f64, text: &str| {
            let _ = writeln!(
                s,
                r#"<text x="{:.2}" y="{y:.2}">{}</text>"#,
                x + 22.0,
                esc(text)
            );
        };
        line(s, y, "fragments, oldest first (timestamps ms)");
        y += 18.0;
        for (i, f) in self.fragments.iter().enumerate() {
            let colour = if f.leftover {
                "#757575".to_owned()
            } else {
                self.colour(i)
            };
            let _ = writeln!(
                s,
                r#"<rect x="{x:.2}" y="{:.2}" width="14" height="12" fill="{colour}" fill-opacity="0.6" stroke="{colour}"/>"#,
                y - 10.0
            );
            let mut text = format!(
                "{}..{} {}, {}, {}",
                f.timestamps[0],
                f.timestamps[1],
                if f.dense { "dense" } else { "sparse" },
                plural(f.cells, "cell"),
                plural(f.tile_count, "tile")
            );
            if f.tiles.is_empty() && f.tile_count > 0 {
                text.push_str(" (not drawn)");
            }
            if f.candidate {
                text.push_str(" · merged next");
            }
            if f.leftover {
                text.push_str(" · vacuum removes");
            }
            let _ = writeln!(
                s,
                r#"<text x="{:.2}" y="{y:.2}"><title>{}</title>{}</text>"#,
                x + 22.0,
                esc(&f.name),
                esc(&text)
            );
            y += 18.0;
        }
        y += 6.0;
        line(s, y, "dashed: merged by the next consolidation");
        y += 18.0;
        line(s, y, "grey dotted: consolidated, a vacuum removes it");
    }
}

/// About five round values between `lo` and `hi`.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = hi - lo;
    if span.is_nan() || span <= 0.0 || !span.is_finite() {
        return vec![lo];
    }
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 6.0)
        .unwrap_or(10.0 * mag);
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi && out.len() < 12 {
        out.push(v);
        v += step;
    }
    out
}

fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.3}")
    }
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The SVG rendered to PNG bytes by resvg (text with the system's fonts,
/// where there are any).
pub fn png(svg: &str) -> Result<Vec<u8>, CliError> {
    let mut options = resvg::usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_str(svg, &options)
        .map_err(|e| CliError::Output(format!("rendering the plot: {e}")))?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| CliError::Output("rendering the plot: an empty picture".into()))?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| CliError::Output(format!("encoding the plot as PNG: {e}")))
}
