//! Query conditions built in Rust. A [`Cond`] renders to TileDB-Py's
//! syntax, which [`super::parse()`] turns into the same tree as the text a
//! user would write: one grammar, one tree, whichever way a condition is
//! made.
//!
//! ```
//! use tdb_query::condition::field;
//! let c = field("a").gt(5).and(field("s").eq("x").or(field("n").is_null()));
//! assert_eq!(c.text(), "(attr('a') > 5) and ((attr('s') == 'x') or (attr('n') == None))");
//! ```

use std::fmt;

/// A literal compared with a field.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// Integers, datetimes and times (raw counts).
    Int(i128),
    /// Floats.
    Float(f64),
    /// Strings (and bytes as text).
    Str(String),
}

macro_rules! int_literal {
    ($($t:ty),*) => {$(
        impl From<$t> for Literal {
            fn from(v: $t) -> Self {
                Literal::Int(i128::from(v))
            }
        }
    )*};
}
int_literal!(i8, i16, i32, i64, u8, u16, u32, u64);

impl From<f32> for Literal {
    fn from(v: f32) -> Self {
        Literal::Float(f64::from(v))
    }
}

impl From<f64> for Literal {
    fn from(v: f64) -> Self {
        Literal::Float(v)
    }
}

impl From<&str> for Literal {
    fn from(v: &str) -> Self {
        Literal::Str(v.to_owned())
    }
}

impl From<String> for Literal {
    fn from(v: String) -> Self {
        Literal::Str(v)
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Int(i) => write!(f, "{i}"),
            // `{:?}` keeps a float a float (`1.0`, not `1`) and shortest.
            Literal::Float(x) if x.is_finite() => write!(f, "{x:?}"),
            // What Python reads as infinities; NaN has no literal (the
            // parser refuses it: no comparison with NaN holds anyway).
            Literal::Float(x) if x.is_nan() => f.write_str("nan"),
            Literal::Float(x) if *x > 0.0 => f.write_str("1e999"),
            Literal::Float(_) => f.write_str("-1e999"),
            Literal::Str(s) => f.write_str(&quote(s)),
        }
    }
}

/// `s` as a Python string literal.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len().saturating_add(2));
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A condition: comparisons of fields with literals, combined.
#[derive(Debug, Clone, PartialEq)]
pub struct Cond {
    text: String,
}

/// A field (attribute or dimension) to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    name: String,
}

/// The field `name`, whatever characters its name holds.
pub fn field(name: &str) -> Field {
    Field {
        name: name.to_owned(),
    }
}

impl Field {
    fn compare(&self, op: &str, v: impl Into<Literal>) -> Cond {
        Cond {
            text: format!("attr({}) {op} {}", quote(&self.name), v.into()),
        }
    }

    /// `field == v`.
    pub fn eq(&self, v: impl Into<Literal>) -> Cond {
        self.compare("==", v)
    }

    /// `field != v`.
    pub fn ne(&self, v: impl Into<Literal>) -> Cond {
        self.compare("!=", v)
    }

    /// `field < v`.
    pub fn lt(&self, v: impl Into<Literal>) -> Cond {
        self.compare("<", v)
    }

    /// `field <= v`.
    pub fn le(&self, v: impl Into<Literal>) -> Cond {
        self.compare("<=", v)
    }

    /// `field > v`.
    pub fn gt(&self, v: impl Into<Literal>) -> Cond {
        self.compare(">", v)
    }

    /// `field >= v`.
    pub fn ge(&self, v: impl Into<Literal>) -> Cond {
        self.compare(">=", v)
    }

    /// The field is null (nullable attributes).
    pub fn is_null(&self) -> Cond {
        Cond {
            text: format!("attr({}) == None", quote(&self.name)),
        }
    }

    /// The field is not null.
    pub fn is_not_null(&self) -> Cond {
        Cond {
            text: format!("attr({}) != None", quote(&self.name)),
        }
    }

    /// The field is one of `values`.
    pub fn is_in<V: Into<Literal>>(&self, values: impl IntoIterator<Item = V>) -> Cond {
        self.set("in", values)
    }

    /// The field is none of `values`.
    pub fn not_in<V: Into<Literal>>(&self, values: impl IntoIterator<Item = V>) -> Cond {
        self.set("not in", values)
    }

    fn set<V: Into<Literal>>(&self, op: &str, values: impl IntoIterator<Item = V>) -> Cond {
        let list: Vec<String> = values.into_iter().map(|v| v.into().to_string()).collect();
        Cond {
            text: format!("attr({}) {op} [{}]", quote(&self.name), list.join(", ")),
        }
    }
}

impl Cond {
    /// Both hold.
    pub fn and(self, other: Cond) -> Cond {
        Cond {
            text: format!("({}) and ({})", self.text, other.text),
        }
    }

    /// Either holds.
    pub fn or(self, other: Cond) -> Cond {
        Cond {
            text: format!("({}) or ({})", self.text, other.text),
        }
    }

    /// It does not hold (TileDB negates the tree; nulls never match a
    /// comparison either way).
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Cond {
        Cond {
            text: format!("not ({})", self.text),
        }
    }

    /// The condition in TileDB-Py's syntax.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Cond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl From<Cond> for String {
    fn from(c: Cond) -> String {
        c.text
    }
}
