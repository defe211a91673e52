//! The scenario scripts of the corpus (`tests/corpus/*.txt`): a workload
//! and the configurations to run it under. One line each:
//!
//! - `configs: lifo fifo+share adaptive+cap2 …` (an order, then `+share`,
//!   `+capN` (the per-tenant cap, with the share), `+rateN` (starts a
//!   second));
//! - `slots: N`, `shards: 0 1 …`, `run: MS` (how long a run holds its slot),
//!   `read: MS` (how long a read takes), `busy-every: N rest=MS` and
//!   `fail-every: N rest=MS` (every Nth start ends so, resting MS);
//! - `@T put IDS [tenant=] [shard=] [stamp=±MS] [step=±MS] [ttl=S]
//!   [prio=high|low] [key=K]`: tasks written at `T` ms, stamped `stamp`
//!   from `T` (each next one `step` further); `IDS` may hold one range,
//!   `f{01..20}`; a `key` supersedes the task written before with it;
//! - `@T remove IDS`: claimed or cancelled elsewhere;
//! - `@T fill [tokens=N]`: the claim loop fills its free slots (with `N`
//!   starts left in the rate limit's bucket); `@T fills every=MS until=T2
//!   [tokens=N]`: one each `MS` ms;
//! - `@T end ID ok|busy=MS|fail=MS`: a running task ends;
//! - `@T tail [hop=MS]`: the invocation ends, and the next begins `MS`
//!   later with what it handed over.
//!
//! At equal times, events run in the order written.

use lifo_core::Order;
use lifo_core::priority::Priority;

/// One configuration a script runs under.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub label: String,
    pub order: Order,
    pub share: bool,
    pub cap: Option<u32>,
    pub rate: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskSpec {
    pub id: String,
    pub shard: u32,
    /// When it was stamped, ms from the script's start.
    pub stamp: i64,
    pub ttl_s: u64,
    pub priority: Priority,
    pub tenant: Option<String>,
    pub key: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Put back, the attempt given back, resting this long (ms).
    Busy(u64),
    /// Put back after a failure, resting this long (ms).
    Fail(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Put(Vec<TaskSpec>),
    Remove(Vec<String>),
    Fill { tokens: Option<usize> },
    End { id: String, outcome: Outcome },
    Tail { hop: u64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// ms from the script's start.
    pub at: u64,
    pub op: Op,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    pub configs: Vec<Config>,
    pub slots: usize,
    pub shards: Vec<u32>,
    pub run_ms: u64,
    pub read_ms: u64,
    pub busy_every: Option<(u64, u64)>,
    pub fail_every: Option<(u64, u64)>,
    pub events: Vec<Event>,
}

fn config(label: &str) -> Result<Config, String> {
    let mut parts = label.split('+');
    let order = parts.next().unwrap_or("").parse::<Order>()?;
    let mut c = Config {
        label: label.to_owned(),
        order,
        share: false,
        cap: None,
        rate: None,
    };
    for p in parts {
        if p == "share" {
            c.share = true;
        } else if let Some(n) = p.strip_prefix("cap") {
            c.cap = Some(n.parse().map_err(|_| format!("{label}: cap"))?);
            c.share = true;
        } else if let Some(n) = p.strip_prefix("rate") {
            c.rate = Some(n.parse().map_err(|_| format!("{label}: rate"))?);
        } else {
            return Err(format!("{label}: unknown {p}"));
        }
    }
    Ok(c)
}

/// `f{01..20}` as f01 … f20 (the width of the first bound kept).
fn ids(word: &str) -> Result<Vec<String>, String> {
    let Some((head, rest)) = word.split_once('{') else {
        return Ok(vec![word.to_owned()]);
    };
    let (range, tail) = rest.split_once('}').ok_or(format!("{word}: no }}"))?;
    let (from, to) = range.split_once("..").ok_or(format!("{word}: no .."))?;
    let width = from.len();
    let (from, to): (u64, u64) = (
        from.parse().map_err(|_| format!("{word}: from"))?,
        to.parse().map_err(|_| format!("{word}: to"))?,
    );
    Ok((from..=to)
        .map(|i| format!("{head}{i:0width$}{tail}"))
        .collect())
}

fn number<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, String> {
    v.parse().map_err(|_| format!("{key}={v}: not a number"))
}

/// `key=value` words after the first `n` words of `words`.
fn options<'a>(words: &[&'a str]) -> Vec<(&'a str, &'a str)> {
    words.iter().filter_map(|w| w.split_once('=')).collect()
}

