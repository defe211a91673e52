use super::*;

/// The wall clock of the tests' rounds, epoch ms.
pub(crate) const NOW: u64 = 1_764_547_200_000;

/// Books `n` starts of `tenant` at `at` (epoch ms), still running.
pub(crate) fn started(l: &mut Ledger, tenant: &str, n: usize, at: u64) {
    for i in 0..n {
        l.start(&format!("{tenant}{i}"), tenant, at);
    }
}

/// Books `n` starts of `tenant` at `at` that have ended.
pub(crate) fn ran(l: &mut Ledger, tenant: &str, n: usize, at: u64) {
    started(l, tenant, n, at);
    for i in 0..n {
        l.end(&format!("{tenant}{i}"));
    }
}

/// Fills `n` slots from `waiting` (each tenant's times, newest first):
/// the tenant [`Shares::pick`] names gives its first.
fn fill(shares: &mut Shares, waiting: &[(&str, &[u64])], n: usize) -> Vec<String> {
    let mut left: Vec<(&str, Vec<u64>)> = waiting.iter().map(|(t, at)| (*t, at.to_vec())).collect();
    let mut out = Vec::new();
    while out.len() < n {
        let heads: Vec<(&str, i64)> = left
            .iter()
            .filter_map(|(t, at)| at.first().map(|at| (*t, Priority::Normal.key(*at))))
            .collect();
        let Some(t) = shares.pick(heads) else { break };
        if let Some((_, at)) = left.iter_mut().find(|(name, _)| *name == t) {
            at.remove(0);
        }
        shares.book(t);
        out.push(t.to_owned());
    }
    out
}

#[test]
fn a_tenant_alone_gets_every_slot() {
    let mut l = Ledger::new(None);
    ran(&mut l, "a", 20, NOW);
    let mut s = l.shares(["a"], NOW);
    let times: Vec<u64> = (0..10).map(|i| NOW - i).collect();
    assert_eq!(fill(&mut s, &[("a", &times)], 8).len(), 8);
}

#[test]
fn tenants_under_the_top_go_first_the_longest_waiting_first() {
    let mut l = Ledger::new(None);
    let t0 = NOW - 5_000;
    started(&mut l, "b", 6, t0);
    started(&mut l, "c", 1, t0);
    // Five seconds later: b was served six, c one (5 s ago), a none.
    // b floods (its newest is 10 ms old); a's newest waited 1 s, c's
    // 3 s. c first, then a; then a again (served less than c, both
    // just started); c; b only once nobody under the top waits.
    let mut s = l.shares(["b", "a", "c"], NOW);
    let b: Vec<u64> = (0..5).map(|i| NOW - 10 - i).collect();
    let got = fill(
        &mut s,
        &[
            ("b", &b),
            ("a", &[NOW - 1_000, NOW - 1_500]),
            ("c", &[NOW - 3_000, NOW - 3_500]),
        ],
        5,
    );
    assert_eq!(got, ["c", "a", "a", "c", "b"]);
    for i in 0..6 {
        l.end(&format!("b{i}"));
    }
    assert_eq!(l.running.get("b"), None);
    // A window later nobody was served lately: newest first.
    let later = t0 + WINDOW.as_millis() as u64;
    let mut s = l.shares(["b", "a"], later);
    assert_eq!(
        fill(&mut s, &[("b", &[later - 10]), ("a", &[later - 1_000])], 1),
        ["b"]
    );
}

#[test]
fn a_burst_of_one_tenant_under_the_top_does_not_hold_the_slots() {
    let mut l = Ledger::new(None);
    started(&mut l, "z", 30, NOW);
    let mut s = l.shares(["a", "c", "z"], NOW);
    // a wrote 20 tasks 2 s ago; c one task 1 s ago: after a's first
    // start, c's task has waited longer than a's just-served turn.
    let a: Vec<u64> = (0..20).map(|i| NOW - 2_000 - i).collect();
    let got = fill(&mut s, &[("a", &a), ("c", &[NOW - 1_000])], 3);
    assert_eq!(got, ["a", "c", "a"]);
}

/// `n` waiting per tenant.
fn counts(n: &[(&str, usize)]) -> HashMap<String, usize> {
    n.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect()
}

