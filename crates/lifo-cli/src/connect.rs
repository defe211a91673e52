//! Which queue a command acts on: `--stack NAME` (the stack's outputs) or
//! `--table` with `--endpoint-url` and the settings flags; and, with a
//! stack, its CreateFunction as the producer.

use crate::error::{CliError, Endpoint};
use lifo_core::Store;
use lifo_lambda::bounded::{AWS_ANSWER_LIMIT, BoundedAnswers};
use lifo_ops::create::CreateResponse;
use lifo_ops::queue::BoxFuture;
use lifo_ops::{OpsError, Produce, Queue, Settings};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Where the queue is: the command line's global options.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    pub table: String,
    pub stack: Option<String>,
    pub region: Option<String>,
    /// A local DynamoDB.
    pub endpoint_url: Option<String>,
    /// The flags' settings (a stack's outputs override them).
    pub settings: Settings,
    /// How long a connection may take (`--connect-timeout`).
    pub connect_timeout: Duration,
    /// How long an answer may take once connected (`--read-timeout`).
    pub read_timeout: Duration,
}

impl Connection {
    /// DynamoDB as this connection reaches it, for messages.
    pub fn dynamodb(&self) -> Endpoint {
        Endpoint {
            service: "DynamoDB",
            url: self.endpoint_url.clone(),
            region: self.region.clone(),
            connect_timeout_s: self.connect_timeout.as_secs(),
            read_timeout_s: self.read_timeout.as_secs(),
        }
    }

    /// `service` reached the usual way (`env`, its `AWS_ENDPOINT_URL_*`,
    /// or AWS), for messages.
    pub fn usual(&self, service: &'static str, env: &str) -> Endpoint {
        Endpoint {
            service,
            url: std::env::var(env)
                .ok()
                .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok()),
            ..self.dynamodb()
        }
    }

    /// The SDK's timeouts for this connection: `--connect-timeout`,
    /// `--read-timeout`, and a request with its retries ends within both.
    fn timeouts(&self) -> aws_config::timeout::TimeoutConfig {
        aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(self.connect_timeout)
            .read_timeout(self.read_timeout)
            .operation_timeout(self.connect_timeout + self.read_timeout)
            .build()
    }
}

/// A stack's CreateFunction, invoked as the console does, so that the
/// function's validation and permissions apply.
#[derive(Debug, Clone)]
pub struct CreateFunction {
    pub lambda: aws_sdk_lambda::Client,
    pub name: String,
    /// Lambda as reached, for messages.
    pub endpoint: Endpoint,
}

/// AWS configuration from the usual sources, with `--region`; with
/// `--endpoint-url`, that endpoint for DynamoDB and local credentials when
/// none are set.
pub async fn aws_config(cli: &Connection, endpoint: Option<&str>) -> aws_config::SdkConfig {
    // Retries 0.2 s then 0.4 s apart (the SDK's 1 s then 2 s would outlast
    // the request's timeouts): a refused connection is told as refused, not
    // as the time it took.
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .timeout_config(cli.timeouts())
        .retry_config(
            aws_config::retry::RetryConfig::standard()
                .with_initial_backoff(Duration::from_millis(200)),
        );
    if let Some(region) = &cli.region {
        loader = loader.region(aws_config::Region::new(region.clone()));
    }
    if let Some(endpoint) = endpoint {
        loader = loader.endpoint_url(endpoint);
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
            loader = loader.credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "local", "local", None, None, "lifo",
            ));
        }
        if cli.region.is_none() {
            loader = loader.region(aws_config::Region::new("us-east-1"));
        }
    }
    loader.load().await
}

/// The outputs of a CloudFormation stack, by key.
async fn stack_outputs(cli: &Connection, stack: &str) -> Result<HashMap<String, String>, CliError> {
    // CloudFormation is reached the usual way (AWS_ENDPOINT_URL_CLOUDFORMATION
    // works); --endpoint-url is DynamoDB's.
    let cfn = aws_sdk_cloudformation::Client::from_conf(
        aws_sdk_cloudformation::config::Builder::from(&aws_config(cli, None).await)
            .interceptor(BoundedAnswers::new(AWS_ANSWER_LIMIT))
            .build(),
    );
    let out = cfn
        .describe_stacks()
        .stack_name(stack)
        .send()
        .await
        .map_err(|e| {
            let endpoint = cli.usual("CloudFormation", "AWS_ENDPOINT_URL_CLOUDFORMATION");
            let why =
                crate::error::transport(&e, &endpoint).unwrap_or_else(|| crate::error::once(&e));
            CliError::Other(format!("reading stack {stack}: {why}"))
        })?;
    let found = out
        .stacks
        .unwrap_or_default()
        .into_iter()
        .next()
        .ok_or_else(|| CliError::Other(format!("no stack {stack}")))?;
    Ok(found
        .outputs
        .unwrap_or_default()
        .into_iter()
        .filter_map(|o| Some((o.output_key?, o.output_value?)))
        .collect())
}

