//! Lambda's asynchronous invocation of one function, as the local pipeline
//! models it ([`crate::aws::AwsTiming`]): an event reaches the function
//! after SNS's delivery; with reserved concurrency, an event that finds
//! every slot busy is throttled and retried after 1 s, 2 s, 4 s … (at most
//! 5 minutes apart) until it is older than the function's
//! `MaximumEventAgeInSeconds`, when Lambda drops it (to the on-failure
//! destination, if the function has one); a function error is retried
//! `MaximumRetryAttempts` times, 1 then 2 minutes later; an invocation on
//! no warm instance pays a cold start.

use crate::aws::AwsTiming;
use crate::pipeline::stats::PipelineStats;
pub use crate::template::AsyncConfig;
use futures::future::BoxFuture;
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
// Tokio's instant: under a paused runtime (the virtual engine) it is
// virtual time, as every timer here is.
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// A function's handler: the event in, `Err` with the error's text for a
/// function error.
pub type Handler = Arc<dyn Fn(Value) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// One function behind Lambda's asynchronous queue.
pub struct AsyncFunction {
    config: AsyncConfig,
    timing: AwsTiming,
    slots: Option<Arc<Semaphore>>,
    /// When each idle warm instance was last used.
    warm: Mutex<Vec<Instant>>,
    handler: Handler,
    stats: Arc<PipelineStats>,
    shutdown: watch::Receiver<bool>,
    running: Mutex<JoinSet<()>>,
}

impl AsyncFunction {
    pub fn new(
        config: AsyncConfig,
        timing: AwsTiming,
        handler: Handler,
        stats: Arc<PipelineStats>,
        shutdown: watch::Receiver<bool>,
    ) -> Arc<Self> {
        Arc::new(Self {
            slots: config.reserved.map(|n| Arc::new(Semaphore::new(n.max(1)))),
            config,
            timing,
            warm: Mutex::new(Vec::new()),
            handler,
            stats,
            shutdown,
            running: Mutex::new(JoinSet::new()),
        })
    }

    /// Lambda accepts `event` into the function's queue; it runs in the
    /// background (see the module's documentation).
    pub fn deliver(self: &Arc<Self>, event: Value) {
        let me = Arc::clone(self);
        if let Ok(mut running) = self.running.lock() {
            while running.try_join_next().is_some() {}
            running.spawn(async move { me.attempts(event).await });
        }
    }

    /// Waits for every event in flight (after shutdown, retries stop).
    pub async fn drain(&self) {
        let mut all = match self.running.lock() {
            Ok(mut r) => std::mem::take(&mut *r),
            Err(_) => return,
        };
        while all.join_next().await.is_some() {}
    }

    /// [`AsyncFunction::drain`], until `deadline`: then what still runs is
    /// ended, as Lambda ends an invocation at its timeout. `false` when
    /// something was cut short.
    pub async fn drain_until(&self, deadline: tokio::time::Instant) -> bool {
        let mut all = match self.running.lock() {
            Ok(mut r) => std::mem::take(&mut *r),
            Err(_) => return true,
        };
        let done =
            tokio::time::timeout_at(deadline, async { while all.join_next().await.is_some() {} })
                .await
                .is_ok();
        if !done {
            all.abort_all();
            while all.join_next().await.is_some() {}
        }
        done
    }

    /// Events in flight now (running, or waiting for a retry).
    pub fn running(&self) -> usize {
        self.running.lock().map_or(0, |mut r| {
            while r.try_join_next().is_some() {}
            r.len()
        })
    }

    /// Sleeps `d`, or less when the pipeline stops: false then.
    async fn wait(&self, d: Duration) -> bool {
        let mut stop = self.shutdown.clone();
        if *stop.borrow() {
            return false;
        }
        tokio::select! {
            biased;
            _ = tokio::time::sleep(d) => true,
            _ = stop.changed() => false,
        }
    }

