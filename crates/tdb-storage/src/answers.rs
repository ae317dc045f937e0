//! The answers to one batch of range requests, matched by range: what a
//! state machine that asked for a batch (a reader, an open) collects, so
//! that its driver may answer in any order and in several pushes (an async
//! driver pushes each answer as it lands).

use crate::{RangeRead, RangeRequest};
use std::collections::HashMap;

/// An answer to a range that was not asked for, or that has its answer
/// already: a driver's mistake.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an answer to bytes {} of {}, which was not asked for (or has its answer already)", .0.range, .0.key)]
pub struct Unasked(pub RangeRequest);

/// A batch's requests and the answers in so far.
#[derive(Debug)]
pub struct Answers {
    requests: Vec<RangeRequest>,
    /// Per request, its answer once in (`Some(None)`: the file is missing).
    got: Vec<Option<Option<RangeRead>>>,
    /// Where each range is among the requests (a range asked twice has
    /// two places, answered in turn).
    index: HashMap<RangeRequest, Vec<usize>>,
    missing: usize,
    /// Whether the requests went out ([`Answers::ask`]).
    asked: bool,
}

impl Answers {
    /// Waits for answers to `requests`.
    pub fn new(requests: Vec<RangeRequest>) -> Self {
        let mut index: HashMap<RangeRequest, Vec<usize>> = HashMap::new();
        for (i, r) in requests.iter().enumerate().rev() {
            index.entry(r.clone()).or_default().push(i);
        }
        Answers {
            got: requests.iter().map(|_| None).collect(),
            missing: requests.len(),
            requests,
            index,
            asked: false,
        }
    }

    /// The requests, the first time only.
    pub fn ask(&mut self) -> Option<Vec<RangeRequest>> {
        (!std::mem::replace(&mut self.asked, true)).then(|| self.requests.clone())
    }

    /// Takes the answer to `request` (`None`: the file is missing).
    pub fn take(&mut self, request: &RangeRequest, read: Option<RangeRead>) -> Result<(), Unasked> {
        let Some(i) = self.index.get_mut(request).and_then(Vec::pop) else {
            return Err(Unasked(request.clone()));
        };
        self.got[i] = Some(read);
        self.missing -= 1;
        Ok(())
    }

    /// Whether every request has its answer.
    pub fn complete(&self) -> bool {
        self.missing == 0
    }

    /// How many requests wait for their answer.
    pub fn missing(&self) -> usize {
        self.missing
    }

    /// Every answer, in the requests' order.
    pub fn into_reads(self) -> Vec<Option<RangeRead>> {
        self.got.into_iter().map(Option::flatten).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ByteRange;
    use bytes::Bytes;

    fn read(b: &'static [u8]) -> Option<RangeRead> {
        Some(RangeRead {
            bytes: Bytes::from_static(b),
            file_size: 100,
            arranged: false,
        })
    }

    #[test]
    fn answers_in_any_order_come_out_in_the_requests_order() {
        let r = |k: &str, o| RangeRequest::new(k, ByteRange::new(o, 2));
        let mut a = Answers::new(vec![r("f", 0), r("g", 4), r("f", 0)]);
        assert_eq!(a.ask().map(|v| v.len()), Some(3));
        assert_eq!(a.ask(), None);
        a.take(&r("g", 4), read(b"gg")).unwrap();
        a.take(&r("f", 0), read(b"f1")).unwrap();
        assert!(!a.complete());
        assert_eq!(a.missing(), 1);
        a.take(&r("f", 0), None).unwrap();
        // A third answer to a range asked twice, and one never asked.
        assert!(a.take(&r("f", 0), None).is_err());
        assert!(a.take(&r("h", 0), None).is_err());
        assert!(a.complete());
        let reads = a.into_reads();
        let got: Vec<Option<&[u8]>> = reads
            .iter()
            .map(|r| r.as_ref().map(|r| &r.bytes[..]))
            .collect();
        assert_eq!(got, [Some(&b"f1"[..]), Some(b"gg"), None]);
    }
}
