//! `tdb plot` on fixtures TileDB wrote: every fragment's rectangle is where
//! TileDB says its non-empty domain is (read against the picture's own
//! axis ticks), tiles sit inside their fragment, consolidation candidates
//! and vacuum leftovers are marked as TileDB lists them, PNG renders.

use crate::common::{ok, tdb};
use serde_json::Value;

/// The attributes of every `<tag ...>` element with `class="class"`.
fn elements(svg: &str, class: &str) -> Vec<std::collections::HashMap<String, String>> {
    let marker = format!(r#"class="{class}""#);
    svg.lines()
        .filter(|l| l.contains(&marker))
        .map(|l| {
            let mut attrs = std::collections::HashMap::new();
            let mut rest = l;
            while let Some(eq) = rest.find("=\"") {
                let name = rest[..eq].rsplit(' ').next().unwrap().to_owned();
                let after = &rest[eq + 2..];
                let end = after.find('"').unwrap();
                attrs.insert(name, after[..end].to_owned());
                rest = &after[end + 1..];
            }
            attrs
        })
        .collect()
}

fn num(attrs: &std::collections::HashMap<String, String>, key: &str) -> f64 {
    attrs[key].parse().unwrap()
}

/// Value → pixel on `axis`, from two of the picture's ticks.
fn axis_map(svg: &str, axis: usize) -> impl Fn(f64) -> f64 {
    let ticks: Vec<(f64, f64)> = elements(svg, "tick")
        .into_iter()
        .filter(|t| t["data-axis"] == axis.to_string())
        .map(|t| {
            // Ticks across the picture are vertical lines (x), ticks down
            // it horizontal ones (y).
            let at = if t["x1"] == t["x2"] { "x1" } else { "y1" };
            (num(&t, "data-value"), num(&t, at))
        })
        .collect();
    assert!(ticks.len() >= 2, "axis {axis}: {ticks:?}");
    let ((v0, p0), (v1, p1)) = (ticks[0], ticks[ticks.len() - 1]);
    move |v| p0 + (v - v0) * (p1 - p0) / (v1 - v0)
}

fn expected(case: &str) -> Value {
    let text = std::fs::read_to_string(tdb_testdata::root().join(case).join("expected.json"));
    serde_json::from_str(&text.unwrap()).unwrap()
}

fn plot(case: &str, extra: &[&str]) -> String {
    let array = tdb_testdata::root().join(case).join("array");
    let mut args = vec!["plot", array.to_str().unwrap()];
    args.extend_from_slice(extra);
    ok(&tdb(&args))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.05
}

#[test]
fn fragments_and_their_tiles_are_drawn_where_tiledb_says() {
    let case = "sparse_hilbert_multi";
    let svg = plot(case, &[]);
    let exp = expected(case);
    let (down, across) = (axis_map(&svg, 0), axis_map(&svg, 1));
    let rects = elements(&svg, "fragment");
    let tiles = elements(&svg, "tile");
    let fragments = exp["fragments"].as_array().unwrap();
    assert!(fragments.len() >= 2);
    assert_eq!(rects.len(), fragments.len());
    let capacity = exp["schema"]["capacity"].as_f64().unwrap();
    for f in fragments {
        let name = f["name"].as_str().unwrap();
        let r = rects
            .iter()
            .find(|r| r["data-fragment"] == name)
            .unwrap_or_else(|| panic!("{name} not drawn"));
        // Float dimensions: the rectangle spans exactly [lo, hi].
        let ned = &f["nonempty_domain"];
        let [y0, y1] = [0, 1].map(|i| down(ned[0][i].as_f64().unwrap()));
        let [x0, x1] = [0, 1].map(|i| across(ned[1][i].as_f64().unwrap()));
        let (x, y, w, h) = (num(r, "x"), num(r, "y"), num(r, "width"), num(r, "height"));
        assert!(
            close(x, x0) && close(x + w, x1),
            "{name}: x {x}..{} vs {x0}..{x1}",
            x + w
        );
        assert!(
            close(y, y0) && close(y + h, y1),
            "{name}: y {y}..{} vs {y0}..{y1}",
            y + h
        );
        // Default consolidation merges every fragment of the window.
        assert_eq!(r["data-state"], "candidate", "{name}");
        // One MBR per tile of `capacity` cells, each inside the fragment.
        let mine: Vec<_> = tiles
            .iter()
            .filter(|t| t["data-fragment"] == name)
            .collect();
        let cells = f["cell_num"].as_f64().unwrap();
        assert_eq!(mine.len() as f64, (cells / capacity).ceil(), "{name}");
        for t in mine {
            let (tx, ty) = (num(t, "x"), num(t, "y"));
            assert!(
                tx >= x - 0.05 && tx + num(t, "width") <= x + w + 0.05,
                "{name}"
            );
            assert!(
                ty >= y - 0.05 && ty + num(t, "height") <= y + h + 0.05,
                "{name}"
            );
        }
    }
}

#[test]
fn vacuum_leftovers_and_dense_tiles_are_drawn_as_bars() {
    let case = "consolidated_dense_not_vacuumed";
    let svg = plot(case, &[]);
    let exp = expected(case);
    let across = axis_map(&svg, 0);
    let rects = elements(&svg, "fragment");
    let leftovers: Vec<&str> = exp["fragments_to_vacuum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(!leftovers.is_empty());
    let marked: Vec<&str> = rects
        .iter()
        .filter(|r| r["data-state"] == "leftover")
        .map(|r| r["data-fragment"].as_str())
        .collect();
    assert_eq!(marked.len(), leftovers.len());
    assert!(leftovers.iter().all(|l| marked.contains(l)), "{marked:?}");
    // The merged fragment: integer cells lo..=hi cover [lo, hi + 1).
    let f = &exp["fragments"][0];
    let name = f["name"].as_str().unwrap();
    let r = rects.iter().find(|r| r["data-fragment"] == name).unwrap();
    let ned = &f["nonempty_domain"][0];
    let (lo, hi) = (ned[0].as_f64().unwrap(), ned[1].as_f64().unwrap());
    assert!(close(num(r, "x"), across(lo)));
    assert!(close(num(r, "x") + num(r, "width"), across(hi + 1.0)));
    assert_eq!(r["data-state"], "", "one fragment: nothing to merge");
    // Dense tiles: whole tiles of the extent, side by side over it.
    let extent = exp["schema"]["dims"][0]["tile"].as_f64().unwrap();
    let tiles: Vec<_> = elements(&svg, "tile")
        .into_iter()
        .filter(|t| t["data-fragment"] == name)
        .collect();
    assert_eq!(tiles.len() as f64, ((hi - lo + 1.0) / extent).ceil());
    for t in &tiles {
        assert!(close(num(t, "width"), across(extent) - across(0.0)));
    }
}

#[test]
fn png_renders_the_same_picture() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plot.png");
    let case = "sparse_hilbert_multi";
    let svg = plot(case, &["--width", "500", "--height", "400"]);
    plot(
        case,
        &[
            "--width",
            "500",
            "--height",
            "400",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let pixmap = resvg::tiny_skia::Pixmap::decode_png(&bytes).unwrap();
    let size = |key: &str| -> u32 {
        let at = svg.find(&format!(" {key}=\"")).unwrap() + key.len() + 3;
        svg[at..].split('"').next().unwrap().parse().unwrap()
    };
    assert_eq!(
        (pixmap.width(), pixmap.height()),
        (size("width"), size("height"))
    );
    let pixel = |x: f64, y: f64| {
        let p = pixmap.pixel(x as u32, y as u32).unwrap();
        (p.red(), p.green(), p.blue())
    };
    let r = &elements(&svg, "fragment")[0];
    let (x, y, w, h) = (num(r, "x"), num(r, "y"), num(r, "width"), num(r, "height"));
    assert_ne!(
        pixel(x + w / 2.0, y + h / 2.0),
        (255, 255, 255),
        "inside a fragment"
    );
    assert_eq!(
        pixel(x + w + 8.0, y + h / 2.0),
        (255, 255, 255),
        "beside it"
    );
}

#[test]
fn dimensions_to_draw_are_checked() {
    let array = tdb_testdata::root().join("sparse_hilbert_multi/array");
    let out = tdb(&["plot", array.to_str().unwrap(), "--dims", "nope"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no dimension \"nope\"") && err.contains("x, y"),
        "{err}"
    );
    let out = tdb(&["plot", array.to_str().unwrap(), "--dims", "y"]);
    assert!(out.status.success(), "one dimension draws bars");
    let strings = tdb_testdata::root().join("sparse_string_dim/array");
    let out = tdb(&["plot", strings.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds strings"), "{err}");
}

/// Every array of the corpus (every release, encrypted ones with their
/// key, label arrays and group members too) plots, or says its dimensions
/// hold strings; every plot draws each fragment a read sees.
#[test]
fn every_fixture_array_plots() {
    use tdb_cli::plot::Plot;
    use tdb_fragment::TimeWindow;
    let (mut drawn, mut strings) = (0, 0);
    for o in tdb_testdata::objects() {
        let storage = tdb_storage::LocalStorage::new(&o.dir);
        if tdb_fragment::object_kind(&storage, "").unwrap() != Some(tdb_fragment::ObjectKind::Array)
        {
            continue;
        }
        match Plot::load(&storage, "", TimeWindow::ALL, o.key.as_ref(), None, &[]) {
            Ok(plot) => {
                let svg = plot.svg(400, 300);
                let shown = plot.fragments.iter().filter(|f| !f.leftover).count();
                assert_eq!(
                    elements(&svg, "fragment").len(),
                    plot.fragments.len(),
                    "{}",
                    o.case
                );
                if let Some(exp) = &o.expected {
                    if let Some(f) = exp["fragments"].as_array() {
                        assert_eq!(shown, f.len(), "{}", o.case);
                    }
                }
                drawn += 1;
            }
            Err(tdb_cli::CliError::Usage(m)) if m.contains("holds strings") => strings += 1,
            Err(e) => panic!("{}: {e}", o.case),
        }
    }
    assert!(
        drawn > 400 && strings > 0,
        "{drawn} drawn, {strings} string arrays"
    );
}
