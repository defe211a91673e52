//! Latest wins per key, in the model ([`crate::store::supersede`]): a keyed
//! write reads the key's newest task and, in one step, writes the task,
//! points the key at it and ends the previous task (SUPERSEDED if PENDING,
//! marked if TAKEN, left if it already ended), or writes the task
//! SUPERSEDED when the key's newest is newer. The transaction's units are
//! counted against the partition limits but never refused by them.

use super::limits::Kind;
use super::{KeyItem, State, table};
use crate::expr::{Move, Step};
use crate::model::{Task, TaskStatus};
use crate::store::supersede::{KeyedWrite, arrived_superseded, decide, key_item_id};
use crate::store::{Keyed, Op, StoreError};

impl State {
    pub(super) fn put_keyed(&mut self, task: &Task, now_ms: u64) -> Result<Keyed, StoreError> {
        let Some(key) = task.supersede_key.as_deref() else {
            return Ok(Keyed {
                created: self.put_if_absent(task)?,
                ..Keyed::default()
            });
        };
        let id = task.task_id.as_str();
        // The store reads the key item first (strongly consistent).
        let key_item = table(&key_item_id(key));
        self.spend_read(&key_item, super::bill::get_units(None, true));
        let head = self.items.keys.get(key).map(|k| {
            // A key item older than `latestCreated`: its task's creation.
            let created = k
                .latest_created
                .or_else(|| self.items.tasks.get(&k.latest).map(|t| t.task_created));
            (k.latest.clone(), created)
        });
        let prev = match decide(
            head.as_ref().map(|(l, c)| (l.as_str(), *c)),
            (task.task_created, id),
        ) {
            KeyedWrite::Written => return Ok(Keyed::default()),
            KeyedWrite::ArrivesSuperseded(by) => {
                let created = self.put_if_absent(&arrived_superseded(task, &by, now_ms))?;
                return Ok(Keyed {
                    created,
                    arrived_superseded_by: created.then_some(by),
                    ..Keyed::default()
                });
            }
            KeyedWrite::Supersedes(prev) => prev,
        };
        // The transaction's first condition: the task's id is new.
        if self.items.tasks.contains_key(id) {
            return Ok(Keyed::default());
        }
        let mut done = Keyed {
            created: true,
            ..Keyed::default()
        };
        if let Some(p) = prev.as_deref()
            && let Some(t) = self.items.tasks.get(p)
            && t.supersede_key.as_deref() == Some(key)
        {
            match t.task_status {
                TaskStatus::Pending => {
                    let step = Step {
                        now_ms: task.task_created,
                        ..Step::default()
                    };
                    let ended = super::moves::apply(&Move::Supersede { by: id, key }, &step, t);
                    self.put(&ended, Op::Supersede, true)?;
                    done.superseded = Some(p.to_owned());
                }
                TaskStatus::Taken => {
                    let mut marked = t.clone();
                    marked.superseded_by = Some(id.to_owned());
                    self.put(&marked, Op::Supersede, true)?;
                    done.marked = Some(p.to_owned());
                }
                _ => {}
            }
        }
        self.put(task, Op::Supersede, true)?;
        // The key item, written in the same transaction.
        self.take(Kind::Write, &[(key_item, 1.0)], 2.0);
        if let Some(b) = &self.billing {
            b.spend(Op::Supersede, 2.0);
        }
        self.items.keys.insert(
            key.to_owned(),
            KeyItem {
                latest: id.to_owned(),
                latest_created: Some(task.task_created),
                delete_at: task.delete_at,
            },
        );
        Ok(done)
    }
}
