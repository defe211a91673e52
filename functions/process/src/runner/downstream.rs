//! A simulated downstream that behaves like one under load: a capacity in
//! concurrent runs that follows a schedule, runs past it queued inside it
//! (oldest first) and so slower, a 429 past its queue's bound, and a
//! timeout on each run as its client sets one. [`super::SimulatedRunner`]
//! runs through it when given one (`lifo simulate --downstream-capacity`).
//! Time is tokio's, so a test on a paused clock is exact.

use super::RunOutcome;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The downstream's capacity over time: `(from, runs at once)`, the first
/// from 0, ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule(Vec<(Duration, usize)>);

impl Schedule {
    pub fn constant(capacity: usize) -> Self {
        Self(vec![(Duration::ZERO, capacity.max(1))])
    }

    /// `10,4@30s,10@60s`: 10 runs at once, 4 from 30 s on, 10 again from
    /// 60 s; a time is `30s`, `1500ms` or `2m`, each later than the last.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut steps: Vec<(Duration, usize)> = Vec::new();
        for (i, entry) in text.split(',').enumerate() {
            let entry = entry.trim();
            let at = |why: &str| format!("entry {} ({entry:?}): {why}", i + 1);
            let (cap, from) = match entry.split_once('@') {
                Some((c, t)) => (c, Some(t.trim())),
                None => (entry, None),
            };
            let cap: usize = cap
                .trim()
                .parse()
                .ok()
                .filter(|c| (1..=1000).contains(c))
                .ok_or_else(|| at("the capacity must be a whole number from 1 to 1000"))?;
            let from = match (i, from) {
                (0, None) => Duration::ZERO,
                (0, Some(_)) => return Err(at("the first capacity holds from the start: no @")),
                (_, None) => return Err(at("a later capacity needs @TIME, e.g. 4@30s")),
                (_, Some(t)) => duration(t).ok_or_else(|| {
                    at("the time must be a number with a unit: 30s, 1500ms or 2m")
                })?,
            };
            if let Some((last, _)) = steps.last()
                && from <= *last
            {
                return Err(at("each time must be later than the one before"));
            }
            steps.push((from, cap));
        }
        Ok(Self(steps))
    }

    /// Runs at once `t` after the start.
    pub fn at(&self, t: Duration) -> usize {
        self.0
            .iter()
            .take_while(|(from, _)| *from <= t)
            .last()
            .map_or(1, |(_, c)| *c)
    }

    /// The first change after `t`.
    pub fn next_change(&self, t: Duration) -> Option<Duration> {
        self.0.iter().map(|(from, _)| *from).find(|from| *from > t)
    }

    pub fn steps(&self) -> &[(Duration, usize)] {
        &self.0
    }
}

/// A time as 30s, 1500ms or 2m (non-negative, under 10^7 s); `None`
/// otherwise.
pub fn duration(t: &str) -> Option<Duration> {
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        return None;
    };
    let v: f64 = number.parse().ok()?;
    (v.is_finite() && v >= 0.0 && v * scale < 1e7).then(|| Duration::from_secs_f64(v * scale))
}

/// How a run at the downstream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    Done,
    /// Its queue was full: 429.
    Refused,
    TimedOut,
}

/// One run, as the downstream saw it (ms from its start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub started_ms: u64,
    pub ended_ms: u64,
    pub served: Served,
}

#[derive(Debug, Default)]
struct State {
    busy: usize,
    next_ticket: u64,
    waiting: BTreeSet<u64>,
}

/// The downstream: [`Schedule`], at most `queue` runs waiting, each run
/// given up after `timeout`.
#[derive(Debug)]
pub struct Downstream {
    schedule: Schedule,
    queue: usize,
    timeout: Duration,
    origin: Mutex<Instant>,
    state: Mutex<State>,
    freed: Notify,
    runs: Mutex<Vec<Run>>,
}

