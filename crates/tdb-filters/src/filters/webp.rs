//! WEBP: a whole dense `uint8` tile stored as one WebP image.
//!
//! TileDB never cuts WebP tiles into chunks, and reads the tile as an image
//! of `y_extent` rows of `x_extent` bytes: the tile extents of dimensions 0
//! and 1, which the schema fills in when an array is created and stores in
//! the filter's options. A row is `x_extent / channels` pixels of 3 (RGB,
//! BGR) or 4 (RGBA, BGRA) bytes each, so a tile is exactly
//! `y_extent * x_extent` bytes; libwebp reads that many bytes whatever the
//! tile's size, and on read copies out as many bytes as the chunk header
//! promises, so any other size cannot round-trip through TileDB.
//!
//! Metadata (prepended to the metadata of earlier filters): `u32` part
//! count, then `u32` encoded size per part; the data is the WebP file
//! (RIFF) of each part. TileDB's reverse copies a whole chunk out of every
//! part (so it reads one part only, and only as the pipeline's first
//! filter), so tdb writes and reads exactly one.
//!
//! Reverse decodes any WebP TileDB writes (lossless VP8L, lossy VP8 with an
//! optional ALPH chunk) with `image-webp`, pixel for pixel as libwebp does;
//! forward encodes lossless only, as `image-webp` does. Lossless pixels are
//! exact, though the bytes differ from libwebp's.

use crate::buffer::{take_data, to_u32, MetaReader, Parts, Stage, Unfiltered};
use crate::{FilterError, Result};
use image_webp::{ColorType, WebPDecoder, WebPEncoder};
use std::io::Cursor;
use tdb_format::Datatype;

const NAME: &str = tdb_format::FilterType::Webp.name();

/// The largest width or height of a WebP image, in pixels.
const MAX_SIDE: u32 = 16383;

/// The WebP options a tile depends on (TileDB's `WebpFilter` fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Options {
    /// `WEBP_INPUT_FORMAT`: 1 RGB, 2 BGR, 3 RGBA, 4 BGRA.
    pub format: u8,
    /// `WEBP_LOSSLESS`.
    pub lossless: bool,
    /// Tile extent of dimension 0: rows.
    pub y_extent: u16,
    /// Tile extent of dimension 1: bytes per row.
    pub x_extent: u16,
}

/// The pixel layout of the cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Rgb,
    Bgr,
    Rgba,
    Bgra,
}

impl Format {
    fn channels(self) -> usize {
        match self {
            Format::Rgb | Format::Bgr => 3,
            Format::Rgba | Format::Bgra => 4,
        }
    }

    fn blue_first(self) -> bool {
        matches!(self, Format::Bgr | Format::Bgra)
    }
}

/// The image one tile is.
#[derive(Debug, Clone, Copy)]
struct Image {
    format: Format,
    width: u32,
    height: u32,
}

impl Image {
    /// Checks the options as TileDB does when it fills in the extents
    /// (`WebpFilter::set_extents`); a zero extent means they never were.
    fn new(opts: Options) -> Result<Self> {
        let format = match opts.format {
            1 => Format::Rgb,
            2 => Format::Bgr,
            3 => Format::Rgba,
            4 => Format::Bgra,
            0 => return Err(bad_option("WEBP_INPUT_FORMAT is not set".into())),
            n => return Err(bad_option(format!("WEBP_INPUT_FORMAT {n} is not 1 to 4"))),
        };
        let channels = format.channels() as u32;
        let (y, x) = (u32::from(opts.y_extent), u32::from(opts.x_extent));
        if y == 0 || x == 0 {
            return Err(bad_option(format!(
                "the tile extents in the options are {y} x {x}; TileDB sets them from \
                 dimensions 0 and 1 when the array is created"
            )));
        }
        if x.checked_rem(channels) != Some(0) {
            return Err(bad_option(format!(
                "x extent {x} is not a whole number of {channels}-byte pixels"
            )));
        }
        let image = Image {
            format,
            width: x.checked_div(channels).unwrap_or(0),
            height: y,
        };
        if image.width > MAX_SIDE || image.height > MAX_SIDE {
            return Err(bad_option(format!(
                "a {} x {} pixel tile exceeds WebP's {MAX_SIDE} x {MAX_SIDE}",
                image.width, image.height
            )));
        }
        Ok(image)
    }

