//! Where the nine's late tasks waited: for each task of the nine that
//! started later than a bar (the ideal + overhead's p95), the starts made
//! while it waited, by whom, in the real run and in the ideal for the same
//! arrivals. The p95 says how late; this says why: a flooder's start
//! while a quiet task waits is a slot the share gave away, one of the
//! nine's tasks written after it is the order across the nine, and its own
//! tenant's newer task is newest first within a tenant.

/// One task of a run, times in ms from the run's start.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub tenant: String,
    pub flooder: bool,
    pub ready: u64,
    /// Its start in the real run (`None`: never started).
    pub real: Option<u64>,
    /// Its start in the ideal (`None`: shed there).
    pub ideal: Option<u64>,
}

/// Starts made while a late task waited, per late task.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Starts {
    /// Of the flooding tenants.
    pub flooders: f64,
    /// Of the nine, written before the late task.
    pub nine_before: f64,
    /// Of the nine (other tenants), written after it.
    pub nine_after: f64,
    /// Of its own tenant, written after it.
    pub own_newer: f64,
}

/// The nine's late tasks of one run, and the starts while they waited.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Late {
    /// Tasks of the nine that started past the bar while tasks arrived.
    pub tasks: usize,
    /// Their mean wait (ms), real and in the ideal.
    pub wait_ms: (u64, u64),
    pub real: Starts,
    pub ideal: Starts,
}

/// The starts of `entries` within (`from`, `to`), as `start` gives them,
/// by whom relative to `late`.
fn starts_within(
    entries: &[Entry],
    late: &Entry,
    from: u64,
    to: u64,
    start: impl Fn(&Entry) -> Option<u64>,
) -> Starts {
    let mut s = Starts::default();
    for o in entries {
        if std::ptr::eq(o, late) || !start(o).is_some_and(|at| at > from && at < to) {
            continue;
        }
        if o.flooder {
            s.flooders += 1.0;
        } else if o.ready < late.ready {
            s.nine_before += 1.0;
        } else if o.tenant == late.tenant {
            s.own_newer += 1.0;
        } else {
            s.nine_after += 1.0;
        }
    }
    s
}

fn add(a: &mut Starts, b: Starts) {
    a.flooders += b.flooders;
    a.nine_before += b.nine_before;
    a.nine_after += b.nine_after;
    a.own_newer += b.own_newer;
}

fn per(a: Starts, n: usize) -> Starts {
    let n = n.max(1) as f64;
    Starts {
        flooders: a.flooders / n,
        nine_before: a.nine_before / n,
        nine_after: a.nine_after / n,
        own_newer: a.own_newer / n,
    }
}

/// The tasks of the nine written while tasks arrive (before `end_ms`)
/// that started more than `bar_ms` after they were written, and what
/// started while each waited: in the real run until its real start, in
/// the ideal until its ideal start (a task shed in the ideal counts only
/// on the real side).
pub fn waits(entries: &[Entry], bar_ms: u64, end_ms: u64) -> Late {
    // Each late task with its real start.
    let late: Vec<(&Entry, u64)> = entries
        .iter()
        .filter(|t| !t.flooder && t.ready <= end_ms)
        .filter_map(|t| Some((t, t.real?)))
        .filter(|(t, started)| started.saturating_sub(t.ready) > bar_ms)
        .collect();
    let (mut real, mut ideal) = (Starts::default(), Starts::default());
    let (mut real_wait, mut ideal_wait, mut in_ideal) = (0, 0, 0);
    for &(t, started) in &late {
        real_wait += started - t.ready;
        add(
            &mut real,
            starts_within(entries, t, t.ready, started, |e| e.real),
        );
        if let Some(at) = t.ideal {
            ideal_wait += at.saturating_sub(t.ready);
            in_ideal += 1;
            add(
                &mut ideal,
                starts_within(entries, t, t.ready, at, |e| e.ideal),
            );
        }
    }
    Late {
        tasks: late.len(),
        wait_ms: (
            real_wait / late.len().max(1) as u64,
            ideal_wait / in_ideal.max(1) as u64,
        ),
        real: per(real, late.len()),
        ideal: per(ideal, in_ideal),
    }
}

/// Each seed's late tasks as a table (nothing without any).
pub fn table(seeds: &[(u64, Late)]) -> String {
    if seeds.is_empty() {
        return String::new();
    }
    let mut out = "\nShare on: the nine's tasks later than the ideal + overhead's p95, and the \
                   starts made while each waited, per late task (real / ideal, for the same \
                   tasks):\n\n\
                   | seed | late tasks | mean wait | flooders' starts | the nine's, written before it | \
                   the nine's, written after it | its own tenant's newer |\n\
                   |---:|---:|---:|---:|---:|---:|---:|\n"
        .to_owned();
    let pair = |a: f64, b: f64| format!("{a:.1} / {b:.1}");
    for (seed, l) in seeds {
        out.push_str(&format!(
            "| {seed} | {} | {} / {} ms | {} | {} | {} | {} |\n",
            l.tasks,
            l.wait_ms.0,
            l.wait_ms.1,
            pair(l.real.flooders, l.ideal.flooders),
            pair(l.real.nine_before, l.ideal.nine_before),
            pair(l.real.nine_after, l.ideal.nine_after),
            pair(l.real.own_newer, l.ideal.own_newer),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(tenant: &str, ready: u64, real: Option<u64>, ideal: Option<u64>) -> Entry {
        Entry {
            tenant: tenant.into(),
            flooder: tenant.starts_with("flooder"),
            ready,
            real,
            ideal,
        }
    }

    #[test]
    fn a_late_task_counts_who_started_while_it_waited_in_the_run_and_in_the_ideal() {
        let entries = vec![
            // Late: waited 1,000 ms here, 100 in the ideal.
            task("a", 100, Some(1_100), Some(200)),
            task("b", 50, Some(300), Some(150)), // the nine, before it
            task("c", 200, Some(400), Some(250)), // the nine, after it (ideal: after a's start)
            task("a", 300, Some(500), Some(350)), // its own tenant's newer task
            task("flooder-1", 400, Some(600), None), // a flooder; shed in the ideal
            task("flooder-1", 500, Some(1_200), Some(900)), // after a started
            task("d", 5_000, Some(9_000), Some(5_100)), // late, but written after the end
        ];
        let late = waits(&entries, 500, 4_000);
        assert_eq!(late.tasks, 1);
        assert_eq!(late.wait_ms, (1_000, 100));
        assert_eq!(
            late.real,
            Starts {
                flooders: 1.0,
                nine_before: 1.0,
                nine_after: 1.0,
                own_newer: 1.0
            }
        );
        assert_eq!(
            late.ideal,
            Starts {
                nine_before: 1.0,
                ..Starts::default()
            }
        );
        // Nothing late: zeros, not a division by zero.
        assert_eq!(waits(&entries, 5_000, 4_000), Late::default());
        let t = table(&[(3, late)]);
        assert!(
            t.contains("| 3 | 1 | 1000 / 100 ms | 1.0 / 0.0 | 1.0 / 1.0 | 1.0 / 0.0 | 1.0 / 0.0 |"),
            "{t}"
        );
        assert_eq!(table(&[]), "");
    }
}