impl Downstream {
    pub fn new(schedule: Schedule, queue: usize, timeout: Duration) -> Self {
        Self {
            schedule,
            queue,
            timeout,
            origin: Mutex::new(Instant::now()),
            state: Mutex::new(State::default()),
            freed: Notify::new(),
            runs: Mutex::new(Vec::new()),
        }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// Every run so far, in the order they ended.
    pub fn runs(&self) -> Vec<Run> {
        self.runs.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Starts its schedule (and its runs' times) over from now: a run
    /// that warms up first begins the schedule when its load does.
    pub fn start_now(&self) {
        if let Ok(mut o) = self.origin.lock() {
            *o = Instant::now();
        }
    }

    fn origin(&self) -> Instant {
        self.origin.lock().map_or_else(|_| Instant::now(), |o| *o)
    }

    fn capacity_now(&self) -> usize {
        self.schedule.at(self.origin().elapsed())
    }

    fn ms(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin()).as_millis()).unwrap_or(u64::MAX)
    }

    /// Serves a run that takes `service` once it has a slot.
    pub async fn run(&self, service: Duration) -> RunOutcome {
        let started = Instant::now();
        let (outcome, served) = self.serve(service, started).await;
        if let Ok(mut runs) = self.runs.lock() {
            runs.push(Run {
                started_ms: self.ms(started),
                ended_ms: self.ms(Instant::now()),
                served,
            });
        }
        outcome
    }

    async fn serve(&self, service: Duration, started: Instant) -> (RunOutcome, Served) {
        let ticket = {
            let Ok(mut s) = self.state.lock() else {
                return (RunOutcome::RetryLater("HTTP 503".into()), Served::Refused);
            };
            if s.waiting.is_empty() && s.busy < self.capacity_now() {
                s.busy += 1;
                None
            } else if s.waiting.len() >= self.queue {
                let why = format!(
                    "HTTP 429: {} runs waiting, the most it queues",
                    s.waiting.len()
                );
                return (RunOutcome::RetryLater(why), Served::Refused);
            } else {
                s.next_ticket += 1;
                let t = s.next_ticket;
                s.waiting.insert(t);
                Some(t)
            }
        };
        let mut turn = Turn {
            downstream: self,
            ticket,
            serving: ticket.is_none(),
        };
        let work = async {
            if let Some(t) = ticket {
                turn.wait(t).await;
            }
            tokio::time::sleep(service).await;
        };
        match tokio::time::timeout_at(started + self.timeout, work).await {
            Ok(()) => (RunOutcome::Success, Served::Done),
            Err(_) => (
                RunOutcome::TimedOut(format!("timed out after {:?}", self.timeout)),
                Served::TimedOut,
            ),
        }
    }
}

/// A run's place: waiting (its ticket) or serving (a slot); given back
/// when the run ends or is given up.
struct Turn<'a> {
    downstream: &'a Downstream,
    ticket: Option<u64>,
    serving: bool,
}

