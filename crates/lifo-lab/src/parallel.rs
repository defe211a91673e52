//! Jobs spread over a few threads, their results in the jobs' order: how
//! the lab makes many virtual runs at once (each run is one thread and its
//! results are its seed's alone, so the order they finish in changes
//! nothing).

use anyhow::{Result, anyhow};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The threads to use: one per core.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// `f(job)` for every job, on at most `threads` threads (each takes the
/// next job left), and `done(n)` after the n-th result; the results in the
/// jobs' order, or the first job's error.
pub fn map<J: Sync, T: Send>(
    jobs: &[J],
    threads: usize,
    f: impl Fn(&J) -> Result<T> + Sync,
    done: impl Fn(usize) + Sync,
) -> Result<Vec<T>> {
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<T>>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { return };
                    let result = f(job);
                    *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
                    done(finished.fetch_add(1, Ordering::Relaxed) + 1);
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or_else(|| Err(anyhow!("a job's thread panicked before it finished")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_the_jobs_order_and_every_job_is_counted() {
        let jobs: Vec<u64> = (0..50).collect();
        let counted = AtomicUsize::new(0);
        let out = map(
            &jobs,
            3,
            |j| Ok(j * 2),
            |_| {
                counted.fetch_add(1, Ordering::Relaxed);
            },
        )
        .unwrap();
        assert_eq!(out, jobs.iter().map(|j| j * 2).collect::<Vec<_>>());
        assert_eq!(counted.into_inner(), 50);
        assert!(
            map(&[] as &[u64], 2, |j| Ok(*j), |_| ())
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn an_error_is_the_first_jobs_own() {
        let err = map(
            &[1, 2, 3, 4],
            2,
            |j| {
                if *j % 2 == 0 {
                    Err(anyhow!("job {j}"))
                } else {
                    Ok(*j)
                }
            },
            |_| (),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "job 2");
    }
}
