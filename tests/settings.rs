//! No setting the template accepts stops a function (issue 50, item 1).
//! CloudFormation's rules cannot compare numbers, so `ProcessorCount`
//! above `ShardCount`, `RunnerMaxPerSecond`, `TenantMaxInFlight` or
//! `RunnerMaxConcurrency` (and a `RunnerBurst` below it) deploy: each
//! function must still start, with what process clamped recorded. The grid
//! runs every `ProcessorCount` the template allows against the shard
//! counts, caps, rates, bursts and concurrencies around it, keeps the
//! combinations the template's bounds and rules accept, builds each
//! function's environment as template.yaml does, and starts each
//! function's settings from it.

use lifo_local::Template;
use std::collections::HashMap;

/// The functions whose settings come from the environment, and what
/// starting each reads.
const FUNCTIONS: [&str; 5] = [
    "CreateFunction",
    "TriggerFunction",
    "ProcessFunction",
    "SchedulerStartFunction",
    "ApiFunction",
];

/// The parameters the grid varies.
const GRID: [&str; 7] = [
    "ProcessorCount",
    "ShardCount",
    "TenantMaxInFlight",
    "TenantFairShare",
    "RunnerMaxPerSecond",
    "RunnerBurst",
    "RunnerMaxConcurrency",
];

/// A function's environment as template.yaml builds it, with each
/// parameter's `!Ref` left as `${Name}` and every resource a placeholder.
fn environment(template: &Template, function: &str) -> Vec<(String, String)> {
    template
        .function_environment(function, |r| Some(format!("${{{r}}}")))
        .unwrap()
}

/// `env` with `params` (else `defaults`) in place of each `${Name}`; a
/// resource stays a placeholder (a name or an ARN).
fn resolved(
    env: &[(String, String)],
    params: &HashMap<&str, String>,
    defaults: &HashMap<String, String>,
) -> HashMap<String, String> {
    env.iter()
        .map(|(k, v)| {
            let value = match v.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
                Some(name) => params
                    .get(name)
                    .or_else(|| defaults.get(name))
                    .cloned()
                    .unwrap_or_else(|| format!("arn:aws:local:{name}")),
                None => v.clone(),
            };
            (k.clone(), value)
        })
        .collect()
}

/// Whether the template's bounds (`ranges`) and rules accept `params`.
fn accepted(
    ranges: &HashMap<&str, std::ops::RangeInclusive<u64>>,
    params: &HashMap<&str, String>,
) -> bool {
    let in_range = params.iter().all(|(name, v)| {
        let (Ok(v), Some(range)) = (v.parse::<u64>(), ranges.get(name)) else {
            return true;
        };
        range.contains(&v)
    });
    // TenantCapNeedsTheFairShare.
    let rules = params["TenantMaxInFlight"] == "0" || params["TenantFairShare"] == "true";
    in_range && rules
}

/// Starts each function's settings from `env` as its main does; the
/// error names the function.
fn start(function: &str, env: &HashMap<String, String>) -> Result<usize, String> {
    let fail = |e: lifo_lambda::config::ConfigError| format!("{function}: {e}");
    match function {
        "CreateFunction" | "ApiFunction" => {
            lifo_ops::create::CreateConfig::from_source(env).map_err(fail)?;
            lifo_lambda::config::processor_count(env).map_err(fail)?;
        }
        "TriggerFunction" => {
            lifo_lambda::config::processor_count(env).map_err(fail)?;
            lifo_lambda::config::shard_count(env).map_err(fail)?;
            lifo_lambda::config::max_ttl_seconds(env).map_err(fail)?;
        }
        "ProcessFunction" => {
            let config = process::ProcessConfig::from_source(env).map_err(fail)?;
            let capacity =
                lifo_lambda::config::parsed(env, "RUNNER_MAX_CONCURRENCY", 3usize, 1..=1000)
                    .map_err(fail)?;
            let config = config.fit_capacity(capacity);
            // What each processor's share then is: never nothing.
            for g in 0..config.processors {
                let share = lifo_core::groups::share(capacity as u32, g, config.processors);
                if share == 0 {
                    return Err(format!("{function}: group {g} gets no slot"));
                }
                if let Some(limit) = config.rate_limit {
                    let rate =
                        lifo_core::groups::share(limit.per_second.get(), g, config.processors);
                    let burst = lifo_core::groups::share(limit.burst.get(), g, config.processors);
                    if rate == 0 || burst == 0 {
                        return Err(format!("{function}: group {g} gets no start a second"));
                    }
                }
                if let Some(cap) = config.tenant_max_in_flight {
                    let cap = lifo_core::groups::share(cap.get(), g, config.processors);
                    if cap == 0 {
                        return Err(format!("{function}: group {g} gets no slot of the cap"));
                    }
                }
            }
            if config.processors > config.shard_count {
                return Err(format!("{function}: a processor without a shard"));
            }
            return Ok(config.clamps.len());
        }
        "SchedulerStartFunction" => {
            scheduler_start::SchedulerConfig::from_source(env).map_err(fail)?;
        }
        other => return Err(format!("no start for {other}")),
    }
    Ok(0)
}

