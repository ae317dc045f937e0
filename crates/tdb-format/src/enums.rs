//! Every enum code of the format other than datatypes, with TileDB 2.30's
//! codes and names (from `tiledb/api/c_api/*_api_enum.h`).

use crate::code_enum::code_enum;

code_enum! {
    /// Dense or sparse.
    pub enum ArrayType: "array type" {
        /// Every cell of the domain exists; fragments cover hyper-rectangles.
        Dense = 0 => "dense",
        /// Only written cells exist; coordinates are stored.
        Sparse = 1 => "sparse",
    }
}

code_enum! {
    /// Cell and tile orders, and query layouts.
    pub enum Layout: "layout" {
        /// Row-major (C order).
        RowMajor = 0 => "row-major",
        /// Column-major (Fortran order).
        ColMajor = 1 => "col-major",
        /// The array's global order (tile order, then cell order within tiles).
        GlobalOrder = 2 => "global-order",
        /// No order (sparse writes and reads).
        Unordered = 3 => "unordered",
        /// Hilbert curve order (sparse cell order only).
        Hilbert = 4 => "hilbert",
    }
}

code_enum! {
    /// Filter types of a serialized filter pipeline.
    pub enum FilterType: "filter type" {
        /// No-op filter.
        None = 0 => "NONE",
        /// Gzip (deflate) compression.
        Gzip = 1 => "GZIP",
        /// Zstandard compression.
        Zstd = 2 => "ZSTD",
        /// LZ4 compression.
        Lz4 = 3 => "LZ4",
        /// TileDB's run-length encoding.
        Rle = 4 => "RLE",
        /// Bzip2 compression.
        Bzip2 = 5 => "BZIP2",
        /// Double-delta encoding.
        DoubleDelta = 6 => "DOUBLE_DELTA",
        /// Bit-width reduction.
        BitWidthReduction = 7 => "BIT_WIDTH_REDUCTION",
        /// Bit shuffling (bitshuffle library).
        Bitshuffle = 8 => "BITSHUFFLE",
        /// Byte shuffling (Blosc semantics).
        Byteshuffle = 9 => "BYTESHUFFLE",
        /// Positive-delta encoding.
        PositiveDelta = 10 => "POSITIVE_DELTA",
        /// The internal AES-256-GCM encryption filter (never in a schema).
        InternalAes256Gcm = 11 => "INTERNAL_FILTER_AES_256_GCM",
        /// MD5 checksum.
        ChecksumMd5 = 12 => "CHECKSUM_MD5",
        /// SHA-256 checksum.
        ChecksumSha256 = 13 => "CHECKSUM_SHA256",
        /// Dictionary encoding of var-length strings.
        Dictionary = 14 => "DICTIONARY" | "DICTIONARY_ENCODING",
        /// Float scaling to integers.
        ScaleFloat = 15 => "SCALE_FLOAT",
        /// XOR with the previous value.
        Xor = 16 => "XOR",
        /// Retired code (was BITSORT); never written by released TileDB.
        Deprecated = 17 => "DEPRECATED",
        /// WebP image compression.
        Webp = 18 => "WEBP",
        /// Delta encoding.
        Delta = 19 => "DELTA",
    }
}

impl FilterType {
    /// The compressor byte TileDB stores in a compression filter's options
    /// (`None` for filters that are not compressors).
    pub const fn compressor(self) -> Option<Compressor> {
        Some(match self {
            FilterType::Gzip => Compressor::Gzip,
            FilterType::Zstd => Compressor::Zstd,
            FilterType::Lz4 => Compressor::Lz4,
            FilterType::Rle => Compressor::Rle,
            FilterType::Bzip2 => Compressor::Bzip2,
            FilterType::Dictionary => Compressor::DictionaryEncoding,
            FilterType::DoubleDelta => Compressor::DoubleDelta,
            FilterType::Delta => Compressor::Delta,
            _ => return None,
        })
    }
}

code_enum! {
    /// Filter option codes, as the C API names them.
    pub enum FilterOption: "filter option" {
        /// Compression level of a compressor.
        CompressionLevel = 0 => "COMPRESSION_LEVEL",
        /// Window of bit-width reduction.
        BitWidthMaxWindow = 1 => "BIT_WIDTH_MAX_WINDOW",
        /// Window of positive delta.
        PositiveDeltaMaxWindow = 2 => "POSITIVE_DELTA_MAX_WINDOW",
        /// Byte width of scaled floats.
        ScaleFloatBytewidth = 3 => "SCALE_FLOAT_BYTEWIDTH",
        /// Factor of scaled floats.
        ScaleFloatFactor = 4 => "SCALE_FLOAT_FACTOR",
        /// Offset of scaled floats.
        ScaleFloatOffset = 5 => "SCALE_FLOAT_OFFSET",
        /// WebP quality.
        WebpQuality = 6 => "WEBP_QUALITY",
        /// WebP input format.
        WebpInputFormat = 7 => "WEBP_INPUT_FORMAT",
        /// WebP lossless flag.
        WebpLossless = 8 => "WEBP_LOSSLESS",
        /// Datatype a delta or double-delta filter reinterprets its input as.
        CompressionReinterpretDatatype = 9 => "COMPRESSION_REINTERPRET_DATATYPE",
    }
}

