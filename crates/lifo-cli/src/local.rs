//! `lifo local up`: the local stack and its pipeline, until Ctrl-C.

use anyhow::Context as _;

/// `println!` that never panics: `lifo local up` keeps running (and stops
/// in order, putting its tasks back) when whoever read its output went
/// away (`lifo local up | head`; Rust ignores SIGPIPE, so `println!` would
/// panic on the closed pipe).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
use lifo_local::stack::StackOptions;
use lifo_local::{LocalStack, Pipeline, PipelineOptions};
use process::ProcessConfig;
use process::runner::AnyRunner;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A function `lifo local invoke` runs: its binary's name, and its logical
/// id in template.yaml.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Function {
    Create,
    Trigger,
    Process,
    SchedulerStart,
    Api,
}

impl Function {
    pub const ALL: [Function; 5] = [
        Function::Create,
        Function::Trigger,
        Function::Process,
        Function::SchedulerStart,
        Function::Api,
    ];

    pub fn binary(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Trigger => "trigger",
            Self::Process => "process",
            Self::SchedulerStart => "scheduler-start",
            Self::Api => "api",
        }
    }

    pub fn logical_id(self) -> &'static str {
        match self {
            Self::Create => "CreateFunction",
            Self::Trigger => "TriggerFunction",
            Self::Process => "ProcessFunction",
            Self::SchedulerStart => "SchedulerStartFunction",
            Self::Api => "ApiFunction",
        }
    }
}

/// `lifo local invoke`: `function`'s binary in `bin_dir` on `event` under
/// AWS's Runtime Interface Emulator, against a fresh local stack built from
/// `template` (the workspace's without one), behind the function's IAM
/// policy there ([`lifo_local::iam::proxy`]); its answer (the lines printed
/// go to stderr as they were).
pub async fn invoke(
    function: Function,
    event: &std::path::Path,
    bin_dir: &std::path::Path,
    template: Option<&std::path::Path>,
) -> anyhow::Result<String> {
    let body = std::fs::read(event).with_context(|| format!("reading {}", event.display()))?;
    serde_json::from_slice::<serde_json::Value>(&body)
        .with_context(|| format!("{} is not JSON", event.display()))?;
    let stack = LocalStack::start_with(StackOptions {
        template: Some(lifo_local::Template::load_or_workspace(template)?),
        ..StackOptions::default()
    })
    .await?;
    // The proxy lives as long as the binary runs.
    let (env, _iam) = stack.guarded_binary_env(function.logical_id()).await?;
    let rie = lifo_local::rie::locate()?;
    let emulated =
        lifo_local::rie::Emulated::start(&rie, &bin_dir.join(function.binary()), &env).await?;
    let timeout = stack.template.function_timeout(function.logical_id())?;
    let answer = emulated
        .invoke(&body, Duration::from_secs(timeout + 5))
        .await;
    emulated.stop().await;
    let answer = answer?;
    for line in &answer.lines {
        eprintln!("{line}");
    }
    if answer.status != 200 {
        anyhow::bail!("the emulator answered {}: {}", answer.status, answer.body);
    }
    Ok(answer.body)
}

/// How long `lifo local up` waits for running invocations once told to
/// stop (`docker stop` waits 10 s before it kills).
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// What `lifo local up` was asked for.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub shards: u32,
    pub scheduler_every: Duration,
    pub data_dir: Option<PathBuf>,
    pub process_timeout: Option<Duration>,
    /// The downstream's rate limit (`RunnerMaxPerSecond`, `RunnerBurst`).
    pub rate_limit: Option<process::RateLimit>,
    /// `RetryBackoffSeconds`.
    pub retry_backoff: Duration,
    /// `TenantMaxInFlight`.
    pub tenant_max_in_flight: Option<std::num::NonZeroU32>,
    /// `SelectionOrder`.
    pub order: lifo_core::Order,
    /// Serve the console (`lifo ui`) on this address.
    pub ui: Option<std::net::SocketAddr>,
    /// Serve the HTTP API (the `api` function's router) on this address,
    /// behind this authorizer.
    pub api: Option<(std::net::SocketAddr, ApiAuth)>,
    /// The SAM template to build the stack from (`--template`); the
    /// workspace's template.yaml when `None`.
    pub template: Option<PathBuf>,
    /// Transaction conflicts injected at this rate (`--contention-rate`).
    pub contention_rate: f64,
    /// The claimable index's lag (`--index-lag`).
    pub index_lag: lifo_local::index_lag::IndexLagMode,
}

