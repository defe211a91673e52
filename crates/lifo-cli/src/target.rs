//! Which queue a command acts on: `--stack NAME` (the stack's outputs) or
//! `--table` with `--endpoint-url` and the settings flags.

use crate::{Cli, CliError};
use lifo_core::Store;
use lifo_core::bounded::{AWS_ANSWER_LIMIT, BoundedAnswers};
use std::collections::HashMap;

/// The queue the options point at: its store, settings, and (with
/// `--stack`) its create function.
#[derive(Debug, Clone)]
pub struct Target {
    pub store: Store,
    pub shards: u32,
    pub due_shards: u32,
    pub max_ttl_seconds: u64,
    /// The TTL of a task that gives none; a redrive uses it too.
    pub task_ttl_seconds: u64,
    pub retention_seconds: u64,
    /// With `--stack`: the stack's CreateFunction, which `tasks create`
    /// invokes as the console does.
    pub create_function: Option<CreateFunction>,
}

/// A create function to invoke, and the client to invoke it with.
#[derive(Debug, Clone)]
pub struct CreateFunction {
    pub lambda: aws_sdk_lambda::Client,
    pub name: String,
}

/// AWS configuration from the usual sources, with `--region`; with
/// `--endpoint-url`, that endpoint for DynamoDB and local credentials when
/// none are set.
pub(crate) async fn aws_config(cli: &Cli, endpoint: Option<&str>) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
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
async fn stack_outputs(cli: &Cli, stack: &str) -> Result<HashMap<String, String>, CliError> {
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
            CliError::Other(format!(
                "reading stack {stack}: {}",
                lifo_core::error::chain(&e)
            ))
        })?;
    let found = out
        .stacks
        .unwrap_or_default()
        .into_iter()
        .next()
        .ok_or_else(|| CliError::NotFound(format!("no stack {stack}")))?;
    Ok(found
        .outputs
        .unwrap_or_default()
        .into_iter()
        .filter_map(|o| Some((o.output_key?, o.output_value?)))
        .collect())
}

/// Resolves `--stack` (or `--table` and friends) to a store and settings.
pub async fn connect(cli: &Cli) -> Result<Target, CliError> {
    let mut target = Target {
        // Every answer is read at most AWS_ANSWER_LIMIT bytes far: an
        // endpoint that never stops answering cannot fill the memory.
        store: Store::new(
            aws_sdk_dynamodb::Client::from_conf(
                aws_sdk_dynamodb::config::Builder::from(
                    &aws_config(cli, cli.endpoint_url.as_deref()).await,
                )
                .interceptor(BoundedAnswers::new(AWS_ANSWER_LIMIT))
                .build(),
            ),
            &cli.table,
        ),
        shards: cli.shards,
        due_shards: cli.due_shards,
        max_ttl_seconds: cli.max_ttl_seconds,
        task_ttl_seconds: cli.task_ttl_seconds,
        retention_seconds: cli.retention_seconds,
        create_function: None,
    };
    let Some(stack) = &cli.stack else {
        return Ok(target);
    };
    let outputs = stack_outputs(cli, stack).await?;
    let output = |key: &str| {
        outputs.get(key).cloned().ok_or_else(|| {
            CliError::Other(format!(
                "stack {stack} has no output {key} (is it this project's template?)"
            ))
        })
    };
    fn number<T: std::str::FromStr>(key: &str, v: String) -> Result<T, CliError> {
        v.parse()
            .map_err(|_| CliError::Other(format!("stack output {key}={v:?} is not a number")))
    }
    let table = output("TableName")?;
    target.store = Store::new(target.store.client().clone(), &table);
    target.shards = number("ShardCount", output("ShardCount")?)?;
    target.due_shards = number("DueShardCount", output("DueShardCount")?)?;
    target.max_ttl_seconds = number("MaxTaskTtlSeconds", output("MaxTaskTtlSeconds")?)?;
    // Outputs added later than the others: a stack from an older template
    // falls back to the flags.
    if let Ok(v) = output("TaskTtlSeconds") {
        target.task_ttl_seconds = number("TaskTtlSeconds", v)?;
    }
    if let Ok(v) = output("RetentionSeconds") {
        target.retention_seconds = number("RetentionSeconds", v)?;
    }
    if let Ok(name) = output("CreateFunctionName") {
        // Lambda is reached the usual way too (AWS_ENDPOINT_URL_LAMBDA works).
        // No SDK retries: a create whose answer was lost may have written,
        // and a second one would write again (the ids are generated there).
        let conf = aws_sdk_lambda::config::Builder::from(&aws_config(cli, None).await)
            .retry_config(aws_sdk_lambda::config::retry::RetryConfig::disabled())
            .interceptor(BoundedAnswers::new(AWS_ANSWER_LIMIT))
            .timeout_config(
                aws_sdk_lambda::config::timeout::TimeoutConfig::builder()
                    .operation_timeout(std::time::Duration::from_secs(90))
                    .build(),
            )
            .build();
        let lambda = aws_sdk_lambda::Client::from_conf(conf);
        target.create_function = Some(CreateFunction { lambda, name });
    }
    Ok(target)
}

/// Where the console's freshness chart comes from: a local table
/// (`--endpoint-url`) is scanned; a stack's `AgeAtStartMs` metric is read
/// from CloudWatch (the usual way: `AWS_ENDPOINT_URL_CLOUDWATCH` works; the
/// namespace is `METRICS_NAMESPACE`, as in the functions, or `LifoQueue`).
pub async fn freshness_source(cli: &Cli) -> crate::ui::FreshnessSource {
    use crate::ui::FreshnessSource;
    if cli.endpoint_url.is_some() {
        return FreshnessSource::Table;
    }
    match &cli.stack {
        Some(stack) => FreshnessSource::CloudWatch {
            client: aws_sdk_cloudwatch::Client::from_conf(
                aws_sdk_cloudwatch::config::Builder::from(&aws_config(cli, None).await)
                    .interceptor(BoundedAnswers::new(AWS_ANSWER_LIMIT))
                    .build(),
            ),
            namespace: std::env::var("METRICS_NAMESPACE").unwrap_or_else(|_| "LifoQueue".into()),
            service: stack.clone(),
        },
        None => FreshnessSource::None,
    }
}
