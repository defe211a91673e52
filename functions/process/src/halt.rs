//! A graceful stop of a processor by the program that hosts it (the local
//! stack's `lifo local up` on SIGTERM; Lambda never asks). Once
//! [`Halt::stop`] is called, every invocation claims nothing more, finishes
//! what it runs and ends without a tail call; [`Halt::running`] is how many
//! tasks run meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::watch;

/// Shared by a processor and its host (clones are the same halt).
#[derive(Debug, Clone)]
pub struct Halt {
    stop: Arc<watch::Sender<bool>>,
    running: Arc<AtomicUsize>,
}

impl Default for Halt {
    fn default() -> Self {
        Self {
            stop: Arc::new(watch::channel(false).0),
            running: Arc::default(),
        }
    }
}

impl Halt {
    /// Claim nothing more; what runs finishes.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    pub fn is_stopped(&self) -> bool {
        *self.stop.borrow()
    }

    /// Resolves once [`Halt::stop`] was called (at once if it was).
    pub async fn stopped(&self) {
        let mut rx = self.stop.subscribe();
        let _ = rx.wait_for(|stopped| *stopped).await;
    }

    /// Tasks claimed and not finished now, across the processor's
    /// invocations (a run cut short counts until its handling is dropped).
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    /// Counts one task as running until the guard is dropped.
    pub(crate) fn enter(&self) -> Running {
        self.running.fetch_add(1, Ordering::Relaxed);
        Running(self.running.clone())
    }
}

/// One running task, counted in [`Halt::running`] while it lives.
#[derive(Debug)]
pub(crate) struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_is_seen_by_every_clone_and_running_tasks_are_counted() {
        let halt = Halt::default();
        let other = halt.clone();
        let (a, b) = (halt.enter(), other.enter());
        assert_eq!(halt.running(), 2);
        drop(a);
        assert_eq!(other.running(), 1);
        assert!(!other.is_stopped());
        let waiter = tokio::spawn({
            let other = other.clone();
            async move { other.stopped().await }
        });
        halt.stop();
        waiter.await.unwrap();
        assert!(other.is_stopped());
        other.stopped().await;
        drop(b);
        assert_eq!(halt.running(), 0);
    }
}