/// The local HTTP API's authorizer (`--api-auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApiAuth {
    /// SigV4 with the local stack's credentials, as the stack's HttpApi.
    Iam,
    /// Tokens of a local issuer, as the optional JWT API.
    Jwt,
    /// Anyone on loopback.
    None,
}

impl ApiAuth {
    /// The local API Gateway for this authorizer, and what to tell its
    /// user.
    pub fn gateway(
        self,
        url: &str,
        template: &lifo_local::Template,
    ) -> anyhow::Result<(lifo_local::api_gateway::ApiGateway, String)> {
        use lifo_local::api_gateway::{ApiGateway, Auth, jwt::LocalIssuer};
        let (gateway, said) = match self {
            Self::Iam => (
                ApiGateway::default(),
                format!(
                    "IAM: sign with SigV4, e.g. curl --aws-sigv4 \"aws:amz:{}:execute-api\" --user local:local {url}/queue",
                    lifo_local::stack::REGION
                ),
            ),
            Self::Jwt => {
                let issuer = LocalIssuer::new(&format!("{url}/local-issuer"), "lifo-local")?;
                let day = Duration::from_secs(24 * 3600);
                let write = issuer.mint(&["lifo/read", "lifo/write"], day)?;
                let read = issuer.mint(&["lifo/read"], day)?;
                (
                    ApiGateway::jwt_of(template, &issuer)?,
                    format!(
                        "JWT (issuer {}, audience {}; tokens valid 24 h):\n  lifo/read lifo/write: {write}\n  lifo/read: {read}\n  e.g. curl -H \"Authorization: Bearer $TOKEN\" {url}/queue",
                        issuer.issuer, issuer.audience
                    ),
                )
            }
            Self::None => (
                ApiGateway {
                    auth: Auth::None,
                    ..ApiGateway::default()
                },
                "no auth: anyone on loopback may call it".to_owned(),
            ),
        };
        // The API refuses a body over its limit by its declared length:
        // no need to wait for the upload.
        Ok((gateway.with_function_max_body(api::MAX_BODY_BYTES), said))
    }
}

