//! A scripted claimable index: what the corpus's selection reads. It
//! answers a read as `Store::claimable_heads_since` does (a page of at
//! least 16 entries, the filter after the page's limit, expired entries
//! shed on the way, on past `page` until `since` with newest-first reads),
//! each read taking the script's `read` ms of its clock; and it claims,
//! ends and supersedes tasks as the claim protocol would.

use super::script::{Outcome, TaskSpec};
use lifo_core::priority::{at_ms, floor};
use lifo_core::{Candidate, Order, StoreError};
use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Pages a read of one shard goes to at most (lifo-core's).
const CLAIM_READ_PAGES: usize = 8;

/// The first ms of every script.
pub const T0: u64 = 1_800_000_000_000;

#[derive(Debug, Clone)]
struct Entry {
    c: Candidate,
    retry_at: u64,
    /// When its write shows in the index (epoch ms).
    written_at: u64,
    key: Option<String>,
}

/// Why a claim failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Conflict,
    Superseded,
}

pub struct Index {
    entries: Mutex<BTreeMap<String, Entry>>,
    /// Claimed and running: the entry as it comes back if put back.
    taken: BTreeMap<String, Entry>,
    superseded: HashSet<String>,
    clock: AtomicU64,
    read_ms: u64,
    /// The reads made since [`Index::take_log`].
    log: Mutex<Vec<String>>,
}

/// `ms` (epoch) as an offset from [`T0`].
pub fn rel(ms: u64) -> i64 {
    ms as i64 - T0 as i64
}

impl Index {
    pub fn new(read_ms: u64) -> Self {
        Self {
            entries: Mutex::new(BTreeMap::new()),
            taken: BTreeMap::new(),
            superseded: HashSet::new(),
            clock: AtomicU64::new(T0),
            read_ms,
            log: Mutex::new(Vec::new()),
        }
    }

    pub fn now(&self) -> u64 {
        self.clock.load(Ordering::SeqCst)
    }

    /// Moves the clock to `at` (never back).
    pub fn advance_to(&self, at: u64) {
        self.clock.fetch_max(at, Ordering::SeqCst);
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut self.log.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn put(&mut self, spec: &TaskSpec) {
        let now = self.now();
        if let Some(key) = &spec.key {
            let older: Vec<String> = (self.entries().values())
                .chain(self.taken.values())
                .filter(|e| e.key.as_ref() == Some(key))
                .map(|e| e.c.task_id.clone())
                .collect::<Vec<_>>();
            for id in older {
                self.entries().remove(&id);
                self.superseded.insert(id);
            }
        }
        let stamp = (T0 as i64 + spec.stamp) as u64;
        let c = Candidate {
            expires_at: stamp / 1000 + spec.ttl_s,
            tenant: spec.tenant.clone(),
            ..Candidate::pending(&spec.id, spec.shard, spec.priority.key(stamp))
        };
        self.entries().insert(
            spec.id.clone(),
            Entry {
                c,
                retry_at: 0,
                written_at: now,
                key: spec.key.clone(),
            },
        );
    }

    pub fn remove(&mut self, id: &str) {
        self.entries().remove(id);
    }

    /// The conditional claim of `c` at `now`: the entry as read (its
    /// token), claimable, not expired.
    pub fn claim(&mut self, c: &Candidate, now: u64) -> Result<(), Refused> {
        let refused = match self.superseded.contains(&c.task_id) {
            true => Refused::Superseded,
            false => Refused::Conflict,
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let Some(e) = entries.get(&c.task_id) else {
            return Err(refused);
        };
        if e.c.token != c.token || e.retry_at > now || e.c.expires_at <= now / 1000 {
            return Err(refused);
        }
        let Some(mut e) = entries.remove(&c.task_id) else {
            return Err(refused);
        };
        e.c.token += 1;
        e.c.attempts += 1;
        self.taken.insert(c.task_id.clone(), e);
        Ok(())
    }

    /// A running task ends at `now`: gone, or put back to rest.
    pub fn end(&mut self, id: &str, outcome: Outcome, now: u64) {
        let Some(mut e) = self.taken.remove(id) else {
            return;
        };
        let rest = match outcome {
            Outcome::Ok => return,
            Outcome::Busy(rest) => {
                // The attempt is given back.
                e.c.attempts -= 1;
                rest
            }
            Outcome::Fail(rest) => rest,
        };
        if self.superseded.contains(id) {
            return;
        }
        e.retry_at = now + rest;
        e.written_at = now;
        self.entries().insert(id.to_owned(), e);
    }

    /// One shard's head, as `Store::shard_head` reads it.
    fn shard_head(
        &self,
        order: Order,
        shard: u32,
        want: usize,
        now: u64,
        horizon: u64,
        since: Option<u64>,
    ) -> (Vec<Candidate>, bool) {
        let mut all: Vec<Entry> = self
            .entries()
            .values()
            .filter(|e| {
                e.c.lifo_shard == shard && e.written_at <= now && e.c.claimable_at > floor(horizon)
            })
            .cloned()
            .collect();
        all.sort_by(|a, b| (a.c.claimable_at, &a.c.task_id).cmp(&(b.c.claimable_at, &b.c.task_id)));
        if order.newest_first() {
            all.reverse();
        }
        let page = want.max(16);
        let mut found = Vec::new();
        let mut pos = 0;
        let mut pages = 0;
        loop {
            let chunk = &all[pos.min(all.len())..(pos + page).min(all.len())];
            pos += page;
            pages += 1;
            let mut expired = 0;
            for e in chunk {
                let is_expired = e.c.expires_at <= now / 1000;
                if is_expired {
                    expired += 1;
                    self.entries().remove(&e.c.task_id);
                } else if e.retry_at <= now {
                    found.push(e.c.clone());
                }
            }
            let into_backlog = expired * 2 > chunk.len();
            // DynamoDB names where a page stopped when it read its limit.
            let start = (chunk.len() == page).then(|| chunk[chunk.len() - 1].c.claimable_at);
            let reached = since.is_none_or(|s| start.map(at_ms).is_some_and(|at| at <= s));
            if (reached && (found.len() >= want.div_ceil(2) || into_backlog))
                || start.is_none()
                || pages >= CLAIM_READ_PAGES
            {
                if since.is_some() {
                    return (found, start.is_none());
                }
                let complete = start.is_none() && found.len() <= want;
                found.truncate(want);
                return (found, complete);
            }
        }
    }

    /// A read of `shards`, logged, taking the script's read time.
    pub fn read(
        &self,
        order: Order,
        shards: &[u32],
        page: usize,
        now: u64,
        horizon: u64,
        since: Option<u64>,
    ) -> Vec<(Vec<Candidate>, bool)> {
        let since = since.filter(|_| order.newest_first());
        let way = if order.newest_first() {
            "newest"
        } else {
            "oldest"
        };
        let shards_text: Vec<String> = shards.iter().map(u32::to_string).collect();
        let since_text = since.map_or("-".to_owned(), |s| rel(s).to_string());
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!(
                "read {way} {} page={page} since={since_text}",
                shards_text.join(",")
            ));
        let out = shards
            .iter()
            .map(|s| self.shard_head(order, *s, page, now, horizon, since))
            .collect();
        self.advance_to(now + self.read_ms);
        out
    }
}

impl crate::reads::ClaimReads for Index {
    async fn heads_of(
        &self,
        read: &crate::select::Read,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<Vec<(Vec<Candidate>, bool)>, StoreError> {
        let r = read;
        Ok(self.read(r.order, &r.shards, r.page, now_ms, horizon_ms, r.since_ms))
    }
}