impl Turn<'_> {
    /// Waits until `ticket` is the oldest waiting and a slot is free.
    async fn wait(&mut self, ticket: u64) {
        let d = self.downstream;
        loop {
            let freed = d.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Ok(mut s) = d.state.lock()
                && s.waiting.first() == Some(&ticket)
                && s.busy < d.capacity_now()
            {
                s.waiting.remove(&ticket);
                s.busy += 1;
                self.serving = true;
                // The next in line may fit too.
                d.freed.notify_waiters();
                return;
            }
            let origin = d.origin();
            match d.schedule.next_change(origin.elapsed()) {
                Some(at) => {
                    tokio::select! {
                        _ = freed => {}
                        _ = tokio::time::sleep_until(origin + at) => {}
                    }
                }
                None => freed.await,
            }
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let d = self.downstream;
        if let Ok(mut s) = d.state.lock() {
            if self.serving {
                s.busy -= 1;
            } else if let Some(t) = self.ticket {
                s.waiting.remove(&t);
            }
        }
        d.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts `n` runs of `service` at once; each one's (latency ms,
    /// outcome) in start order.
    async fn burst(d: &Downstream, n: usize, service: u64) -> Vec<(u64, String)> {
        let runs = (0..n).map(|_| async {
            let start = Instant::now();
            let out = d.run(Duration::from_millis(service)).await;
            let kind = match out {
                RunOutcome::Success => "ok".to_owned(),
                other => other.reason().to_owned(),
            };
            (start.elapsed().as_millis() as u64, kind)
        });
        futures::future::join_all(runs).await
    }

    #[tokio::test(start_paused = true)]
    async fn past_its_capacity_runs_queue_and_take_longer() {
        let d = Downstream::new(Schedule::constant(2), 10, Duration::from_secs(30));
        let got: Vec<u64> = burst(&d, 5, 100).await.iter().map(|r| r.0).collect();
        assert_eq!(got, [100, 100, 200, 200, 300]);
    }

    #[tokio::test(start_paused = true)]
    async fn past_its_queue_bound_it_answers_429() {
        let d = Downstream::new(Schedule::constant(1), 1, Duration::from_secs(30));
        let got = burst(&d, 3, 100).await;
        assert_eq!(got[0], (100, "ok".to_owned()));
        assert_eq!(got[1], (200, "ok".to_owned()));
        assert_eq!(
            got[2],
            (0, "HTTP 429: 1 runs waiting, the most it queues".to_owned())
        );
        let served: Vec<Served> = d.runs().iter().map(|r| r.served).collect();
        assert_eq!(served, [Served::Refused, Served::Done, Served::Done]);
    }

    #[tokio::test(start_paused = true)]
    async fn its_capacity_follows_the_schedule() {
        let schedule = Schedule::parse("1,3@150ms").unwrap();
        let d = Downstream::new(schedule, 10, Duration::from_secs(30));
        let got: Vec<u64> = burst(&d, 3, 100).await.iter().map(|r| r.0).collect();
        // One slot: 0–100, then 100–200; the third gets a slot at 150 ms.
        assert_eq!(got, [100, 200, 250]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_waiting_past_its_timeout_times_out_and_leaves_the_queue() {
        let d = Downstream::new(Schedule::constant(1), 10, Duration::from_millis(150));
        let got = burst(&d, 3, 100).await;
        assert_eq!(got[0], (100, "ok".to_owned()));
        assert_eq!(got[1], (150, "timed out after 150ms".to_owned()));
        assert_eq!(got[2], (150, "timed out after 150ms".to_owned()));
        // Nothing is left holding a slot or a place.
        assert_eq!(burst(&d, 1, 100).await[0], (100, "ok".to_owned()));
    }

    #[test]
    fn a_schedule_reads_capacities_and_times_and_says_what_is_wrong() {
        let s = Schedule::parse("10, 4@30s,10@1m").unwrap();
        assert_eq!(
            s.steps(),
            [
                (Duration::ZERO, 10),
                (Duration::from_secs(30), 4),
                (Duration::from_secs(60), 10)
            ]
        );
        assert_eq!(
            [0, 29, 30, 59, 60, 999].map(|t| s.at(Duration::from_secs(t))),
            [10, 10, 4, 4, 10, 10]
        );
        assert_eq!(
            Schedule::parse("2,3@1500ms").unwrap().steps()[1],
            (Duration::from_millis(1500), 3)
        );
        for (bad, why) in [
            (
                "0",
                "entry 1 (\"0\"): the capacity must be a whole number from 1 to 1000",
            ),
            (
                "4@5s",
                "entry 1 (\"4@5s\"): the first capacity holds from the start: no @",
            ),
            (
                "10,4",
                "entry 2 (\"4\"): a later capacity needs @TIME, e.g. 4@30s",
            ),
            (
                "10,4@30",
                "entry 2 (\"4@30\"): the time must be a number with a unit: 30s, 1500ms or 2m",
            ),
            (
                "10,4@30s,5@20s",
                "entry 3 (\"5@20s\"): each time must be later than the one before",
            ),
            (
                "10,",
                "entry 2 (\"\"): the capacity must be a whole number from 1 to 1000",
            ),
        ] {
            assert_eq!(Schedule::parse(bad).unwrap_err(), why, "{bad}");
        }
    }
}
