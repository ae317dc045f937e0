//! The current domain (v22): the part of the domain in use, which schema
//! evolution can grow. Versioned on its own (version 0 today); empty or an
//! N-dimensional rectangle with one range per dimension.

use crate::domain::Domain;
use crate::nd_range::Range;
use crate::read::{fail, lift, SResult};
use crate::{Result, SchemaError};
use tdb_format::le;
use tdb_format::CurrentDomainType;

/// TileDB's `constants::current_domain_version`, also what older schemas get.
pub const CURRENT_DOMAIN_VERSION: u32 = 0;

/// The current domain of a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CurrentDomain {
    /// Its own format version.
    pub version: u32,
    /// One range per dimension, or `None` when empty.
    pub ranges: Option<Vec<Range>>,
}

impl Default for CurrentDomain {
    fn default() -> Self {
        CurrentDomain {
            version: CURRENT_DOMAIN_VERSION,
            ranges: None,
        }
    }
}

impl CurrentDomain {
    /// Parses a current domain; the rectangle's layout depends on `domain`.
    pub(crate) fn parse<'a>(input: &'a [u8], domain: &Domain) -> SResult<'a, Self> {
        let field = |what: &str| format!("current domain {what}");
        let (input, version) = lift(le::u32("version")(input), || field("version"))?;
        if version > CURRENT_DOMAIN_VERSION {
            return fail(SchemaError::invalid(
                field("version"),
                format!("{version} is newer than {CURRENT_DOMAIN_VERSION}"),
            ));
        }
        let (mut input, empty) = lift(le::bool("empty")(input), || field("empty"))?;
        if empty {
            return Ok((
                input,
                CurrentDomain {
                    version,
                    ranges: None,
                },
            ));
        }
        let code;
        (input, code) = lift(le::u8("type")(input), || field("type"))?;
        CurrentDomainType::from_code(code)
            .map_err(|e| crate::read::format_error(field("type"), e))?;
        let (input, ranges) = domain.nd_range(input, "current domain")?;
        Ok((
            input,
            CurrentDomain {
                version,
                ranges: Some(ranges),
            },
        ))
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) -> Result<()> {
        le::put_u32(out, self.version);
        le::put_bool(out, self.ranges.is_none());
        if let Some(ranges) = &self.ranges {
            le::put_u8(out, CurrentDomainType::NdRectangle.code());
            Domain::write_nd_range(ranges, out);
        }
        Ok(())
    }
}
