//! The codecs every process of a cluster registers: tdb's tables, scans
//! and inserts in their own bytes ([`crate::wire`]), anything else handed
//! to Ballista's codecs (shuffles, file formats), which they wrap.

use crate::spread::PartScan;
use crate::wire::{self, InsertMsg, NodeMsg, ScanMsg, TableMsg};
use crate::Error;
use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result, TableReference};
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Extension, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use std::sync::{Arc, Mutex, PoisonError};
use tdb_datafusion::{InsertTotal, TileDbInsert, TileDbScan, TileDbTable};

/// Arrays a process opened for plans, by URI and options: a window
/// pinned, so one opening serves every task of every query at it. Each
/// task of a stage decodes the stage's plan; opening the array for each
/// would list it and load its fragments again.
#[derive(Debug, Default)]
struct Tables {
    open: Mutex<Vec<(TableKey, TileDbTable)>>,
}

/// A table's URI and options, sorted: what names one opening (a message's
/// options are a map, whose encoding is in no set order).
type TableKey = (String, Vec<(String, String)>);

fn key(msg: &TableMsg) -> TableKey {
    let mut options: Vec<_> = msg
        .options
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    options.sort();
    (msg.uri.clone(), options)
}

impl Tables {
    /// Arrays kept: a process serves a few tables at a few windows.
    const KEEP: usize = 16;

    fn get(&self, msg: &TableMsg) -> Result<TileDbTable> {
        let key = key(msg);
        // Entries are whole tables, never half-made: one a panic left is
        // still good.
        let lock = || self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, t)) = lock().iter().find(|(k, _)| *k == key) {
            return Ok(t.clone());
        }
        let options = msg.options().map_err(into_df)?;
        let table = TileDbTable::open(&msg.uri, &options)?;
        if options.timestamp.is_none() {
            // It follows the array: each query opens it again anyway.
            return Ok(table);
        }
        let mut open = lock();
        if open.len() >= Self::KEEP {
            open.remove(0);
        }
        open.push((key, table.clone()));
        Ok(table)
    }
}

fn into_df(e: Error) -> DataFusionError {
    tdb_datafusion::external(e)
}

/// The logical codec: tdb's tables (client to scheduler), anything else
/// Ballista's.
#[derive(Debug, Default)]
pub struct LogicalCodec {
    inner: BallistaLogicalExtensionCodec,
    tables: Tables,
}

impl LogicalExtensionCodec for LogicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[LogicalPlan],
        ctx: &TaskContext,
    ) -> Result<Extension> {
        self.inner.try_decode(buf, inputs, ctx)
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode(node, buf)
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        let Some(msg) = wire::decode::<TableMsg>(buf) else {
            return self
                .inner
                .try_decode_table_provider(buf, table_ref, schema, ctx);
        };
        let table = self.tables.get(&msg.map_err(into_df)?)?;
        if table.schema().fields() != schema.fields() {
            return Err(DataFusionError::Plan(format!(
                "table {table_ref}: the array at {} no longer has the columns planned",
                table.uri()
            )));
        }
        Ok(Arc::new(table))
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        match node.downcast_ref::<TileDbTable>() {
            Some(t) => {
                wire::encode(&TableMsg::of(t), buf);
                Ok(())
            }
            None => self.inner.try_encode_table_provider(table_ref, node, buf),
        }
    }

    fn try_decode_file_format(
        &self,
        buf: &[u8],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn FileFormatFactory>> {
        self.inner.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(
        &self,
        buf: &mut Vec<u8>,
        node: Arc<dyn FileFormatFactory>,
    ) -> Result<()> {
        self.inner.try_encode_file_format(buf, node)
    }
}

/// The physical codec: tdb's scans and inserts (scheduler to executors),
/// anything else Ballista's.
#[derive(Debug, Default)]
pub struct PhysicalCodec {
    inner: BallistaPhysicalExtensionCodec,
    tables: Tables,
}

impl PhysicalExtensionCodec for PhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(msg) = wire::decode::<NodeMsg>(buf) else {
            return self.inner.try_decode(buf, inputs, ctx, proto_converter);
        };
        let msg = msg.map_err(into_df)?;
        let one_input = || match inputs {
            [input] => Ok(Arc::clone(input)),
            _ => Err(into_df(Error::Decode(format!(
                "a tdb plan node of {} inputs, not one",
                inputs.len()
            )))),
        };
        let table = |t: Option<TableMsg>| {
            let t =
                t.ok_or_else(|| into_df(Error::Decode("a plan node without its table".into())))?;
            self.tables.get(&t)
        };
        if let Some(scan) = msg.scan {
            let table = table(scan.table.clone())?;
            let plan = scan.plan(&table).map_err(into_df)?;
            let scan = Arc::new(table.scan_from(plan)?);
            match inputs {
                [] => Ok(scan),
                // A scan of the partitions its input names.
                [numbers] => Ok(Arc::new(PartScan::with_numbers(scan, Arc::clone(numbers))?)),
                _ => Err(into_df(Error::Decode(format!(
                    "a scan of {} inputs",
                    inputs.len()
                )))),
            }
        } else if let Some(insert) = msg.insert {
            let table = table(insert.table)?;
            Ok(Arc::new(TileDbInsert::new(
                table,
                one_input()?,
                insert.timestamp,
            )))
        } else if let Some(total) = msg.total {
            let table = table(Some(total))?;
            Ok(Arc::new(InsertTotal::new(table, one_input()?)))
        } else {
            Err(into_df(Error::Decode(
                "a tdb plan node that is no scan, insert or total".into(),
            )))
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        let scan = node
            .downcast_ref::<TileDbScan>()
            .or_else(|| node.downcast_ref::<PartScan>().and_then(PartScan::scan));
        let msg = if let Some(scan) = scan {
            // A part scan's input (its partitions' numbers) goes beside.
            NodeMsg {
                scan: Some(ScanMsg::of(scan)),
                ..NodeMsg::default()
            }
        } else if let Some(insert) = node.downcast_ref::<TileDbInsert>() {
            NodeMsg {
                insert: Some(InsertMsg {
                    table: Some(TableMsg::of(insert.table())),
                    timestamp: insert.timestamp(),
                }),
                ..NodeMsg::default()
            }
        } else if let Some(total) = node.downcast_ref::<InsertTotal>() {
            NodeMsg {
                total: Some(TableMsg::of(total.table())),
                ..NodeMsg::default()
            }
        } else {
            return self.inner.try_encode(node, buf, proto_converter);
        };
        wire::encode(&msg, buf);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_one_key_however_its_options_were_encoded() {
        use prost::Message as _;
        let mut a = TableMsg {
            uri: "s3://b/a".into(),
            options: Default::default(),
        };
        for (k, v) in [("timestamp", "5"), ("budget", "1024"), ("aws_region", "x")] {
            a.options.insert(k.into(), v.into());
        }
        let keys: Vec<TableKey> = (0..8)
            .map(|_| {
                let again = TableMsg::decode(a.encode_to_vec().as_slice()).unwrap();
                key(&again)
            })
            .collect();
        assert!(keys.iter().all(|k| *k == key(&a)));
        let mut b = a.clone();
        b.options.insert("timestamp".into(), "6".into());
        assert_ne!(key(&a), key(&b));
    }
}