    /// The tile's size in bytes (at most 16383² × 4).
    fn len(&self) -> usize {
        (self.width as usize)
            .saturating_mul(self.height as usize)
            .saturating_mul(self.format.channels())
    }
}

fn bad_option(reason: String) -> FilterError {
    FilterError::bad_input(NAME, reason)
}

fn check_datatype(st: &Stage<'_>) -> Result<()> {
    if st.datatype != Datatype::UInt8 {
        return Err(FilterError::bad_input(
            NAME,
            format!("WebP takes uint8 cells, not {:?}", st.datatype),
        ));
    }
    Ok(())
}

/// Forward over one (whole) tile.
pub(crate) fn forward(
    st: &Stage<'_>,
    opts: Options,
    metadata: Parts,
    data: Parts,
) -> Result<(Parts, Parts)> {
    check_datatype(st)?;
    let image = Image::new(opts)?;
    if !opts.lossless {
        return Err(FilterError::unsupported(
            NAME,
            "tdb writes WebP only lossless (WEBP_LOSSLESS = 1); lossy encoding needs libwebp",
        ));
    }
    if data.count() != 1 {
        return Err(FilterError::bad_input(
            NAME,
            format!(
                "TileDB decodes a WebP tile from one part, not {}; WEBP must come first in \
                 the pipeline",
                data.count()
            ),
        ));
    }
    let tile = data.concat();
    if tile.len() != image.len() {
        return Err(FilterError::bad_input(
            NAME,
            format!(
                "a tile of {} bytes is not the {} rows of {} bytes the tile extents make",
                tile.len(),
                image.height,
                image.len().checked_div(image.height as usize).unwrap_or(0)
            ),
        ));
    }
    let (pixels, color) = match image.format {
        Format::Rgb => (tile, ColorType::Rgb8),
        Format::Rgba => (tile, ColorType::Rgba8),
        Format::Bgr => (swap_red_blue(tile, 3), ColorType::Rgb8),
        Format::Bgra => (swap_red_blue(tile, 4), ColorType::Rgba8),
    };
    let mut encoded = Vec::new();
    WebPEncoder::new(&mut encoded)
        .encode(&pixels, image.width, image.height, color)
        .map_err(|e| FilterError::bad_input(NAME, format!("encoding failed: {e}")))?;
    let size = to_u32(NAME, encoded.len(), "the encoded image")?;
    let mut own = Vec::with_capacity(8);
    own.extend_from_slice(&1u32.to_le_bytes());
    own.extend_from_slice(&size.to_le_bytes());
    let mut meta = Parts::one(own);
    meta.extend(metadata);
    Ok((meta, Parts::one(encoded)))
}

/// Reverse over one (whole) tile.
pub(crate) fn reverse(
    st: &Stage<'_>,
    opts: Options,
    metadata: &[u8],
    data: &[u8],
    out: &mut Unfiltered,
) -> Result<()> {
    check_datatype(st)?;
    let image = Image::new(opts)?;
    let mut meta = MetaReader::new(NAME, metadata);
    let count = meta.u32("part count")?;
    if count != 1 {
        return Err(FilterError::corrupt(
            NAME,
            format!("{count} parts; TileDB writes and reads one"),
        ));
    }
    let size = meta.u32("part size")? as usize;
    let mut input = data;
    let part = take_data(NAME, &mut input, size, "WebP image")?;
    if !input.is_empty() {
        return Err(FilterError::corrupt(
            NAME,
            format!("{} data bytes beyond the WebP image", input.len()),
        ));
    }
    decode(image, part, &mut out.data)?;
    out.pass_on_metadata(meta.rest());
    Ok(())
}