    async fn attempts(&self, event: Value) {
        let arrived = Instant::now();
        if !self.wait(self.timing.sns_to_lambda).await {
            return;
        }
        let (mut throttles, mut errors) = (0u32, 0u32);
        loop {
            let permit = match &self.slots {
                None => None,
                Some(slots) => match Arc::clone(slots).try_acquire_owned() {
                    Ok(p) => Some(p),
                    Err(_) => {
                        throttles += 1;
                        self.stats.throttles.fetch_add(1, Ordering::Relaxed);
                        let gap = self.timing.throttle_gap(throttles);
                        if arrived.elapsed() + gap > self.config.max_event_age {
                            self.drop_event();
                            return;
                        }
                        if !self.wait(gap).await {
                            return;
                        }
                        continue;
                    }
                },
            };
            let cold = {
                let mut warm = self.warm.lock().unwrap_or_else(|p| p.into_inner());
                warm.retain(|t| t.elapsed() < self.timing.keep_warm);
                warm.pop().is_none()
            };
            if cold {
                self.stats.cold_starts.fetch_add(1, Ordering::Relaxed);
                if !self.wait(self.timing.cold_start).await {
                    return;
                }
            }
            let result = (self.handler)(event.clone()).await;
            if let Ok(mut warm) = self.warm.lock() {
                warm.push(Instant::now());
            }
            drop(permit);
            let Err(e) = result else { return };
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, errors, "invocation failed");
            if errors >= self.config.max_retries.min(2) {
                self.drop_event();
                return;
            }
            let gap = self.timing.error_retry_gaps[errors as usize];
            errors += 1;
            if arrived.elapsed() + gap > self.config.max_event_age || !self.wait(gap).await {
                self.drop_event();
                return;
            }
        }
    }

    /// Lambda gives up on the event: to the dead-letter queue if the
    /// function has an on-failure destination, else it is gone.
    fn drop_event(&self) {
        let counter = if self.config.on_failure {
            &self.stats.dead_lettered
        } else {
            &self.stats.dropped
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn function(
        reserved: usize,
        max_age: Duration,
        runs: Arc<AtomicUsize>,
        took: Duration,
    ) -> (Arc<AsyncFunction>, Arc<PipelineStats>, watch::Sender<bool>) {
        let stats = Arc::new(PipelineStats::default());
        let (tx, rx) = watch::channel(false);
        let handler: Handler = Arc::new(move |_| {
            let runs = runs.clone();
            Box::pin(async move {
                runs.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(took).await;
                Ok(())
            })
        });
        let config = AsyncConfig {
            reserved: Some(reserved),
            max_event_age: max_age,
            max_retries: 2,
            on_failure: false,
        };
        (
            AsyncFunction::new(config, AwsTiming::default(), handler, stats.clone(), rx),
            stats,
            tx,
        )
    }

    /// One slot busy for 10 s: a second event is throttled, retried at
    /// about 1, 3 and 7 s (throttled each time), then runs at about 15 s;
    /// with a maximum age of 5 s it is dropped instead.
    #[tokio::test(start_paused = true)]
    async fn a_throttled_event_is_retried_with_growing_gaps_until_too_old() {
        let runs = Arc::new(AtomicUsize::new(0));
        let (f, stats, _stop) = function(
            1,
            Duration::from_secs(60),
            runs.clone(),
            Duration::from_secs(10),
        );
        f.deliver(Value::Null);
        tokio::time::sleep(Duration::from_millis(200)).await;
        f.deliver(Value::Null);
        tokio::time::sleep(Duration::from_secs(14)).await;
        assert_eq!(runs.load(Ordering::Relaxed), 1);
        assert_eq!(
            PipelineStats::get(&stats.throttles),
            4,
            "at 0.3, 1.3, 3.3 and 7.3 s"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            runs.load(Ordering::Relaxed),
            2,
            "the fourth try, at about 15 s"
        );
        assert_eq!(
            PipelineStats::get(&stats.cold_starts),
            1,
            "the first instance is warm again"
        );
        f.drain().await;

        let runs = Arc::new(AtomicUsize::new(0));
        let (f, stats, _stop) = function(
            1,
            Duration::from_secs(5),
            runs.clone(),
            Duration::from_secs(10),
        );
        f.deliver(Value::Null);
        tokio::time::sleep(Duration::from_millis(200)).await;
        f.deliver(Value::Null);
        f.drain().await;
        assert_eq!(runs.load(Ordering::Relaxed), 1);
        assert_eq!(
            PipelineStats::get(&stats.dropped),
            1,
            "too old after its third try"
        );
    }
}
