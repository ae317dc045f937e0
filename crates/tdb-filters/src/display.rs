//! Human-readable filters, for schema dumps: TileDB's filter names with the
//! options that matter, e.g. `ZSTD(level=-1)`, `DELTA(reinterpret=INT64)`.

use crate::{Filter, FilterPipeline};
use std::fmt;

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.filter_type().name();
        match *self {
            Filter::Gzip { level }
            | Filter::Zstd { level }
            | Filter::Lz4 { level }
            | Filter::Rle { level }
            | Filter::Bzip2 { level }
            | Filter::Dictionary { level } => write!(f, "{name}(level={level})"),
            Filter::Delta { level, .. } | Filter::DoubleDelta { level, .. } => {
                match self.reinterpret() {
                    Some(t) => write!(f, "{name}(level={level}, reinterpret={})", t.name()),
                    None => write!(f, "{name}(level={level})"),
                }
            }
            Filter::BitWidthReduction { max_window } | Filter::PositiveDelta { max_window } => {
                write!(f, "{name}(window={max_window})")
            }
            Filter::ScaleFloat { scale, offset, byte_width } => {
                write!(f, "{name}(scale={scale:?}, offset={offset:?}, bytes={byte_width})")
            }
            Filter::Webp { quality, format, lossless, y_extent, x_extent, .. } => write!(
                f,
                "{name}(quality={quality:?}, format={format}, lossless={lossless}, extents={y_extent}x{x_extent})"
            ),
            _ => f.write_str(name),
        }
    }
}

impl fmt::Display for FilterPipeline {
    /// The filters joined by ` > `, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.filters.is_empty() {
            return f.write_str("none");
        }
        for (i, filter) in self.filters.iter().enumerate() {
            if i > 0 {
                f.write_str(" > ")?;
            }
            write!(f, "{filter}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_format::Datatype;

    #[test]
    fn names_and_options() {
        let p = FilterPipeline {
            max_chunk_size: 65536,
            filters: vec![
                Filter::Delta {
                    level: -1,
                    reinterpret: Some(Datatype::Int64),
                },
                Filter::Zstd { level: 3 },
                Filter::ChecksumMd5,
            ],
        };
        assert_eq!(
            p.to_string(),
            "DELTA(level=-1, reinterpret=INT64) > ZSTD(level=3) > CHECKSUM_MD5"
        );
        assert_eq!(
            FilterPipeline {
                max_chunk_size: 0,
                filters: vec![]
            }
            .to_string(),
            "none"
        );
    }
}