/// Appends the pixels of `webp`, which must be the `image` the options
/// promise, to `out` in the cells' channel order (libwebp's
/// `WebPDecodeRGB` and kin: alpha dropped or made opaque as needed).
fn decode(image: Image, webp: &[u8], out: &mut Vec<u8>) -> Result<()> {
    // Before the decoder sizes anything from the file.
    check_dimensions(image, webp)?;
    let mut decoder = WebPDecoder::new(Cursor::new(webp)).map_err(decoding)?;
    if decoder.dimensions() != (image.width, image.height) {
        return Err(wrong_size(image, decoder.dimensions()));
    }
    if decoder.is_animated() {
        return Err(FilterError::corrupt(NAME, "an animated WebP is not a tile"));
    }
    let have = if decoder.has_alpha() { 4 } else { 3 };
    let want = image.format.channels();
    let start = out.len();
    if have == want && !image.format.blue_first() {
        out.resize(start.saturating_add(image.len()), 0);
        let decoded = decoder.read_image(crate::buffer::tail(out, start));
        if decoded.is_err() {
            out.truncate(start);
        }
        return decoded.map_err(decoding);
    }
    let size = (image.width as usize)
        .saturating_mul(image.height as usize)
        .saturating_mul(have);
    let mut pixels = vec![0; size];
    decoder.read_image(&mut pixels).map_err(decoding)?;
    out.reserve(image.len());
    for px in pixels.chunks_exact(have) {
        let (r, g, b, a) = match *px {
            [r, g, b, a] => (r, g, b, a),
            [r, g, b] => (r, g, b, u8::MAX),
            _ => continue,
        };
        if image.format.blue_first() {
            out.extend_from_slice(&[b, g, r]);
        } else {
            out.extend_from_slice(&[r, g, b]);
        }
        if want == 4 {
            out.push(a);
        }
    }
    Ok(())
}

/// Checks the size of the canvas and of the first image chunk against the
/// tile's before `image-webp` allocates for either: its lossy decoder sizes
/// its buffers from the VP8 frame header, which an extended (VP8X) file
/// keeps apart from the canvas size it reports.
fn check_dimensions(image: Image, webp: &[u8]) -> Result<()> {
    let expected = (image.width, image.height);
    if webp.get(..4) != Some(b"RIFF") || webp.get(8..12) != Some(b"WEBP") {
        return Err(FilterError::corrupt(NAME, "not a WebP (RIFF) file"));
    }
    let mut chunks = webp.get(12..).unwrap_or_default();
    while let Some((header, rest)) = chunks.split_first_chunk::<8>() {
        let [f0, f1, f2, f3, s0, s1, s2, s3] = *header;
        let fourcc = [f0, f1, f2, f3];
        let size = u32::from_le_bytes([s0, s1, s2, s3]) as usize;
        let body = rest.get(..size).unwrap_or(rest);
        let dims = match (&fourcc, body) {
            (b"VP8X", [_, _, _, _, w0, w1, w2, h0, h1, h2, ..]) => {
                let side = |b0, b1, b2| u32::from_le_bytes([b0, b1, b2, 0]).saturating_add(1);
                Some((side(*w0, *w1, *w2), side(*h0, *h1, *h2)))
            }
            (b"VP8 ", [_, _, _, _, _, _, w0, w1, h0, h1, ..]) => {
                let side = |lo, hi| u32::from(u16::from_le_bytes([lo, hi]) & 0x3fff);
                Some((side(*w0, *w1), side(*h0, *h1)))
            }
            (b"VP8L", [_, b0, b1, b2, b3, ..]) => {
                let bits = u32::from_le_bytes([*b0, *b1, *b2, *b3]);
                let side = |v: u32| (v & 0x3fff).saturating_add(1);
                Some((side(bits), side(bits >> 14)))
            }
            _ => None,
        };
        if let Some(dims) = dims {
            if dims != expected {
                return Err(wrong_size(image, dims));
            }
            if &fourcc != b"VP8X" {
                // The first image chunk is the one decoded.
                return Ok(());
            }
        }
        if body.len() < size {
            break;
        }
        // Chunks are padded to an even size.
        chunks = rest
            .get(size.saturating_add(size & 1)..)
            .unwrap_or_default();
    }
    // No image chunk in reach: the decoder reports what is missing.
    Ok(())
}

fn wrong_size(image: Image, (width, height): (u32, u32)) -> FilterError {
    FilterError::corrupt(
        NAME,
        format!(
            "a {width} x {height} pixel image where the tile extents make {} x {}",
            image.width, image.height
        ),
    )
}

