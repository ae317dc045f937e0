//! What tdb's codecs put in a plan, as protobuf messages (prost): a
//! table is its URI and pinned options, a scan that and its
//! [`ScanPlan`], a sink its table. Each codec's bytes start with a tag no
//! protobuf message starts with, so they are told from Ballista's own.

use crate::Error;
use prost::Message;
use std::collections::HashMap;
use tdb::{Range, Subarray};
use tdb_datafusion::{ScanPlan, TableOptions, TileDbScan, TileDbTable};

/// The first bytes of tdb's encodings. A protobuf key's low three bits are
/// its wire type, and 7 is none: Ballista's messages never start so.
pub(crate) const TAG: &[u8] = b"\x07tdb1";

/// A table: the array's URI and the options that open it as the client
/// reads it (at the window it shows, or as given where it follows the
/// array; key and storage settings included).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct TableMsg {
    #[prost(string, tag = "1")]
    pub uri: String,
    #[prost(map = "string, string", tag = "2")]
    pub options: HashMap<String, String>,
}

/// One range of a dimension: its bounds' bytes.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct RangeMsg {
    #[prost(bytes = "vec", tag = "1")]
    pub lo: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub hi: Vec<u8>,
}

/// A dimension's ranges (none: the whole domain).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct DimMsg {
    #[prost(message, repeated, tag = "1")]
    pub ranges: Vec<RangeMsg>,
}

/// A partition's subarray, a dimension after another.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct PartMsg {
    #[prost(message, repeated, tag = "1")]
    pub dims: Vec<DimMsg>,
}

/// A scan: its table and what it reads.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ScanMsg {
    #[prost(message, optional, tag = "1")]
    pub table: Option<TableMsg>,
    #[prost(string, repeated, tag = "2")]
    pub fields: Vec<String>,
    #[prost(message, repeated, tag = "3")]
    pub parts: Vec<PartMsg>,
    #[prost(string, optional, tag = "4")]
    pub condition: Option<String>,
    #[prost(uint64, optional, tag = "5")]
    pub limit: Option<u64>,
    #[prost(string, tag = "6")]
    pub subarray_text: String,
}

/// An insert's writes: the table and the fragments' timestamp.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct InsertMsg {
    #[prost(message, optional, tag = "1")]
    pub table: Option<TableMsg>,
    #[prost(uint64, tag = "2")]
    pub timestamp: u64,
}

/// A node of a physical plan tdb encodes: one of these is set.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct NodeMsg {
    #[prost(message, optional, tag = "1")]
    pub scan: Option<ScanMsg>,
    #[prost(message, optional, tag = "2")]
    pub insert: Option<InsertMsg>,
    /// An insert's commit and total: its table.
    #[prost(message, optional, tag = "3")]
    pub total: Option<TableMsg>,
}

/// `msg` after [`TAG`].
pub(crate) fn encode(msg: &impl Message, buf: &mut Vec<u8>) {
    buf.extend_from_slice(TAG);
    msg.encode(buf)
        .expect("a Vec grows to whatever a message needs");
}

/// The message of bytes [`encode`] wrote; `None` when they are not tdb's.
pub(crate) fn decode<M: Message + Default>(buf: &[u8]) -> Option<Result<M, Error>> {
    let body = buf.strip_prefix(TAG)?;
    Some(M::decode(body).map_err(|e| Error::Decode(e.to_string())))
}

impl TableMsg {
    pub fn of(table: &TileDbTable) -> Self {
        Self::new(table.uri(), table.options())
    }

    fn new(uri: &str, options: &TableOptions) -> Self {
        TableMsg {
            uri: uri.to_owned(),
            options: options.to_map(),
        }
    }

    pub fn options(&self) -> Result<TableOptions, Error> {
        TableOptions::from_map(&self.options).map_err(|e| Error::Decode(e.to_string()))
    }
}

