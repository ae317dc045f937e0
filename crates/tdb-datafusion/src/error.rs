//! How tdb's errors reach DataFusion.

use datafusion::error::DataFusionError;
use std::fmt;

/// An error with its causes in its message. DataFusion shows an external
/// error's message alone, and Ballista ships errors between processes as
/// text: "query failed" would reach the user without why. The error itself
/// stays reachable by downcasting [`Reported::inner`].
#[derive(Debug)]
pub struct Reported(Box<dyn std::error::Error + Send + Sync>);

impl Reported {
    /// The error reported.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Display for Reported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}

/// The causes are in the message already.
impl std::error::Error for Reported {}

/// `e` as a DataFusion error whose message names its causes.
pub fn external(e: impl std::error::Error + Send + Sync + 'static) -> DataFusionError {
    DataFusionError::External(Box::new(Reported(Box::new(e))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("query failed")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn the_message_names_every_cause() {
        let e = external(Outer(std::io::Error::other("no box")));
        assert_eq!(e.to_string(), "External error: query failed: no box");
        let DataFusionError::External(b) = e else {
            unreachable!()
        };
        let reported = b.downcast_ref::<Reported>().unwrap();
        assert!(reported.inner().downcast_ref::<Outer>().is_some());
    }
}