fn decoding(e: image_webp::DecodingError) -> FilterError {
    FilterError::corrupt(NAME, format!("cannot decode the image: {e}"))
}

/// Swaps bytes 0 and 2 of every `channels`-byte pixel (BGR(A) <-> RGB(A)).
fn swap_red_blue(mut pixels: Vec<u8>, channels: usize) -> Vec<u8> {
    for px in pixels.chunks_exact_mut(channels) {
        px.swap(0, 2);
    }
    pixels
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tdb_format::FormatVersion;

    const RGB: u8 = 1;
    const BGR: u8 = 2;
    const RGBA: u8 = 3;
    const BGRA: u8 = 4;

    fn stage() -> Stage<'static> {
        Stage::new(Datatype::UInt8, FormatVersion::WRITTEN)
    }

    fn opts(format: u8, width: u16, height: u16) -> Options {
        let channels = if format < RGBA { 3 } else { 4 };
        Options {
            format,
            lossless: true,
            y_extent: height,
            x_extent: width * channels,
        }
    }

    fn run(o: Options, tile: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
        let (m, d) = forward(&stage(), o, Parts::new(), Parts::one(tile.to_vec()))?;
        assert_eq!((m.count(), d.count()), (1, 1));
        Ok((m.concat(), d.concat()))
    }

    fn back(o: Options, meta: &[u8], data: &[u8]) -> Result<Vec<u8>> {
        let mut out = Unfiltered::default();
        reverse(&stage(), o, meta, data, &mut out)?;
        assert!(out.metadata.is_empty());
        Ok(out.data)
    }

    /// A `webp` file framed as this filter's output.
    fn framed(webp: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut meta = 1u32.to_le_bytes().to_vec();
        meta.extend_from_slice(&(webp.len() as u32).to_le_bytes());
        (meta, webp.to_vec())
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 37 % 251) as u8).collect()
    }

    #[test]
    fn writes_one_lossless_part_framed_like_tiledb() {
        let tile = pattern(8 * 24);
        let (meta, data) = run(opts(RGB, 8, 8), &tile).unwrap();
        assert_eq!(meta[..4], 1u32.to_le_bytes());
        assert_eq!(meta[4..], (data.len() as u32).to_le_bytes());
        assert_eq!(&data[..4], b"RIFF");
        assert_eq!(&data[8..16], b"WEBPVP8L");
        assert_eq!(back(opts(RGB, 8, 8), &meta, &data).unwrap(), tile);
    }

    #[test]
    fn earlier_metadata_follows_as_its_own_parts() {
        let o = opts(RGBA, 3, 2);
        let tile = pattern(24);
        let mut earlier = Parts::one(vec![0xAA]);
        earlier.push(vec![0xBB, 0xCC]);
        let (m, d) = forward(&stage(), o, earlier, Parts::one(tile.clone())).unwrap();
        assert_eq!(m.count(), 3);
        let meta = m.concat();
        assert_eq!(meta[8..], [0xAA, 0xBB, 0xCC]);
        let mut out = Unfiltered::default();
        reverse(&stage(), o, &meta, &d.concat(), &mut out).unwrap();
        assert_eq!(out.data, tile);
        assert_eq!(out.metadata, [0xAA, 0xBB, 0xCC]);
    }

    #[test]
    fn blue_first_formats_are_stored_as_rgb() {
        // One BGR pixel and one BGRA pixel: the image holds them red first.
        for (format, tile, color) in [
            (BGR, vec![1, 2, 3], ColorType::Rgb8),
            (BGRA, vec![1, 2, 3, 4], ColorType::Rgba8),
        ] {
            let (meta, data) = run(opts(format, 1, 1), &tile).unwrap();
            let mut decoder = WebPDecoder::new(Cursor::new(&data)).unwrap();
            let mut px = vec![0; tile.len()];
            decoder.read_image(&mut px).unwrap();
            let mut rgb = tile.clone();
            rgb.swap(0, 2);
            assert_eq!(px, rgb, "{color:?}");
            assert_eq!(back(opts(format, 1, 1), &meta, &data).unwrap(), tile);
        }
    }

    /// What libwebp (the library TileDB links) decodes its own files to,
    /// for every input format; see `tests/data/webp/make.py`.
    macro_rules! libwebp_case {
        ($name:literal) => {
            (
                $name,
                include_bytes!(concat!("../../tests/data/webp/", $name, ".webp")).as_slice(),
                [
                    (
                        RGB,
                        include_bytes!(concat!("../../tests/data/webp/", $name, ".rgb")).as_slice(),
                    ),
                    (
                        BGR,
                        include_bytes!(concat!("../../tests/data/webp/", $name, ".bgr")).as_slice(),
                    ),
                    (
                        RGBA,
                        include_bytes!(concat!("../../tests/data/webp/", $name, ".rgba"))
                            .as_slice(),
                    ),
                    (
                        BGRA,
                        include_bytes!(concat!("../../tests/data/webp/", $name, ".bgra"))
                            .as_slice(),
                    ),
                ],
            )
        };
    }

    #[test]
    fn decodes_libwebp_files_as_libwebp_does() {
        for (name, webp, expected) in [
            libwebp_case!("lossy_rgb"),
            libwebp_case!("lossy_rgba"),
            libwebp_case!("lossless_opaque_rgba"),
        ] {
            let (meta, data) = framed(webp);
            for (format, pixels) in expected {
                let got = back(opts(format, 16, 8), &meta, &data).unwrap();
                assert!(got == pixels, "{name} as format {format}");
            }
        }
    }

    #[test]
    fn lossy_writing_is_unsupported() {
        let o = Options {
            lossless: false,
            ..opts(RGB, 2, 2)
        };
        let err = run(o, &pattern(12)).unwrap_err();
        assert!(matches!(err, FilterError::Unsupported { .. }), "{err}");
        assert!(err.to_string().contains("only lossless"), "{err}");
    }

    #[test]
    fn bad_options_and_input_are_refused() {
        let bad = |o: Options, tile: &[u8]| {
            let err = run(o, tile).unwrap_err();
            assert!(matches!(err, FilterError::BadInput { .. }), "{err}");
        };
        let tile = pattern(12);
        bad(opts(0, 2, 2), &tile);
        bad(opts(5, 2, 2), &tile);
        bad(opts(RGB, 0, 2), &[]);
        bad(opts(RGB, 2, 0), &[]);
        bad(
            Options {
                x_extent: 7,
                ..opts(RGB, 2, 2)
            },
            &pattern(14),
        );
        // Wider than WebP allows: 16384 RGB pixels.
        bad(
            Options {
                x_extent: 3 * 16384,
                ..opts(RGB, 1, 1)
            },
            &pattern(3 * 16384),
        );
        // Not the y_extent x x_extent image: short, long, empty.
        bad(opts(RGB, 2, 2), &tile[..9]);
        bad(opts(RGB, 2, 2), &pattern(15));
        bad(opts(RGB, 2, 2), &[]);
        // Two parts.
        let mut parts = Parts::one(tile.clone());
        parts.push(tile.clone());
        let err = forward(&stage(), opts(RGB, 2, 2), Parts::new(), parts).unwrap_err();
        assert!(matches!(err, FilterError::BadInput { .. }), "{err}");
        // Not uint8.
        let st = Stage::new(Datatype::Int8, FormatVersion::WRITTEN);
        let err = forward(&st, opts(RGB, 2, 2), Parts::new(), Parts::one(tile)).unwrap_err();
        assert!(matches!(err, FilterError::BadInput { .. }), "{err}");
        let mut out = Unfiltered::default();
        let (meta, data) = run(opts(RGB, 2, 2), &pattern(12)).unwrap();
        let err = reverse(&st, opts(RGB, 2, 2), &meta, &data, &mut out).unwrap_err();
        assert!(matches!(err, FilterError::BadInput { .. }), "{err}");
    }

    #[test]
    fn truncated_or_extended_input_is_corrupt() {
        let o = opts(RGBA, 5, 3);
        let (meta, data) = run(o, &pattern(60)).unwrap();
        for n in 0..meta.len() {
            let err = back(o, &meta[..n], &data).unwrap_err();
            assert!(matches!(err, FilterError::Corrupt { .. }), "{err}");
        }
        for n in 0..data.len() {
            assert!(back(o, &meta, &data[..n]).is_err(), "{n}");
            // Also with the size in the metadata agreeing.
            let (meta, data) = framed(&data[..n]);
            let err = back(o, &meta, &data).unwrap_err();
            assert!(matches!(err, FilterError::Corrupt { .. }), "{n}: {err}");
        }
        let mut longer = data.clone();
        longer.push(0);
        assert!(back(o, &meta, &longer).is_err());
        for count in [0u32, 2, u32::MAX] {
            let mut lying = meta.clone();
            lying[..4].copy_from_slice(&count.to_le_bytes());
            assert!(back(o, &lying, &data).is_err(), "{count}");
        }
    }

    #[test]
    fn altered_bytes_never_panic() {
        for (format, channels) in [(RGB, 3), (RGBA, 4)] {
            let o = opts(format, 6, 5);
            let (meta, data) = run(o, &pattern(30 * channels)).unwrap();
            for at in 0..data.len() {
                for flip in [0x01, 0x10, 0x80, 0xFF] {
                    let mut bad = data.clone();
                    bad[at] ^= flip;
                    if let Ok(pixels) = back(o, &meta, &bad) {
                        assert_eq!(pixels.len(), 30 * channels);
                    }
                }
            }
        }
        let webp = include_bytes!("../../tests/data/webp/lossy_rgba.webp");
        let o = opts(RGBA, 16, 8);
        for at in 0..webp.len() {
            for flip in [0x01, 0x80, 0xFF] {
                let mut bad = webp.to_vec();
                bad[at] ^= flip;
                let (meta, data) = framed(&bad);
                if let Ok(pixels) = back(o, &meta, &data) {
                    assert_eq!(pixels.len(), 16 * 8 * 4);
                }
            }
        }
    }

    #[test]
    fn image_sizes_must_be_the_tile_extents() {
        // A valid 16 x 8 image where the options make another size.
        let webp = include_bytes!("../../tests/data/webp/lossless_opaque_rgba.webp");
        let (meta, data) = framed(webp);
        for o in [opts(RGBA, 8, 8), opts(RGBA, 16, 16), opts(RGB, 16, 4)] {
            let err = back(o, &meta, &data).unwrap_err();
            assert!(err.to_string().contains("16 x 8 pixel image"), "{err}");
        }
        // A lossless header claiming 16384 x 16384 pixels is refused before
        // anything is sized from it.
        let mut lying = webp.to_vec();
        lying[21..25].copy_from_slice(&(u32::MAX >> 4).to_le_bytes());
        let (meta, data) = framed(&lying);
        let err = back(opts(RGBA, 16, 8), &meta, &data).unwrap_err();
        assert!(err.to_string().contains("16384 x 16384"), "{err}");
        // An extended file whose canvas is right but whose lossy frame
        // header is not.
        let webp = include_bytes!("../../tests/data/webp/lossy_rgba.webp");
        let vp8 = webp.windows(4).position(|w| w == b"VP8 ").unwrap();
        let mut lying = webp.to_vec();
        lying[vp8 + 14..vp8 + 18].copy_from_slice(&[0xff, 0x3f, 0xff, 0x3f]);
        let (meta, data) = framed(&lying);
        let err = back(opts(RGBA, 16, 8), &meta, &data).unwrap_err();
        assert!(err.to_string().contains("16383 x 16383"), "{err}");
        // Not a RIFF file at all.
        let (meta, data) = framed(b"GIF89a and more bytes");
        let err = back(opts(RGBA, 16, 8), &meta, &data).unwrap_err();
        assert!(matches!(err, FilterError::Corrupt { .. }), "{err}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn every_format_round_trips_losslessly(
            format in 1u8..=4,
            width in 1u16..24,
            height in 1u16..12,
            seed in any::<u64>(),
            smooth in any::<bool>(),
        ) {
            let o = opts(format, width, height);
            let len = usize::from(o.x_extent) * usize::from(height);
            // Noise, or a gradient the encoder's transforms can predict.
            let mut state = seed | 1;
            let tile: Vec<u8> = (0..len)
                .map(|i| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    if smooth { (i / 3) as u8 } else { state as u8 }
                })
                .collect();
            let (meta, data) = run(o, &tile).unwrap();
            prop_assert_eq!(back(o, &meta, &data).unwrap(), tile);
        }
    }
}