/// Resolves `--stack` (or `--table` and friends) to a store and settings.
pub async fn connect(cli: &Connection) -> Result<Queue, CliError> {
    let mut settings = cli.settings;
    let mut store =
        // Every answer is read at most AWS_ANSWER_LIMIT bytes far: an
        // endpoint that never stops answering cannot fill the memory.
        Store::new(
            aws_sdk_dynamodb::Client::from_conf(
                aws_sdk_dynamodb::config::Builder::from(
                    &aws_config(cli, cli.endpoint_url.as_deref()).await,
                )
                .interceptor(BoundedAnswers::new(AWS_ANSWER_LIMIT))
                .build(),
            ),
            &cli.table,
        );
    let Some(stack) = &cli.stack else {
        return Ok(Queue::new(store, settings));
    };
    let outputs = stack_outputs(cli, stack).await?;
    let output = |key: &str| {
        outputs.get(key).cloned().ok_or_else(|| {
            CliError::Other(format!(
                "stack {stack} has no output {key} (is it this project's template?)"
            ))
        })
    };
    // Each output within the template's bounds, as the flags are: a stack
    // is read, not trusted to be this project's.
    fn number<T>(key: &str, v: String, range: std::ops::RangeInclusive<T>) -> Result<T, CliError>
    where
        T: std::str::FromStr + PartialOrd + std::fmt::Display,
    {
        match v.trim().parse::<T>() {
            Ok(n) if range.contains(&n) => Ok(n),
            _ => Err(CliError::Other(format!(
                "stack output {key}={v:?} is not a number in {}..={}",
                range.start(),
                range.end()
            ))),
        }
    }
    use lifo_lambda::config::bounds;
    let table = output("TableName")?;
    store = Store::new(store.client().clone(), &table);
    settings.shards = number("ShardCount", output("ShardCount")?, bounds::SHARD_COUNT)?;
    settings.due_shards = number(
        "DueShardCount",
        output("DueShardCount")?,
        bounds::DUE_SHARD_COUNT,
    )?;
    settings.max_ttl_seconds = number(
        "MaxTaskTtlSeconds",
        output("MaxTaskTtlSeconds")?,
        bounds::MAX_TTL_SECONDS,
    )?;
    // Outputs added later than the others: a stack from an older template
    // falls back to the flags.
    if let Ok(v) = output("TaskTtlSeconds") {
        settings.task_ttl_seconds = number("TaskTtlSeconds", v, bounds::TASK_TTL_SECONDS)?;
    }
    if let Ok(v) = output("RetentionSeconds") {
        settings.retention_seconds = number("RetentionSeconds", v, bounds::RETENTION_SECONDS)?;
    }
    let queue = Queue::new(store, settings);
    if let Ok(name) = output("CreateFunctionName") {
        // Lambda is reached the usual way too (AWS_ENDPOINT_URL_LAMBDA works).
        // No SDK retries: a create whose answer was lost may have written,
        // and a second one would write again (the ids are generated there).
        let conf = aws_sdk_lambda::config::Builder::from(&aws_config(cli, None).await)
            .retry_config(aws_sdk_lambda::config::retry::RetryConfig::disabled())
            .interceptor(BoundedAnswers::new(AWS_ANSWER_LIMIT))
            // Create may take its whole run: no read timeout, 90 s in all.
            .timeout_config(
                aws_sdk_lambda::config::timeout::TimeoutConfig::builder()
                    .connect_timeout(cli.connect_timeout)
                    .operation_timeout(Duration::from_secs(90))
                    .build(),
            )
            .build();
        let lambda = aws_sdk_lambda::Client::from_conf(conf);
        let endpoint = cli.usual("Lambda", "AWS_ENDPOINT_URL_LAMBDA");
        return Ok(queue.with_producer(Arc::new(CreateFunction {
            lambda,
            name,
            endpoint,
        })));
    }
    Ok(queue)
}

impl Produce for CreateFunction {
    fn create(&self, request: String) -> BoxFuture<'_, Result<CreateResponse, OpsError>> {
        Box::pin(async move { self.invoke(request).await })
    }
}

impl CreateFunction {
    async fn invoke(&self, request: String) -> Result<CreateResponse, OpsError> {
        let out = self
            .lambda
            .invoke()
            .function_name(&self.name)
            .invocation_type(aws_sdk_lambda::types::InvocationType::RequestResponse)
            .payload(aws_sdk_lambda::primitives::Blob::new(request))
            .send()
            .await
            .map_err(|e| {
                let why = crate::error::transport(&e, &self.endpoint)
                    .unwrap_or_else(|| crate::error::once(&e));
                OpsError::Unavailable(format!("invoking {}: {why}", self.name))
            })?;
        let body: Value = out
            .payload()
            .and_then(|p| serde_json::from_slice(p.as_ref()).ok())
            .unwrap_or(Value::Null);
        if out.function_error().is_some() {
            return Err(OpsError::Rejected(format!(
                "{} ({})",
                body["errorMessage"]
                    .as_str()
                    .unwrap_or("the create function failed"),
                body["errorType"].as_str().unwrap_or("error")
            )));
        }
        serde_json::from_value(body).map_err(|e| {
            OpsError::Unavailable(format!("{} answered no create response: {e}", self.name))
        })
    }
}
