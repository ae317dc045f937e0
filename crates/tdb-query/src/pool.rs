//! The bounded worker pool reads and writes run their tiles on: one pool
//! for the process (`crate::threads()` workers, started once: a read in
//! many small pieces started two threads per piece, 150,000 for a 746-cell
//! array under a 16 KiB budget), at most `threads` threads per call (in
//! `map_all` the calling thread and `threads - 1` workers), each
//! with its own state (a filter workspace: codec contexts and stage
//! buffers), kept by its thread from call to call. A job's panic (or the
//! sink's) is an error, whether it ran on a worker or, for few jobs, on
//! the calling thread.

use crate::{QueryError, Result};
use std::any::Any;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Condvar, Mutex, OnceLock};

/// The process's workers; `None` if they could not be started (then
/// every call runs on its calling thread).
fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(crate::threads())
            .thread_name(|i| format!("tdb-pool-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

thread_local! {
    /// Job states this thread made, one of each type, for its next call.
    static STATES: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's state of type `S`, made by `init` the first
/// time, and keeps it for the thread's next call.
fn with_state<S: 'static, R>(init: &impl Fn() -> S, f: impl FnOnce(&mut S) -> R) -> R {
    let kept = STATES.with(|c| {
        let mut states = c.borrow_mut();
        let i = states.iter().position(|b| b.is::<S>())?;
        states.swap_remove(i).downcast::<S>().ok()
    });
    let mut state = kept.map_or_else(init, |b| *b);
    let out = f(&mut state);
    STATES.with(|c| c.borrow_mut().push(Box::new(state)));
    out
}

#[cfg(test)]
thread_local! {
    /// Calls of [`map_all`] this thread handed to the workers: what a
    /// test of a caller's choice of threads looks at.
    pub(crate) static HANDED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Work on fewer bytes than this runs on the calling thread: handing it to
/// the pool (waking workers, collecting results) costs more than doing it.
pub(crate) const SMALL_WORK: usize = 256 << 10;

/// Fewer jobs than this many per worker run on the calling thread:
/// starting threads costs more than a few small tiles (reads in many small
/// pieces, writes in many small parts), and callers cut large work into
/// many jobs.
const FEW: usize = 2;

/// `f` on every job, results in the jobs' order (all held at once: for
/// reads, whose results are as large as the budget allows anyway).
pub(crate) fn map_all<J: Sync, T: Send, S: 'static>(
    jobs: &[J],
    threads: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &J) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let n = jobs.len();
    let threads = threads.clamp(1, n.max(1));
    let pool = pool().filter(|_| threads > 1 && n >= FEW.saturating_mul(threads));
    let Some(pool) = pool else {
        return with_state(&init, |state| {
            jobs.iter().map(|j| guarded(|| f(state, j))).collect()
        });
    };
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, Result<T>)>> = Mutex::new(Vec::with_capacity(n));
    let work = || {
        let mine = with_state(&init, |state| {
            let mut mine = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else {
                    break mine;
                };
                mine.push((i, guarded(|| f(state, job))));
            }
        });
        if let Ok(mut d) = done.lock() {
            d.extend(mine);
        }
    };
    #[cfg(test)]
    HANDED.with(|h| h.set(h.get().saturating_add(1)));
    // The calling thread works too: one worker fewer to wake.
    pool.in_place_scope(|s| {
        for _ in 1..threads {
            s.spawn(|_| work());
        }
        work();
    });
    let mut results: Vec<Option<Result<T>>> = (0..n).map(|_| None).collect();
    for (i, r) in done.into_inner().unwrap_or_default() {
        if let Some(slot) = results.get_mut(i) {
            *slot = Some(r);
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(panicked())))
        .collect()
}