#[test]
fn every_setting_the_template_accepts_starts_every_function() {
    let template = Template::workspace().unwrap();
    let envs: Vec<(&str, Vec<(String, String)>)> = FUNCTIONS
        .iter()
        .map(|f| (*f, environment(&template, f)))
        .collect();
    let defaults: HashMap<String, String> = envs
        .iter()
        .flat_map(|(_, env)| env.iter())
        .filter_map(|(_, v)| v.strip_prefix("${")?.strip_suffix('}'))
        .filter_map(|name| Some((name.to_owned(), template.parameter_default(name).ok()?)))
        .collect();
    // The Number parameters' MinValue..=MaxValue (TenantFairShare has
    // AllowedValues, and the grid gives it only those).
    let ranges: HashMap<&str, std::ops::RangeInclusive<u64>> = GRID
        .iter()
        .filter_map(|name| Some((*name, template.parameter_range(name).ok()?)))
        .collect();
    // Each function starts once per combination of the grid's parameters
    // its environment names.
    let names: Vec<Vec<&str>> = envs
        .iter()
        .map(|(_, env)| {
            GRID.iter()
                .copied()
                .filter(|g| env.iter().any(|(_, v)| v == &format!("${{{g}}}")))
                .collect()
        })
        .collect();
    let mut started: Vec<std::collections::HashSet<Vec<String>>> =
        vec![Default::default(); envs.len()];
    let (mut tried, mut clamped) = (0usize, 0usize);
    for p in 1..=32u32 {
        let around = |n: u32| [1, n.saturating_sub(1).max(1), n, n + 1];
        for shards in [1, p.saturating_sub(1).max(1), p, p + 1, 100] {
            for cap in [0, 1, p / 2, p.saturating_sub(1), p, p + 1, 10_000] {
                let fair: &[&str] = if cap == 0 {
                    &["true", "false"]
                } else {
                    &["true"]
                };
                for fair in fair {
                    for rate in [0, 1000].into_iter().chain(around(p)) {
                        for burst in [1, p, 1000] {
                            for concurrency in around(p) {
                                let params: HashMap<&str, String> = HashMap::from([
                                    ("ProcessorCount", p.to_string()),
                                    ("ShardCount", shards.to_string()),
                                    ("TenantMaxInFlight", cap.to_string()),
                                    ("TenantFairShare", (*fair).to_owned()),
                                    ("RunnerMaxPerSecond", rate.to_string()),
                                    ("RunnerBurst", burst.to_string()),
                                    ("RunnerMaxConcurrency", concurrency.to_string()),
                                ]);
                                if !accepted(&ranges, &params) {
                                    continue;
                                }
                                tried += 1;
                                for (i, (function, env)) in envs.iter().enumerate() {
                                    let key: Vec<String> =
                                        names[i].iter().map(|n| params[n].clone()).collect();
                                    if !started[i].insert(key) {
                                        continue;
                                    }
                                    let env = resolved(env, &params, &defaults);
                                    match start(function, &env) {
                                        Ok(n) => clamped += usize::from(n > 0),
                                        Err(e) => panic!("{params:?}: {e}"),
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    let starts: usize = started.iter().map(|s| s.len()).sum();
    println!(
        "{tried} accepted combinations: {starts} distinct function environments started; \
         process clamped settings in {clamped}"
    );
    assert!(
        tried > 10_000 && clamped > 0,
        "{tried} tried, {clamped} clamped"
    );
}