fn put(at: u64, words: &[&str]) -> Result<Op, String> {
    let mut names = Vec::new();
    for w in words.iter().take_while(|w| !w.contains('=')) {
        names.extend(ids(w)?);
    }
    let (mut shard, mut stamp, mut step, mut ttl_s) = (0u32, 0i64, 0i64, 3600u64);
    let (mut priority, mut tenant, mut key) = (Priority::Normal, None, None);
    for (k, v) in options(words) {
        match k {
            "shard" => shard = number(k, v)?,
            "stamp" => stamp = number(k, v)?,
            "step" => step = number(k, v)?,
            "ttl" => ttl_s = number(k, v)?,
            "prio" => {
                priority = match v {
                    "high" => Priority::High,
                    "low" => Priority::Low,
                    _ => Priority::Normal,
                }
            }
            "tenant" => tenant = Some(v.to_owned()),
            "key" => key = Some(v.to_owned()),
            _ => return Err(format!("put: unknown {k}")),
        }
    }
    let many = names.len() > 1;
    Ok(Op::Put(
        names
            .into_iter()
            .enumerate()
            .map(|(i, id)| TaskSpec {
                id,
                shard,
                stamp: at as i64 + stamp + step * i as i64,
                ttl_s,
                priority,
                tenant: tenant.clone(),
                key: key.as_ref().map(|k| match many {
                    true => format!("{k}-{i}"),
                    false => k.clone(),
                }),
            })
            .collect(),
    ))
}

fn rest(words: &[&str], what: &str) -> Result<(u64, u64), String> {
    let every = number(what, words.first().ok_or(format!("{what}: N"))?)?;
    let rest = options(words)
        .into_iter()
        .find(|(k, _)| *k == "rest")
        .ok_or(format!("{what}: rest="))?;
    Ok((every, number("rest", rest.1)?))
}

/// Parses a script.
pub fn parse(text: &str) -> Result<Script, String> {
    let mut s = Script {
        configs: Vec::new(),
        slots: 3,
        shards: vec![0],
        run_ms: 200,
        read_ms: 10,
        busy_every: None,
        fail_every: None,
        events: Vec::new(),
    };
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at_line = |e: String| format!("line {}: {e}", n + 1);
        let words: Vec<&str> = line.split_whitespace().collect();
        let first = words[0];
        let rest_words = &words[1..];
        if let Some(at) = first.strip_prefix('@') {
            let at: u64 = number("@", at).map_err(at_line)?;
            let op = rest_words.first().copied().unwrap_or("");
            let args = rest_words.get(1..).unwrap_or(&[]);
            let opts = options(args);
            let opt = |k: &str| opts.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
            let tokens = match opt("tokens") {
                Some(v) => Some(number("tokens", v).map_err(at_line)?),
                None => None,
            };
            match op {
                "put" => s.events.push(Event {
                    at,
                    op: put(at, args).map_err(at_line)?,
                }),
                "remove" => {
                    let mut names = Vec::new();
                    for w in args {
                        names.extend(ids(w).map_err(at_line)?);
                    }
                    s.events.push(Event {
                        at,
                        op: Op::Remove(names),
                    });
                }
                "fill" => s.events.push(Event {
                    at,
                    op: Op::Fill { tokens },
                }),
                "fills" => {
                    let every: u64 =
                        number("every", opt("every").unwrap_or("")).map_err(at_line)?;
                    let until: u64 =
                        number("until", opt("until").unwrap_or("")).map_err(at_line)?;
                    let mut t = at;
                    while t <= until {
                        s.events.push(Event {
                            at: t,
                            op: Op::Fill { tokens },
                        });
                        t += every.max(1);
                    }
                }
                "end" => {
                    let id = args.first().ok_or(at_line("end: ID".into()))?;
                    let how = args.get(1).copied().unwrap_or("ok");
                    let outcome = match how.split_once('=') {
                        None => Outcome::Ok,
                        Some(("busy", ms)) => Outcome::Busy(number("busy", ms).map_err(at_line)?),
                        Some(("fail", ms)) => Outcome::Fail(number("fail", ms).map_err(at_line)?),
                        Some(_) => return Err(at_line(format!("end: {how}"))),
                    };
                    s.events.push(Event {
                        at,
                        op: Op::End {
                            id: (*id).to_owned(),
                            outcome,
                        },
                    });
                }
                "tail" => s.events.push(Event {
                    at,
                    op: Op::Tail {
                        hop: match opt("hop") {
                            Some(v) => number("hop", v).map_err(at_line)?,
                            None => 100,
                        },
                    },
                }),
                other => return Err(at_line(format!("unknown event {other}"))),
            }
            continue;
        }
        let value = rest_words.first().copied().unwrap_or("");
        match first {
            "configs:" => {
                for w in rest_words {
                    s.configs.push(config(w).map_err(at_line)?);
                }
            }
            "slots:" => s.slots = number("slots", value).map_err(at_line)?,
            "shards:" => {
                s.shards = rest_words
                    .iter()
                    .map(|w| number("shards", w))
                    .collect::<Result<_, _>>()
                    .map_err(at_line)?
            }
            "run:" => s.run_ms = number("run", value).map_err(at_line)?,
            "read:" => s.read_ms = number("read", value).map_err(at_line)?,
            "busy-every:" => s.busy_every = Some(rest(rest_words, "busy-every").map_err(at_line)?),
            "fail-every:" => s.fail_every = Some(rest(rest_words, "fail-every").map_err(at_line)?),
            other => return Err(at_line(format!("unknown setting {other}"))),
        }
    }
    // Stable: at equal times, in the order written.
    s.events.sort_by_key(|e| e.at);
    Ok(s)
}