/// `f` on jobs `0..n`, each result handed to `sink` on the calling thread
/// in job order as soon as it and those before it are done, so the caller
/// works (uploads) while the workers compute the next. No worker starts
/// a job more than `window` ahead of the last one sunk: at most `window`
/// results are held, however many jobs there are. Stops at the first
/// error, `f`'s or `sink`'s.
pub(crate) fn map_ordered<T: Send, S: 'static>(
    n: usize,
    threads: usize,
    window: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize) -> Result<T> + Sync,
    mut sink: impl FnMut(usize, T) -> Result<()>,
) -> Result<()> {
    let threads = threads.clamp(1, n.max(1));
    let window = window.max(1);
    let pool = pool().filter(|_| threads > 1 && n >= FEW.saturating_mul(threads));
    let Some(pool) = pool else {
        return with_state(&init, |state| {
            for i in 0..n {
                let t = guarded(|| f(state, i))?;
                guarded(|| sink(i, t))?;
            }
            Ok(())
        });
    };
    struct Gate {
        next: usize,
        sunk: usize,
        stop: bool,
    }
    let gate = Mutex::new(Gate {
        next: 0,
        sunk: 0,
        stop: false,
    });
    let moved = Condvar::new();
    let (tx, rx) = mpsc::channel::<(usize, Result<T>)>();
    // The next job a worker may start, `None` when there is none (or the
    // run stopped). A poisoned lock means a worker panicked holding it,
    // which the code under it cannot do: stop then too.
    let claim = || -> Option<usize> {
        let mut g = gate.lock().ok()?;
        loop {
            if g.stop || g.next >= n {
                return None;
            }
            if g.next < g.sunk.saturating_add(window) {
                let i = g.next;
                g.next = i.saturating_add(1);
                return Some(i);
            }
            g = moved.wait(g).ok()?;
        }
    };
    let advance = |sunk: usize, stop: bool| {
        if let Ok(mut g) = gate.lock() {
            g.sunk = sunk;
            g.stop |= stop;
        }
        moved.notify_all();
    };
    // The calling thread sinks while the pool's workers build: they wait
    // on the window, which only the sink moves, so the sink never runs on
    // a worker.
    pool.in_place_scope(|s| {
        for _ in 0..threads {
            let tx = tx.clone();
            let (claim, f, init) = (&claim, &f, &init);
            s.spawn(move |_| {
                with_state(init, |state| {
                    while let Some(i) = claim() {
                        if tx.send((i, guarded(|| f(state, i)))).is_err() {
                            return;
                        }
                    }
                })
            });
        }
        drop(tx);
        let mut held: BTreeMap<usize, Result<T>> = BTreeMap::new();
        let mut sunk = 0;
        let result = 'run: loop {
            while let Some(r) = held.remove(&sunk) {
                if let Err(e) = r.and_then(|t| guarded(|| sink(sunk, t))) {
                    break 'run Err(e);
                }
                sunk = sunk.saturating_add(1);
                advance(sunk, false);
            }
            if sunk == n {
                break Ok(());
            }
            match rx.recv() {
                Ok((i, r)) => {
                    held.insert(i, r);
                }
                // Every worker gone with jobs unsunk.
                Err(_) => break Err(panicked()),
            }
        };
        advance(sunk, true);
        result
    })
}

/// `f` on every item, the items cut into up to `threads` consecutive
/// shares of about equal `weight`, one thread each (the calling thread
/// takes the first). For items that own what they write (disjoint slices
/// of one buffer), which [`map_all`]'s shared jobs cannot be.
pub(crate) fn for_each_share<T: Send>(
    items: &mut [T],
    threads: usize,
    weight: impl Fn(&T) -> usize,
    f: impl Fn(&mut T) + Sync,
) -> Result<()> {
    let threads = threads.clamp(1, items.len().max(1));
    let total = items
        .iter()
        .map(&weight)
        .fold(0usize, usize::saturating_add);
    let share = total.div_ceil(threads).max(1);
    // Each share ends after the item that fills it: slices of the items,
    // not copies of them (a dense read copies one run a tile row, 8,192
    // in an 8 MiB piece: gathered again into shares, they were a quarter
    // of the piece's fresh pages).
    let mut shares: Vec<&mut [T]> = Vec::with_capacity(threads);
    let mut rest = items;
    while shares.len().saturating_add(1) < threads && !rest.is_empty() {
        let mut filled = 0usize;
        let end = (rest.iter())
            .position(|item| {
                filled = filled.saturating_add(weight(item));
                filled >= share
            })
            .map_or(rest.len(), |i| i.saturating_add(1));
        let Some((a, b)) = std::mem::take(&mut rest).split_at_mut_checked(end) else {
            break;
        };
        shares.push(a);
        rest = b;
    }
    shares.push(rest);
    let f = &f;
    let run = |share: &mut [T]| {
        guarded(|| {
            share.iter_mut().for_each(f);
            Ok(())
        })
    };
    let mine = shares.remove(0);
    let Some(pool) = pool().filter(|_| !shares.is_empty()) else {
        return shares.into_iter().map(run).fold(run(mine), Result::and);
    };
    let spawned = shares.len();
    let others: Mutex<Vec<Result<()>>> = Mutex::new(Vec::new());
    let first = pool.in_place_scope(|s| {
        for share in shares {
            let others = &others;
            s.spawn(move |_| {
                let r = run(share);
                if let Ok(mut o) = others.lock() {
                    o.push(r);
                }
            });
        }
        run(mine)
    });
    let others = others.into_inner().unwrap_or_default();
    if others.len() < spawned {
        return Err(panicked());
    }
    others.into_iter().fold(first, Result::and)
}