impl ScanMsg {
    pub fn of(scan: &TileDbScan) -> Self {
        let plan = scan.plan();
        let dims = scan.parts().first().map_or(0, Subarray::dim_num);
        ScanMsg {
            table: Some(TableMsg::new(scan.uri(), scan.table_options())),
            fields: plan.fields,
            parts: plan
                .parts
                .iter()
                .map(|p| PartMsg {
                    dims: (0..dims)
                        .map(|d| DimMsg {
                            ranges: p
                                .ranges(d)
                                .iter()
                                .map(|r| {
                                    let (lo, hi) = r.bounds();
                                    RangeMsg {
                                        lo: lo.to_vec(),
                                        hi: hi.to_vec(),
                                    }
                                })
                                .collect(),
                        })
                        .collect(),
                })
                .collect(),
            condition: plan.condition,
            limit: plan.limit.map(|l| l as u64),
            subarray_text: plan.subarray_text,
        }
    }

    /// The scan's plan over `table` (the array the message's table opens).
    pub fn plan(self, table: &TileDbTable) -> Result<ScanPlan, Error> {
        let dims = &table.array().schema().domain.dimensions;
        let mut parts = Vec::with_capacity(self.parts.len());
        for p in self.parts {
            if p.dims.len() != dims.len() {
                return Err(Error::Decode(format!(
                    "a scan's subarray has {} dimensions, the array {}",
                    p.dims.len(),
                    dims.len()
                )));
            }
            let mut sub = Subarray::new(dims.len());
            for (d, (msg, dim)) in p.dims.into_iter().zip(dims).enumerate() {
                for r in msg.ranges {
                    sub.add_range(d, Range::from_bounds(&r.lo, &r.hi, dim.is_var()));
                }
            }
            parts.push(sub);
        }
        let limit = match self.limit {
            Some(l) => Some(
                usize::try_from(l).map_err(|_| Error::Decode(format!("a limit of {l} rows")))?,
            ),
            None => None,
        };
        let mut plan = ScanPlan::new(self.fields, parts);
        plan.condition = self.condition;
        plan.limit = limit;
        plan.subarray_text = self.subarray_text;
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(case: &str, options: &TableOptions) -> TileDbTable {
        let uri = tdb_testdata::root().join(case).join("array");
        TileDbTable::open(&uri.display().to_string(), options).unwrap()
    }

    /// A scan of every partition, as the scheduler plans it.
    async fn scan(table: &TileDbTable, filter: &str) -> TileDbScan {
        let ctx = datafusion::prelude::SessionContext::new_with_config(
            datafusion::prelude::SessionConfig::new().with_target_partitions(4),
        );
        ctx.register_table("t", std::sync::Arc::new(table.clone()))
            .unwrap();
        let df = ctx.sql(&format!("SELECT * FROM t {filter}")).await.unwrap();
        let plan = df.create_physical_plan().await.unwrap();
        let mut found = None;
        let mut stack = vec![plan];
        while let Some(p) = stack.pop() {
            if let Some(s) = p.downcast_ref::<TileDbScan>() {
                found = Some(s.plan());
            }
            stack.extend(p.children().into_iter().cloned());
        }
        table.scan_from(found.expect("a scan in the plan")).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_scan_decodes_to_the_scan_encoded() {
        for (case, filter) in [
            ("sparse_2d_int", "WHERE x BETWEEN 3 AND 60 AND a > 0"),
            ("sparse_string_dim", "WHERE s >= 'b'"),
            ("dense_2d_row_row", ""),
        ] {
            let t = table(case, &TableOptions::default());
            let scan = scan(&t, filter).await;
            assert!(
                scan.parts().len() > 1 || case == "sparse_string_dim",
                "{case}"
            );
            let mut buf = Vec::new();
            encode(&ScanMsg::of(&scan), &mut buf);
            let msg: ScanMsg = decode(&buf).expect("tdb's bytes").unwrap();
            let again = table(case, &msg.table.clone().unwrap().options().unwrap());
            assert_eq!(msg.plan(&again).unwrap(), scan.plan(), "{case}");
        }
    }
}