/// Starts the local stack and the pipeline, prints the endpoints, and
/// waits for Ctrl-C (or SIGTERM); then stops everything it started.
/// If this process is killed outright, the servers die with it.
pub async fn up(options: UpOptions) -> anyhow::Result<()> {
    // Claims from now on are this run's: only those are put back at a stop.
    let started_ms = lifo_core::now_ms();
    let shards = options.shards;
    let template = lifo_local::Template::load_or_workspace(options.template.as_deref())?;
    let stack = LocalStack::start_with(StackOptions {
        data_dir: options.data_dir.clone(),
        template: Some(template),
        contention: lifo_local::contention::ContentionMode::Aws {
            rate: options.contention_rate,
        },
        index_lag: options.index_lag,
        ..StackOptions::default()
    })
    .await?;
    let store = stack.store();
    let max_ttl: u64 = stack
        .template
        .parameter_default("MaxTaskTtlSeconds")?
        .parse()
        .context("template parameter MaxTaskTtlSeconds")?;
    let trigger = Arc::new(stack.trigger(store.clone(), shards, max_ttl));
    // The runner from the same environment variables as in Lambda
    // (RUNNER, RUNNER_MAX_CONCURRENCY, RUNNER_LATENCY_MS, WORKER_FUNCTION_ARN
    // with AWS_ENDPOINT_URL_LAMBDA, …), in a region it is told: without
    // one, the SDK asks EC2's instance metadata, which is not there, and
    // says so in three warnings of several kilobytes.
    let (region, whose) = runner_region();
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.clone()))
        .load()
        .await;
    let runner = Arc::new(AnyRunner::from_source(&lifo_lambda::config::Env, &aws)?);
    let concurrency = stack.template.parameter_default("RunnerConcurrency")?;
    let concurrency: process::runner::Concurrency = concurrency
        .parse()
        .map_err(|e| anyhow::anyhow!("template parameter RunnerConcurrency: {e}"))?;
    let processor = Arc::new(stack.processor(
        store.clone(),
        runner,
        ProcessConfig {
            shard_count: shards,
            max_ttl_seconds: max_ttl,
            rate_limit: options.rate_limit,
            rest: process::rest::RestPolicy {
                base: options.retry_backoff,
            },
            tenant_max_in_flight: options.tenant_max_in_flight,
            order: options.order,
            concurrency,
            ..ProcessConfig::new(stack.table.clone(), stack.trigger_topic_arn.clone())
        },
    ));
    let pipeline_options = PipelineOptions {
        process_timeout: options.process_timeout,
        ..PipelineOptions::default()
    };
    // What the stop asks of the processor (claim nothing more) and reads
    // from it (the tasks still running).
    let halt = processor.halt().clone();
    let mut pipeline = Pipeline::start(&stack, trigger, processor, pipeline_options).await?;
    let scheduler = stack.scheduler(store.clone())?;
    let timeout = stack.template.function_timeout("SchedulerStartFunction")?;
    pipeline.run_scheduler(
        Arc::new(scheduler),
        options.scheduler_every,
        Duration::from_secs(timeout),
    );
    say!(
        "DynamoDB Local  {}  (pid {})",
        stack.dynamodb_local.endpoint,
        stack.dynamodb_local.pid()
    );
    say!(
        "moto (SNS/SQS)  {}  (pid {})",
        stack.moto.endpoint,
        stack.moto.pid()
    );
    match &options.data_dir {
        Some(dir) => say!(
            "table           {} (kept in {})",
            stack.table,
            dir.display()
        ),
        None => say!("table           {} (in memory)", stack.table),
    }
    say!(
        "template        {}",
        options.template.as_deref().map_or_else(
            || "the workspace's template.yaml".to_owned(),
            |p| p.display().to_string()
        )
    );
    say!("region          {region} ({whose})");
    say!("process topic   {}", stack.process_topic_arn);
    say!("trigger topic   {}", stack.trigger_topic_arn);
    let lifo = format!(
        "lifo --endpoint-url {} --shards {shards}",
        stack.dynamodb_local.endpoint
    );
    say!("Try: {lifo} tasks create --count 5");
    say!("     {lifo} stats");
    say!("     {lifo} tasks list --failed --since 1h");
    say!(
        "scheduler-start runs every {} s (in AWS: hourly, 00:00-05:00 UTC).",
        options.scheduler_every.as_secs()
    );
    let param = |name: &str| -> anyhow::Result<u64> {
        stack
            .template
            .parameter_default(name)?
            .parse()
            .with_context(|| format!("template parameter {name}"))
    };
    let settings = lifo_ops::Settings {
        shards,
        due_shards: u32::try_from(param("DueShardCount")?).context("DueShardCount")?,
        max_ttl_seconds: max_ttl,
        task_ttl_seconds: param("TaskTtlSeconds")?,
        retention_seconds: param("RetentionSeconds")?,
    };
    // Tasks created over the console or the API wake the processor as
    // create's do in AWS.
    let creator = stack.creator(
        store.clone(),
        lifo_ops::queue::create_config(&store, &settings),
        1,
    );
    let queue = lifo_ops::Queue::new(store.clone(), settings).with_producer(Arc::new(creator));
    let console = match options.ui {
        Some(listen) => {
            let args = crate::ui::console::UiArgs {
                listen,
                read_only: false,
            };
            let console = crate::ui::start(
                queue.clone(),
                &args,
                crate::ui::console::FreshnessSource::Table,
            )
            .await?;
            say!("console         {}", console.url);
            Some(console)
        }
        None => None,
    };
    let api = match options.api {
        Some((listen, auth)) => {
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("binding the HTTP API to {listen}"))?;
            let url = format!("http://{}", listener.local_addr()?);
            let (gateway, how) = auth.gateway(&url, &stack.template)?;
            say!("HTTP API        {url}");
            say!("                {how}");
            // Behind API Gateway as deployed: its authorizer, paths
            // decoded, sizes and the integration timeout enforced.
            // The API function's own clients, under its policy (the
            // console above is the operator's, with their credentials).
            let api_store = stack.store_as("ApiFunction", &store);
            let creator = stack.creator_as(
                "ApiFunction",
                store.clone(),
                lifo_ops::queue::create_config(&store, &settings),
                1,
            );
            let api_queue =
                lifo_ops::Queue::new(api_store, settings).with_producer(Arc::new(creator));
            let app = gateway.wrap(api::router(Arc::new(api::Api { queue: api_queue })));
            Some(tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            }))
        }
        None => None,
    };
    say!("Ctrl-C stops the pipeline, DynamoDB Local and moto.");
    lifo_local::interrupted().await;
    // Claim nothing more, then give what runs STOP_GRACE to finish, as
    // `docker stop` gives 10 s before it kills; what has not finished then
    // is cut short and put back, its attempt given back.
    halt.stop();
    let running = halt.running();
    say!(
        "stopping: claiming nothing more; waiting up to {} s for {running} running task(s) \
         (Ctrl-C again stops at once)",
        STOP_GRACE.as_secs(),
    );
    if let Some(api) = api {
        api.abort();
    }
    let finished = tokio::select! {
        done = pipeline.stop_within(STOP_GRACE) => done,
        _ = lifo_local::interrupted() => false,
    };
    if let Some(console) = console {
        let _ = tokio::time::timeout(Duration::from_secs(1), console.stop()).await;
    }
    let put_back = if finished {
        0
    } else {
        let reason = "lifo local up stopped before its run ended";
        match tokio::time::timeout(
            Duration::from_secs(2),
            lifo_local::stack::put_back_held(&store, reason, started_ms),
        )
        .await
        {
            Ok(Ok(n)) => {
                say!(
                    "cut short; put back {n} running task(s), their attempt given back: \
                     they run again at the next start"
                );
                n
            }
            Ok(Err(e)) => {
                say!(
                    "cut short; putting tasks back failed ({e:#}): their leases end by themselves"
                );
                0
            }
            Err(_) => {
                say!("cut short; putting tasks back took too long: their leases end by themselves");
                0
            }
        }
    };
    say!(
        "of the {running} running, {} finished and {put_back} were put back",
        running.saturating_sub(put_back)
    );
    say!("stopped");
    Ok(())
}

/// The region of `lifo local up`'s own AWS clients (the runner's: a worker
/// Lambda through `AWS_ENDPOINT_URL_LAMBDA`), and where it came from:
/// `AWS_REGION` or `AWS_DEFAULT_REGION`, else the local stack's own.
fn runner_region() -> (String, &'static str) {
    for var in ["AWS_REGION", "AWS_DEFAULT_REGION"] {
        if let Some(r) = std::env::var(var).ok().filter(|r| !r.trim().is_empty()) {
            return (r, var);
        }
    }
    (
        lifo_local::stack::REGION.to_owned(),
        "the local stack's own; AWS_REGION is not set",
    )
}