/// `f`, its panic turned into an error.
fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Err(panicked()))
}

fn panicked() -> QueryError {
    QueryError::invalid("a tile job panicked")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_sunk_in_order_with_a_bounded_window() {
        for threads in [1, 2, 4] {
            let in_flight = AtomicUsize::new(0);
            let most = AtomicUsize::new(0);
            let mut seen = Vec::new();
            map_ordered(
                100,
                threads,
                3,
                || (),
                |_, i| {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    // Later jobs finish first, to make the order work.
                    std::thread::sleep(std::time::Duration::from_micros((100 - i as u64) % 7 * 50));
                    Ok(i * 2)
                },
                |i, v| {
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    seen.push((i, v));
                    Ok(())
                },
            )
            .unwrap();
            assert_eq!(seen, (0..100).map(|i| (i, i * 2)).collect::<Vec<_>>());
            assert!(most.load(Ordering::SeqCst) <= 3, "threads {threads}");
        }
    }

    #[test]
    fn shares_run_every_item_once_on_up_to_threads_threads() {
        for threads in [1, 2, 3, 8] {
            let mut out = vec![0u32; 1000];
            // Items own their slot: weights 1..=1000, so shares differ in
            // length but not much in weight.
            let mut items: Vec<(usize, &mut u32)> = out.iter_mut().enumerate().collect();
            let seen = Mutex::new(std::collections::HashSet::new());
            for_each_share(
                &mut items,
                threads,
                |(i, _)| i + 1,
                |(i, slot)| {
                    **slot = *i as u32 * 2;
                    seen.lock().unwrap().insert(std::thread::current().id());
                },
            )
            .unwrap();
            assert!(out.iter().enumerate().all(|(i, &v)| v == i as u32 * 2));
            assert!(seen.lock().unwrap().len() <= threads, "{threads}");
        }
        let e = for_each_share(
            &mut (0..100).collect::<Vec<i32>>(),
            2,
            |_| 1,
            |i: &mut i32| {
                if *i == 70 {
                    panic!("boom")
                }
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("panicked"), "{e}");
    }

    /// Jobs come back in their order, a panic as an error, and the calling
    /// thread takes jobs beside the workers (one fewer to wake: W1's
    /// whole read 123 -> 107 ms).
    #[test]
    fn map_all_keeps_the_order_and_works_on_the_calling_thread() {
        let jobs: Vec<u64> = (0..40).collect();
        let caller = std::thread::current().id();
        let on_caller = AtomicUsize::new(0);
        let out = map_all(
            &jobs,
            2,
            || (),
            |_, &j| {
                std::thread::sleep(std::time::Duration::from_millis(1));
                if std::thread::current().id() == caller {
                    on_caller.fetch_add(1, Ordering::SeqCst);
                }
                Ok(j * 3)
            },
        )
        .unwrap();
        assert_eq!(out, jobs.iter().map(|j| j * 3).collect::<Vec<_>>());
        assert!(on_caller.load(Ordering::SeqCst) > 0);
        let e = map_all(
            &jobs,
            2,
            || (),
            |_, &j| match j {
                17 => panic!("boom"),
                _ => Ok(j),
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("panicked"), "{e}");
    }

    #[test]
    fn the_first_error_or_panic_stops_the_run() {
        for threads in [1, 2] {
            let mut sunk = 0;
            let e = map_ordered(
                50,
                threads,
                4,
                || (),
                |_, i| {
                    if i == 10 {
                        Err(QueryError::invalid("job 10"))
                    } else {
                        Ok(i)
                    }
                },
                |_, _| {
                    sunk += 1;
                    Ok(())
                },
            )
            .unwrap_err();
            assert!(e.to_string().contains("job 10"), "{e}");
            assert_eq!(sunk, 10);
        }
        let e = map_ordered(
            20,
            2,
            4,
            || (),
            |_, i| if i == 5 { panic!("boom") } else { Ok(i) },
            |_, _| Ok(()),
        )
        .unwrap_err();
        assert!(e.to_string().contains("panicked"), "{e}");
        let e = map_ordered(
            20,
            2,
            4,
            || (),
            |_, i| Ok(i),
            |i, _| {
                if i == 3 {
                    Err(QueryError::invalid("sink 3"))
                } else {
                    Ok(())
                }
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("sink 3"), "{e}");
    }
}
