//! Key validation shared by every backend.

use crate::{Result, StorageError};

/// Checks that a key is relative, `/`-separated, without `.`/`..` or empty
/// parts (a trailing `/` is allowed), so no backend can be led outside its
/// root. Returns the key without a trailing `/`.
pub fn check_path(path: &str) -> Result<&str> {
    let p = path.strip_suffix('/').unwrap_or(path);
    if p.is_empty() {
        return Ok("");
    }
    let invalid = |reason| StorageError::InvalidPath {
        path: path.to_owned(),
        reason,
    };
    if p.starts_with('/') {
        return Err(invalid("absolute"));
    }
    if p.contains('\\') || p.contains('\0') {
        return Err(invalid("contains a backslash or NUL"));
    }
    for part in p.split('/') {
        match part {
            "" => return Err(invalid("empty component")),
            "." | ".." => return Err(invalid("dot component")),
            _ => {}
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(check_path("a/b/").unwrap(), "a/b");
        assert_eq!(check_path("").unwrap(), "");
        for bad in ["/a", "a//b", "../a", "a/./b", "a\\b"] {
            assert!(check_path(bad).is_err(), "{bad}");
        }
    }
}