/// [`keeping_up`] with `l`'s flooding tenants, as a round finds them.
fn keeping(l: &Ledger, waiting: &HashMap<String, usize>) -> HashSet<String> {
    keeping_up(waiting, &l.flooding(waiting))
}

#[test]
fn a_tenant_with_few_waiting_keeps_up_while_another_floods() {
    let l = Ledger::new(None);
    // Nobody floods: nobody keeps up, each gives its first; with two
    // tenants nobody ever floods.
    assert!(keeping(&l, &counts(&[("a", 4), ("b", 1)])).is_empty());
    assert!(keeping(&l, &counts(&[("a", 1), ("b", 40)])).is_empty());
    let even = counts(&[("a", 3), ("b", 9), ("c", 8), ("d", 6)]);
    assert!(keeping(&l, &even).is_empty(), "backlogged alike");
    // b floods (20 of 29, past twice the mean): a, with four, keeps
    // up; c, with five, does not.
    let waiting = counts(&[("a", 4), ("b", 20), ("c", 5)]);
    assert_eq!(keeping(&l, &waiting), HashSet::from(["a".to_owned()]));
    // A tenant with few waiting but many running floods (64 of 89 in
    // all, past twice the mean): not keeping up.
    let mut l = Ledger::new(None);
    started(&mut l, "a", 60, NOW);
    assert!(keeping(&l, &waiting).is_empty());
}

#[test]
fn a_tenant_that_keeps_up_goes_first_at_the_top_its_oldest_by_age() {
    let mut l = Ledger::new(None);
    // All three served alike lately: all at the top.
    for t in ["a", "b", "f"] {
        ran(&mut l, t, 5, NOW - 2_000);
    }
    let waiting = counts(&[("a", 2), ("b", 3), ("f", 20)]);
    let s = l
        .shares(["a", "b", "f"], NOW)
        .with_keeping_up(keeping(&l, &waiting));
    assert!(s.keeps_up("a") && s.keeps_up("b") && !s.keeps_up("f"));
    assert!(s.favoured("a") && !s.favoured("f"));
    // a and b give their oldest (a's 1.5 s old, b's 0.8 s): a first,
    // though f's is newer and every one is at the top; without the
    // tenants that keep up, f's newest.
    let heads = [
        ("f", Priority::Normal.key(NOW - 10)),
        ("a", Priority::Normal.key(NOW - 1_500)),
        ("b", Priority::Normal.key(NOW - 800)),
    ];
    assert_eq!(s.pick(heads), Some("a"));
    assert_eq!(s.pick(heads[1..].iter().copied().rev()), Some("a"));
    let without = l.shares(["a", "b", "f"], NOW);
    assert_eq!(without.pick(heads), Some("f"));
}

#[test]
fn priorities_come_first_then_the_fair_share_within_each() {
    let mut l = Ledger::new(None);
    started(&mut l, "z", 10, NOW);
    let s = l.shares(["a", "c", "z"], NOW);
    // z is at the top, a and c under it; z's high-priority task goes first,
    // then, in the normal priority, the longest waiting under the top.
    let heads = [
        ("z", Priority::High.key(NOW - 10)),
        ("a", Priority::Normal.key(NOW - 100)),
        ("c", Priority::Normal.key(NOW - 9_000)),
    ];
    assert_eq!(s.pick(heads), Some("z"));
    assert_eq!(s.pick(heads[1..].iter().copied()), Some("c"));
    assert_eq!(s.pick([]), None);
}

#[test]
fn in_fifo_order_the_oldest_first_at_the_top() {
    let mut l = Ledger::new(None).in_order(Order::Fifo);
    started(&mut l, "a", 5, NOW);
    started(&mut l, "b", 5, NOW);
    // Both at the top: the one whose first candidate (its oldest, in
    // FIFO order) is older goes first; in LIFO, the newer.
    let heads = [
        ("a", Priority::Normal.key(NOW - 10)),
        ("b", Priority::Normal.key(NOW - 5_000)),
    ];
    assert_eq!(l.shares(["a", "b"], NOW).pick(heads), Some("b"));
    let mut l = l.in_order(Order::Lifo);
    assert_eq!(l.shares(["a", "b"], NOW).pick(heads), Some("a"));
}

