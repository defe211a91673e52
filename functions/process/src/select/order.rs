//! The orders at the bottom of a stack: the shards' heads merged newest
//! first ([`Lifo`], the queue this project is) or oldest first ([`Fifo`],
//! for comparison). Each reads what its heads need and picks in its
//! order.

use super::heads::{Heads, HeadsPolicy};
use super::{Ask, Event, Read, Select};
use lifo_core::{Candidate, Order};

/// An order that picks the heads' merge as it stands.
macro_rules! merge_order {
    ($name:ident, $order:expr) => {
        pub struct $name(Heads);

        impl $name {
            pub fn new(shards: Vec<u32>, policy: HeadsPolicy) -> Self {
                Self(Heads::new($order, shards, policy))
            }
        }

        impl Select for $name {
            fn next_read(&mut self, ask: &Ask<'_>, now: u64) -> Option<Read> {
                if ask.reads > 0 {
                    return None;
                }
                self.0.read_of(self.0.to_read(ask.want, ask.exclude, now))
            }

            fn pick(
                &mut self,
                ask: &Ask<'_>,
                admit: &mut dyn FnMut(&Candidate) -> bool,
                _now: u64,
            ) -> Vec<Candidate> {
                self.0.pick(ask, admit)
            }

            fn tell(&mut self, event: Event<'_>, now: u64) {
                self.0.tell(event, now)
            }

            fn heads(&self) -> &Heads {
                &self.0
            }

            fn heads_mut(&mut self) -> &mut Heads {
                &mut self.0
            }
        }
    };
}

merge_order!(Lifo, Order::Lifo);
merge_order!(Fifo, Order::Fifo);

#[cfg(test)]
mod tests {
    use super::super::heads::c;
    use super::super::{Ids, Purpose};
    use super::*;

    const NOW: u64 = 1_800_000_000_000;

    /// Reads for `s` as the claim loop does, from `shard0` (complete), and
    /// picks `want`.
    fn refill(s: &mut dyn Select, shard0: &[Candidate], want: usize, now: u64) -> Vec<String> {
        let none = Ids::new();
        let mut ask = Ask {
            want,
            exclude: &none,
            reads: 0,
        };
        while let Some(read) = s.next_read(&ask, now) {
            assert_eq!(read.purpose, Purpose::Heads { whole: true });
            let heads = [(shard0.to_vec(), true)];
            s.tell(
                Event::Read {
                    read: &read,
                    sent_ms: now,
                    heads: &heads,
                },
                now,
            );
            ask.reads += 1;
        }
        let got = s.pick(&ask, &mut |_| true, now);
        got.into_iter().map(|c| c.task_id).collect()
    }

    #[test]
    fn lifo_picks_the_newest_fifo_the_oldest_reading_once_a_refill() {
        let policy = HeadsPolicy::new(1, 2);
        let newest = [c("c", 3), c("b", 2), c("a", 1)];
        let mut lifo = Lifo::new(vec![0], policy);
        assert_eq!(refill(&mut lifo, &newest, 2, NOW), ["c", "b"]);
        // Served from the heads: no read until they are spent or old.
        assert_eq!(lifo.heads().reads(), 1);
        assert_eq!(refill(&mut lifo, &[], 1, NOW + 10), ["a"]);
        assert_eq!(lifo.heads().reads(), 1);
        let oldest = [c("a", 1), c("b", 2), c("c", 3)];
        let mut fifo = Fifo::new(vec![0], policy);
        assert_eq!(refill(&mut fifo, &oldest, 2, NOW), ["a", "b"]);
        assert_eq!(
            fifo.next_read(
                &Ask {
                    want: 1,
                    exclude: &Ids::new(),
                    reads: 0
                },
                NOW
            ),
            None
        );
        // A pick not started goes back in its place.
        let back = c("a", 1);
        fifo.tell(Event::NotStarted(&back), NOW);
        assert_eq!(refill(&mut fifo, &[], 2, NOW), ["a", "c"]);
    }
}
