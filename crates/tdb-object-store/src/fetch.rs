//! A batch of byte ranges as few concurrent requests: ranges of one file
//! close together become one request (`Tuning::coalesce_gap`), requests
//! run `Tuning::concurrency` at a time, and each answer is cut back into
//! the ranges asked for.

use crate::error::is_missing;
use crate::{runtime, ObjectStorage, Tuning};
use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::{self, StreamExt};
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use std::collections::HashMap;
use std::ops::Range;
use tdb_storage::{ByteRange, RangeRead, RangeRequest, Result, StorageError};

/// What one request fetches.
#[derive(Debug, Clone, PartialEq)]
enum Want {
    /// Bytes `start..end` (never empty).
    Range(Range<u64>),
    /// The last `n` bytes (`n > 0`).
    Suffix(u64),
    /// The whole object.
    Whole,
    /// Only the size (every range asked of the file is empty).
    Head,
}

/// One request, and the indexes of the batch's requests it answers.
#[derive(Debug)]
struct Job {
    file: usize,
    want: Want,
    answers: Vec<usize>,
}

/// What a request brought: the bytes, where they start, the file's size.
struct Got {
    bytes: Bytes,
    start: u64,
    size: u64,
}

/// Groups the batch's requests into jobs: bounded ranges of one file merged
/// where at most `gap` apart or the merge at most `batch` long (and at most
/// `max` long either way), suffixes and
/// whole reads one job each, and empty ranges (and zero suffixes) answered by
/// whichever job of their file learns its size, or a `Head` of their own.
fn plan(requests: &[RangeRequest], files: &[usize], t: &Tuning) -> Vec<Job> {
    let mut by_file: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, f) in files.iter().enumerate() {
        by_file.entry(*f).or_default().push(i);
    }
    let mut order: Vec<usize> = by_file.keys().copied().collect();
    order.sort_unstable();
    let mut jobs = Vec::new();
    for file in order {
        let first_job = jobs.len();
        let mut bounded: Vec<(u64, u64, usize)> = Vec::new();
        let mut empty = Vec::new();
        for &i in &by_file[&file] {
            match requests[i].range {
                ByteRange::Bounded { len: 0, .. } | ByteRange::Suffix(0) => empty.push(i),
                ByteRange::Bounded { offset, len } => {
                    bounded.push((offset, offset.saturating_add(len), i))
                }
                ByteRange::Suffix(n) => jobs.push(Job {
                    file,
                    want: Want::Suffix(n),
                    answers: vec![i],
                }),
                ByteRange::Whole => jobs.push(Job {
                    file,
                    want: Want::Whole,
                    answers: vec![i],
                }),
            }
        }
        bounded.sort_unstable();
        let mut current: Option<(u64, u64, Vec<usize>)> = None;
        for (start, end, i) in bounded {
            match &mut current {
                Some((s, e, answers))
                    if (start <= e.saturating_add(t.coalesce_gap)
                        || end.max(*e) - *s <= t.min_batch)
                        && end.max(*e) - *s <= t.max_request =>
                {
                    *e = (*e).max(end);
                    answers.push(i);
                }
                _ => {
                    if let Some((s, e, answers)) = current.take() {
                        jobs.push(Job {
                            file,
                            want: Want::Range(s..e),
                            answers,
                        });
                    }
                    current = Some((start, end, vec![i]));
                }
            }
        }
        if let Some((s, e, answers)) = current {
            jobs.push(Job {
                file,
                want: Want::Range(s..e),
                answers,
            });
        }
        if !empty.is_empty() {
            match jobs.get_mut(first_job) {
                Some(job) => job.answers.extend(empty),
                None => jobs.push(Job {
                    file,
                    want: Want::Head,
                    answers: empty,
                }),
            }
        }
    }
    jobs
}