#[test]
fn the_rate_is_shared_over_the_last_second() {
    let mut l = Ledger::new(Some(10));
    ran(&mut l, "a", 5, NOW);
    ran(&mut l, "b", 5, NOW);
    // Two tenants, 5 starts a second each; both used theirs. A third,
    // c, wants a slot: it goes first, though a's task is older and a
    // under the top would win on waiting time alone.
    let s = l.shares(["a", "b", "c"], NOW);
    let heads = [
        ("a", Priority::Normal.key(NOW - 5_000)),
        ("c", Priority::Normal.key(NOW - 10)),
    ];
    assert_eq!(s.pick(heads), Some("c"));
    // Past its rate, a still gets what nobody else wants.
    assert_eq!(
        s.pick([("a", Priority::Normal.key(NOW - 5_000))]),
        Some("a")
    );
    // A second later the starts have left the last second: both are
    // at the top, and the newest goes first.
    let s = l.shares(["a", "b"], NOW + 1_001);
    let heads = [
        ("a", Priority::Normal.key(NOW - 5_000)),
        ("b", Priority::Normal.key(NOW - 10)),
    ];
    assert_eq!(s.pick(heads), Some("b"));
}

#[test]
fn a_tenant_at_its_cap_waits_though_slots_are_free() {
    let mut l = Ledger::new(None).with_cap(Some(Cap::new(2, 5, None)));
    started(&mut l, "a", 1, NOW);
    let mut s = l.shares(["a"], NOW);
    let a: Vec<u64> = (0..10).map(|i| NOW - i).collect();
    // Five slots, one held by a: a gets one more, then waits.
    assert_eq!(fill(&mut s, &[("a", &a)], 4), ["a"]);
    assert!(s.capped("a"));
    // b is not capped by a's cap.
    assert_eq!(fill(&mut s, &[("a", &a), ("b", &[NOW])], 4), ["b"]);
    // Once a run of a ends, a may start again.
    l.end("a0");
    let mut s = l.shares(["a"], NOW + 10);
    assert_eq!(fill(&mut s, &[("a", &a)], 4), ["a", "a"]);
}

#[test]
fn the_cap_takes_its_share_of_the_rate_limit() {
    // 2 of 5 slots at 10 starts a second: 4 a second for the tenant.
    let cap = Cap::new(2, 5, Some(10));
    assert_eq!(cap.per_second, Some(4));
    assert_eq!(Cap::new(1, 5, Some(2)).per_second, Some(1));
    let mut l = Ledger::new(Some(10)).with_cap(Some(cap));
    ran(&mut l, "a", 4, NOW);
    let s = l.shares(["a"], NOW + 100);
    assert!(s.capped("a"));
    assert_eq!(s.pick([("a", Priority::Normal.key(NOW))]), None);
    let s = l.shares(["a"], NOW + 1_000);
    assert!(!s.capped("a"));
}

#[test]
fn flooding_is_more_than_twice_the_mean_and_a_tenant_alone_never_floods() {
    // Mean 4: 9 is past twice it.
    let load = [("flood", 9), ("a", 1), ("b", 1), ("c", 1), ("c", 0)];
    assert_eq!(flooding(load), ["flood".to_owned()].into());
    assert!(flooding([("a", 10), ("b", 10)]).is_empty());
    // Waiting and running count alike.
    let mut l = Ledger::new(None);
    started(&mut l, "f", 3, NOW);
    let waiting: HashMap<String, usize> = [
        ("f".to_owned(), 37),
        ("a".to_owned(), 1),
        ("b".to_owned(), 2),
    ]
    .into();
    let flooding = l.flooding(&waiting);
    assert_eq!(flooding, HashSet::from(["f".to_owned()]));
    let alone: HashMap<String, usize> = [("f".to_owned(), 37)].into();
    assert!(l.flooding(&alone).is_empty());
    let even: HashMap<String, usize> = [("f".to_owned(), 1), ("a".to_owned(), 4)].into();
    assert!(l.flooding(&even).is_empty());
    // Starts are booked as flooding while the tenant floods.
    l.observe(flooding, Some(120));
    l.start("f9", "f", NOW);
    l.start("a1", "a", NOW);
    l.observe(HashSet::new(), Some(80));
    assert_eq!(
        l.fairness(),
        Fairness {
            starts: 5,
            flooding_starts: 1,
            quiet_oldest_age_ms: Some(120)
        }
    );
}