code_enum! {
    /// Compressors, as stored by format versions before filter pipelines
    /// (v1 schemas) and inside compression filters.
    pub enum Compressor: "compressor" {
        /// No compression.
        NoCompression = 0 => "NO_COMPRESSION",
        /// Gzip.
        Gzip = 1 => "GZIP",
        /// Zstandard.
        Zstd = 2 => "ZSTD",
        /// LZ4.
        Lz4 = 3 => "LZ4",
        /// Run-length encoding.
        Rle = 4 => "RLE",
        /// Bzip2.
        Bzip2 = 5 => "BZIP2",
        /// Double delta.
        DoubleDelta = 6 => "DOUBLE_DELTA",
        /// Dictionary encoding.
        DictionaryEncoding = 7 => "DICTIONARY_ENCODING",
        /// Delta.
        Delta = 8 => "DELTA",
    }
}

code_enum! {
    /// Encryption of generic tiles and data tiles.
    pub enum EncryptionType: "encryption type" {
        /// Plain bytes.
        NoEncryption = 0 => "NO_ENCRYPTION",
        /// AES-256-GCM with a 32-byte user key.
        Aes256Gcm = 1 => "AES_256_GCM",
    }
}

code_enum! {
    /// Declared order of an attribute's data (format v17+).
    pub enum DataOrder: "data order" {
        /// No order.
        Unordered = 0 => "unordered",
        /// Values increase cell by cell.
        Increasing = 1 => "increasing",
        /// Values decrease cell by cell.
        Decreasing = 2 => "decreasing",
    }
}

code_enum! {
    /// Comparison operators of query conditions, delete and update commits.
    pub enum QueryConditionOp: "query condition op" {
        /// `<`
        Lt = 0 => "LT",
        /// `<=`
        Le = 1 => "LE",
        /// `>`
        Gt = 2 => "GT",
        /// `>=`
        Ge = 3 => "GE",
        /// `==`
        Eq = 4 => "EQ",
        /// `!=`
        Ne = 5 => "NE",
        /// Set membership.
        In = 6 => "IN",
        /// Set non-membership.
        NotIn = 7 => "NOT_IN",
        /// Always true (internal).
        AlwaysTrue = 253 => "ALWAYS_TRUE",
        /// Always false (internal).
        AlwaysFalse = 254 => "ALWAYS_FALSE",
    }
}

code_enum! {
    /// How query-condition nodes combine.
    pub enum QueryConditionCombinationOp: "query condition combination op" {
        /// Conjunction.
        And = 0 => "AND",
        /// Disjunction.
        Or = 1 => "OR",
        /// Negation.
        Not = 2 => "NOT",
    }
}

code_enum! {
    /// Kinds of current domain (format v22+).
    pub enum CurrentDomainType: "current domain type" {
        /// An N-dimensional rectangle.
        NdRectangle = 0 => "NDRECTANGLE",
    }
}

code_enum! {
    /// Kinds of objects a group member may be.
    pub enum ObjectType: "object type" {
        /// Not a TileDB object.
        Invalid = 0 => "INVALID",
        /// A group.
        Group = 1 => "GROUP",
        /// An array.
        Array = 2 => "ARRAY",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_round_trip() {
        for &f in FilterType::ALL {
            assert_eq!(FilterType::from_code(f.code()), Ok(f));
            assert_eq!(FilterType::from_name(f.name()), Ok(f));
        }
        for &l in Layout::ALL {
            assert_eq!(Layout::from_code(l.code()), Ok(l));
            assert_eq!(Layout::from_name(l.name()), Ok(l));
        }
        assert_eq!(
            FilterType::from_name("DICTIONARY_ENCODING"),
            Ok(FilterType::Dictionary)
        );
    }

    /// Every compressor but "none" belongs to exactly one filter type, and
    /// by TileDB's name for it.
    #[test]
    fn compression_filters_name_their_compressor() {
        let pairs: Vec<_> = FilterType::ALL
            .iter()
            .filter_map(|&f| f.compressor().map(|c| (f, c)))
            .collect();
        assert_eq!(pairs.len(), Compressor::ALL.len() - 1);
        for (f, c) in pairs {
            assert_eq!(FilterType::from_name(c.name()), Ok(f), "{c}");
        }
    }

    #[test]
    fn tiledb_codes_are_pinned() {
        assert_eq!(FilterType::Delta.code(), 19);
        assert_eq!(FilterType::InternalAes256Gcm.code(), 11);
        assert_eq!(FilterType::Webp.code(), 18);
        assert_eq!(Layout::Hilbert.code(), 4);
        assert_eq!(QueryConditionOp::AlwaysFalse.code(), 254);
        assert_eq!(FilterOption::CompressionReinterpretDatatype.code(), 9);
        assert_eq!(Compressor::Delta.code(), 8);
    }

    #[test]
    fn unknown_codes_are_errors() {
        assert!(FilterType::from_code(20).is_err());
        assert!(ArrayType::from_code(2).is_err());
        assert!(QueryConditionOp::from_code(8).is_err());
        assert!(Layout::from_name("diagonal").is_err());
    }
}
