//! A macro for the format's many `u8`-coded enums, so each is declared once as a
//! table of (variant, code, TileDB name) and gets the same conversions.

/// Declares a `#[repr(u8)]` enum with `code`, `from_code`, `name`, `from_name`,
/// `ALL` and `Display`, from one table. Names are TileDB's own spellings.
macro_rules! code_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : $kind:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $code:literal => $text:literal $(| $alias:literal)* ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant = $code ),+
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [$name] = &[ $( $name::$variant ),+ ];

            /// The code stored on disk.
            pub const fn code(self) -> u8 {
                self as u8
            }

            /// Decodes an on-disk code.
            pub fn from_code(code: u8) -> $crate::Result<Self> {
                match code {
                    $( $code => Ok($name::$variant), )+
                    _ => Err($crate::FormatError::UnknownCode { kind: $kind, code: u64::from(code) }),
                }
            }

            /// TileDB's name for the value.
            pub const fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $text ),+
                }
            }

            /// Parses TileDB's name (or a known alias) for the value.
            pub fn from_name(name: &str) -> $crate::Result<Self> {
                match name {
                    $( $text $(| $alias)* => Ok($name::$variant), )+
                    _ => Err($crate::FormatError::UnknownName { kind: $kind, name: name.to_owned() }),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::std::convert::TryFrom<u8> for $name {
            type Error = $crate::FormatError;
            fn try_from(code: u8) -> $crate::Result<Self> {
                Self::from_code(code)
            }
        }
    };
}

pub(crate) use code_enum;