/// The last `n` bytes of a file asked as a size and then a bounded range.
async fn suffix_after_head(
    store: &dyn ObjectStore,
    path: &Path,
    n: u64,
) -> Result<Option<Got>, object_store::Error> {
    let size = match store.head(path).await {
        Ok(m) => m.size,
        Err(e) if is_missing(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let start = size - n.min(size);
    if start == size {
        let bytes = Bytes::new();
        return Ok(Some(Got { bytes, start, size }));
    }
    let opts = GetOptions {
        range: Some(GetRange::Bounded(start..size)),
        ..GetOptions::default()
    };
    let r = store.get_opts(path, opts).await?;
    let (start, size) = (r.range.start, r.meta.size);
    let bytes = r.bytes().await?;
    Ok(Some(Got { bytes, start, size }))
}

/// Runs one job; `None` when the file does not exist.
async fn fetch(
    store: &dyn ObjectStore,
    path: &Path,
    want: &Want,
) -> Result<Option<Got>, object_store::Error> {
    let range = match want {
        Want::Head => {
            return match store.head(path).await {
                Ok(m) => Ok(Some(Got {
                    bytes: Bytes::new(),
                    start: 0,
                    size: m.size,
                })),
                Err(e) if is_missing(&e) => Ok(None),
                Err(e) => Err(e),
            };
        }
        Want::Whole => None,
        Want::Range(r) => Some(GetRange::Bounded(r.clone())),
        Want::Suffix(n) => Some(GetRange::Suffix(*n)),
    };
    let opts = GetOptions {
        range,
        ..GetOptions::default()
    };
    match store.get_opts(path, opts).await {
        // Azure takes no suffix ranges: the size first, then the range.
        Err(e @ object_store::Error::NotSupported { .. }) => match want {
            Want::Suffix(n) => suffix_after_head(store, path, *n).await,
            _ => Err(e),
        },
        Ok(r) => {
            let (start, size) = (r.range.start, r.meta.size);
            let bytes = r.bytes().await?;
            Ok(Some(Got { bytes, start, size }))
        }
        Err(e) if is_missing(&e) => Ok(None),
        // A range the object cannot satisfy (past its end; any suffix of
        // an empty object, on some stores) is refused: the size tells
        // whether that was the range's fault, answered as out of bounds.
        Err(e) if want != &Want::Whole => match store.head(path).await {
            Ok(m) => {
                let past_end = match want {
                    Want::Range(r) => r.end > m.size,
                    _ => m.size == 0,
                };
                if past_end {
                    Ok(Some(Got {
                        bytes: Bytes::new(),
                        start: m.size,
                        size: m.size,
                    }))
                } else {
                    Err(e)
                }
            }
            Err(_) => Err(e),
        },
        Err(e) => Err(e),
    }
}

pub(crate) fn read_ranges(
    s: &ObjectStorage,
    requests: &[RangeRequest],
) -> Result<Vec<Option<RangeRead>>> {
    runtime::block_on(read_ranges_async(s, requests))?
}

/// [`read_ranges`] as a future, for a fetch started ahead.
pub(crate) async fn read_ranges_async(
    s: &ObjectStorage,
    requests: &[RangeRequest],
) -> Result<Vec<Option<RangeRead>>> {
    // Every key is checked before any request goes out.
    let mut paths: Vec<(&str, Path)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut files = Vec::with_capacity(requests.len());
    for r in requests {
        let f = match index.get(r.key.as_str()) {
            Some(f) => *f,
            None => {
                paths.push((&r.key, s.path(&r.key)?));
                index.insert(&r.key, paths.len() - 1);
                paths.len() - 1
            }
        };
        files.push(f);
    }
    let t = s.tuning;
    let jobs = plan(requests, &files, &t);
    tracing::debug!(
        ranges = requests.len(),
        files = paths.len(),
        requests = jobs.len(),
        "object store fetch"
    );
    let store = &*s.store;
    let paths = &paths;
    type Fetched = (usize, Result<Option<Got>, object_store::Error>);
    // Boxed first: a stream of closures' futures trips the compiler's
    // proof that the whole future is `Send`.
    let futures: Vec<BoxFuture<'_, Fetched>> = jobs
        .iter()
        .enumerate()
        .map(|(j, job)| {
            let path = &paths[job.file].1;
            Box::pin(async move { (j, fetch(store, path, &job.want).await) }) as BoxFuture<'_, _>
        })
        .collect();
    let results: Vec<Fetched> = stream::iter(futures)
        .buffer_unordered(t.concurrency.max(1))
        .collect()
        .await;
    let mut out: Vec<Option<RangeRead>> = vec![None; requests.len()];
    for (j, result) in results {
        let job = &jobs[j];
        let key = paths[job.file].0;
        let Some(got) = result.map_err(|e| s.error(key, e))? else {
            continue; // no such file: every answer stays `None`
        };
        for &i in &job.answers {
            let (offset, len) = requests[i].range.resolve(key, got.size)?;
            let bytes = if len == 0 {
                Bytes::new()
            } else {
                let from = offset.checked_sub(got.start);
                let slice = from.and_then(|from| {
                    let end = from.checked_add(len)?;
                    (end <= got.bytes.len() as u64)
                        .then(|| got.bytes.slice(from as usize..end as usize))
                });
                slice.ok_or_else(|| StorageError::Backend {
                    uri: s.uri_of(key),
                    message: format!(
                        "the store answered {} bytes from {} for range {}",
                        got.bytes.len(),
                        got.start,
                        requests[i].range
                    ),
                    source: None,
                })?
            };
            out[i] = Some(RangeRead {
                bytes,
                file_size: got.size,
                arranged: false,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wants(jobs: &[Job]) -> Vec<(usize, Want, Vec<usize>)> {
        jobs.iter()
            .map(|j| (j.file, j.want.clone(), j.answers.clone()))
            .collect()
    }

    #[test]
    fn close_ranges_of_a_file_are_one_request() {
        let r = |k: &str, range| RangeRequest::new(k, range);
        let requests = [
            r("a", ByteRange::new(100, 10)),
            r("a", ByteRange::new(0, 10)),
            r("b", ByteRange::Suffix(8)),
            r("a", ByteRange::new(15, 5)),
            r("a", ByteRange::new(5, 0)),
            r("c", ByteRange::new(3, 0)),
            r("a", ByteRange::Whole),
        ];
        let files = [0, 0, 1, 0, 0, 2, 0];
        let tuning = |coalesce_gap, min_batch, max_request| Tuning {
            coalesce_gap,
            min_batch,
            max_request,
            ..Tuning::default()
        };
        assert_eq!(
            wants(&plan(&requests, &files, &tuning(10, 0, 1000))),
            vec![
                (0, Want::Whole, vec![6, 4]),
                (0, Want::Range(0..20), vec![1, 3]),
                (0, Want::Range(100..110), vec![0]),
                (1, Want::Suffix(8), vec![2]),
                (2, Want::Head, vec![5]),
            ]
        );
        // A wider gap joins the far range too; a cap on length splits again.
        assert_eq!(plan(&requests, &files, &tuning(100, 0, 1000)).len(), 4);
        assert_eq!(plan(&requests, &files, &tuning(100, 0, 50)).len(), 5);
        // TileDB's batch rule: whatever the gap while the merge is short.
        assert_eq!(
            wants(&plan(&requests, &files, &tuning(10, 110, 1000)))[1],
            (0, Want::Range(0..110), vec![1, 3, 0])
        );
        assert_eq!(plan(&requests, &files, &tuning(10, 109, 1000)).len(), 5);
        assert_eq!(plan(&requests, &files, &tuning(10, 110, 100)).len(), 5);
    }
}
