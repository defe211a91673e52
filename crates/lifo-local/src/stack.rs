//! The local stack: servers, clients, and the resources of template.yaml.

use crate::contention::{Contention, ContentionMode};
use crate::index_lag::{IndexLag, IndexLagMode};
use crate::servers::{self, Server, Tools};
use crate::template::Template;
use anyhow::{Context, Result};
use aws_config::BehaviorVersion;
use aws_sdk_dynamodb::types::TimeToLiveSpecification;
use std::time::Duration;

mod functions;

/// Logical ids in template.yaml the local stack relies on.
pub const TABLE: &str = "QueueTable";
pub const PROCESS_TOPIC: &str = "ProcessTopic";
pub const TRIGGER_TOPIC: &str = "TriggerTopic";
pub const TRIGGER_STREAM: &str = "TriggerStreamMapping";
pub const REST_WAKE_QUEUE: &str = "RestWakeQueue";
pub const TRIGGER_REST_WAKE: &str = "TriggerRestWakeMapping";

/// Running servers plus the resources created in them.
pub struct LocalStack {
    pub template: Template,
    pub ddb: aws_sdk_dynamodb::Client,
    pub streams: aws_sdk_dynamodbstreams::Client,
    pub sns: aws_sdk_sns::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub table: String,
    /// The table's stream; `None` in shared servers, whose tables are made
    /// without one ([`Servers::Shared`]).
    pub stream_arn: Option<String>,
    pub process_topic_arn: String,
    pub trigger_topic_arn: String,
    /// SQS queues subscribed to the topics: how the pipeline "invokes" the
    /// functions the topics would invoke in AWS.
    pub process_queue_url: String,
    pub trigger_queue_url: String,
    /// The rest alarms' queue (`RestWakeQueue`), read into trigger as its
    /// event source mapping does ([`crate::pipeline`]).
    pub rest_wake_queue_url: String,
    /// Transaction conflicts as AWS answers them (see [`crate::contention`]);
    /// `None` when the options turned them off.
    pub contention: Option<Contention>,
    /// The claimable index's lag ([`crate::index_lag`]); `None` when off.
    pub index_lag: Option<IndexLag>,
    /// Whose servers these are ([`StackOptions::servers`]).
    pub servers: Servers,
    /// Each function's policy ([`crate::iam`]); empty when IAM is off.
    pub policies: std::collections::HashMap<&'static str, std::sync::Arc<crate::iam::Policy>>,
    // Dropped last: stops the servers.
    pub dynamodb_local: Server,
    pub moto: Server,
}

pub use crate::aws::{ACCOUNT, REGION, credentials};

/// SDK configuration for a local endpoint ([`REGION`], [`credentials`]).
pub async fn sdk_config(endpoint: &str) -> aws_config::SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .region(aws_config::Region::new(REGION))
        .credentials_provider(credentials())
        .endpoint_url(endpoint)
        .load()
        .await
}

/// Creates queue `name` with `visibility_timeout` (seconds) in moto: its
/// URL and ARN.
async fn create_queue(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    visibility_timeout: &str,
) -> Result<(String, String)> {
    use aws_sdk_sqs::types::QueueAttributeName;
    let url = sqs
        .create_queue()
        .queue_name(name)
        .attributes(QueueAttributeName::VisibilityTimeout, visibility_timeout)
        .send()
        .await
        .with_context(|| format!("creating the queue {name}"))?
        .queue_url
        .context("queue URL")?;
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .with_context(|| format!("reading the ARN of {name}"))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .context("queue ARN")?;
    Ok((url, arn))
}

/// How to start a local stack.
#[derive(Debug, Clone, Default)]
pub struct StackOptions {
    /// Keep DynamoDB Local's tables in this folder (`-dbPath`), so a
    /// restart finds the table and its tasks; in memory when `None`.
    pub data_dir: Option<std::path::PathBuf>,
    /// Transaction conflicts as AWS answers them: on by default.
    pub contention: ContentionMode,
    /// The claimable index's lag behind its writes, as AWS's global
    /// secondary indexes lag: on by default ([`crate::index_lag`]).
    pub index_lag: IndexLagMode,
    /// IAM as deployed: each function's calls checked against its policy
    /// in template.yaml (or in this template instead); on by default.
    pub iam: IamMode,
    /// The template the stack is built from, and whose policies IAM checks
    /// ([`IamMode::AsDeployed`]): the workspace's template.yaml when
    /// `None` (`lifo local up --template FILE` gives a user's own copy).
    pub template: Option<Template>,
    /// Which servers the stack uses: its own (the default), or the
    /// process's shared ones ([`servers::Shared`]), started by the first
    /// stack that asks, with this stack's table, topics and queues named
    /// apart (`QueueTable-3`, …). Ignored with a `data_dir`.
    pub servers: Servers,
}

impl StackOptions {
    /// With a claimable index that is current after every write (no lag):
    /// for a test that reads the index right after writing it, about what
    /// the moves do rather than when a reader sees them.
    pub fn current_index(self) -> Self {
        Self {
            index_lag: IndexLagMode::Off,
            ..self
        }
    }
}

/// Whose servers a stack uses ([`StackOptions::servers`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Servers {
    /// A DynamoDB Local and a moto of the stack's own, stopped with it.
    #[default]
    Own,
    /// The shared moto, and a DynamoDB Local of its own: for a stack whose
    /// stream is read (the local pipeline's trigger). DynamoDB Local
    /// numbers stream records across all its tables, and a shard iterator
    /// whose next record is not the very next number server-wide fails
    /// with `TrimmedDataAccessException` (measured on DynamoDB Local 3.x:
    /// table B written between taking table A's iterator and A's write),
    /// so a stream is read only from a server with one table written.
    SharedMoto,
    /// The shared DynamoDB Local and moto: for a stack whose stream nobody
    /// reads. An integration test binary then starts one JVM and one moto,
    /// not one per test (about 5 s of CPU each time). The table is made
    /// without its stream: DynamoDB Local looks up the streams at every
    /// write, at a cost that grows with what all its tables' streams hold,
    /// so a shared server with streams got slower with every test.
    Shared,
}

/// Whether the functions' calls are checked against their policies.
#[derive(Debug, Clone, Default)]
pub enum IamMode {
    /// As deployed: against template.yaml.
    #[default]
    AsDeployed,
    /// Against another template's policies (a test's edited copy).
    Template(Box<Template>),
    /// DynamoDB Local and moto as they are: everything allowed.
    Off,
}

/// The functions whose calls the local stack runs in-process.
pub const FUNCTIONS: [&str; 5] = [
    "CreateFunction",
    "TriggerFunction",
    "ProcessFunction",
    "SchedulerStartFunction",
    "ApiFunction",
];

impl LocalStack {
    /// Starts DynamoDB Local (in memory) and moto and creates the table
    /// (with TTL) and topics from template.yaml, plus one SQS queue
    /// subscribed to each topic.
    pub async fn start() -> Result<Self> {
        Self::start_with(StackOptions::default()).await
    }

    /// [`LocalStack::start`] with options. Both servers start at once; with a
    /// `data_dir` that already holds the table, the table is kept as it is.
    pub async fn start_with(options: StackOptions) -> Result<Self> {
        let tools = Tools::locate()?;
        let template = match options.template {
            Some(t) => t,
            None => Template::workspace()?,
        };
        // A data folder's servers are the stack's own.
        let kind = if options.data_dir.is_some() {
            Servers::Own
        } else {
            options.servers
        };
        let (dynamodb_local, moto) = match kind {
            Servers::Own => tokio::try_join!(
                servers::start_dynamodb_local(&tools, options.data_dir.as_deref()),
                servers::start_moto(&tools),
            )?,
            Servers::SharedMoto => tokio::try_join!(
                servers::start_dynamodb_local(&tools, None),
                servers::SHARED_MOTO.get(&tools),
            )?,
            Servers::Shared => tokio::try_join!(
                servers::SHARED_DYNAMODB_LOCAL.get(&tools),
                servers::SHARED_MOTO.get(&tools),
            )?,
        };
        // The resources' names: as the template names them on servers of
        // the stack's own, apart from every other stack's on shared ones.
        let suffix = if kind == Servers::Own {
            String::new()
        } else {
            static STACKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            format!(
                "-{}",
                STACKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            )
        };
        let ddb_conf = sdk_config(&dynamodb_local.endpoint).await;
        let moto_conf = sdk_config(&moto.endpoint).await;
        let contention = Contention::new(options.contention);
        let index_lag = IndexLag::new(
            options.index_lag,
            contention
                .clone()
                .map(aws_smithy_runtime_api::client::http::SharedHttpClient::new),
        );
        let ddb = {
            let mut conf = aws_sdk_dynamodb::config::Builder::from(&ddb_conf);
            if let Some(l) = &index_lag {
                conf = conf.http_client(l.clone());
            } else if let Some(c) = &contention {
                conf = conf.http_client(c.clone());
            }
            aws_sdk_dynamodb::Client::from_conf(conf.build())
        };
        // DynamoDB Local's stream records spell an empty map `{}`; the
        // interceptor makes them what AWS sends (see `empty_maps`).
        let streams = aws_sdk_dynamodbstreams::Client::from_conf(
            aws_sdk_dynamodbstreams::config::Builder::from(&ddb_conf)
                .interceptor(crate::empty_maps::EmptyMaps)
                .build(),
        );
        let sns = aws_sdk_sns::Client::new(&moto_conf);
        let sqs = aws_sdk_sqs::Client::new(&moto_conf);

        let table = format!("{TABLE}{suffix}");
        let def = template.table(TABLE)?;
        // DynamoDB Local may accept connections a moment before it serves.
        let mut attempt = 0;
        let existing = loop {
            match ddb.describe_table().table_name(&table).send().await {
                Ok(out) => break out.table.and_then(|t| t.latest_stream_arn),
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_resource_not_found_exception()) =>
                {
                    break None;
                }
                Err(e) if attempt < 40 => {
                    attempt += 1;
                    tracing::debug!(error = %lifo_core::error::chain(&e), "describe table, retrying");
                    tokio::time::sleep(Duration::from_millis(125)).await;
                }
                Err(e) => return Err(e).context("describing the table"),
            }
        };
        let stream_arn = match existing {
            Some(arn) => {
                tracing::info!(table, "reusing the table in the data folder");
                Some(arn)
            }
            None => {
                let with_stream = kind != Servers::Shared;
                let mut req = def.create_table(&ddb, &table)?;
                if !with_stream {
                    req = req.set_stream_specification(None);
                }
                let created = req
                    .send()
                    .await
                    .context("creating the table from template.yaml")?;
                let arn = created.table_description.and_then(|d| d.latest_stream_arn);
                if arn.is_none() && with_stream {
                    anyhow::bail!(
                        "the table has no stream (StreamSpecification missing from template.yaml?)"
                    );
                }
                if let Some(ttl) = def
                    .time_to_live_specification
                    .as_ref()
                    .filter(|t| t.enabled)
                {
                    ddb.update_time_to_live()
                        .table_name(&table)
                        .time_to_live_specification(
                            TimeToLiveSpecification::builder()
                                .attribute_name(&ttl.attribute_name)
                                .enabled(true)
                                .build()
                                .context("TTL specification")?,
                        )
                        .send()
                        .await
                        .context("enabling TTL")?;
                }
                arn
            }
        };

        let mut topic_arn = std::collections::HashMap::new();
        let mut queue_url = std::collections::HashMap::new();
        for logical in template.topics() {
            let arn = sns
                .create_topic()
                .name(format!("{logical}{suffix}"))
                .send()
                .await
                .context(format!("creating topic {logical}"))?
                .topic_arn
                .context("topic ARN")?;
            let (queue, queue_arn) =
                create_queue(&sqs, &format!("{logical}{suffix}-deliveries"), "5").await?;
            sns.subscribe()
                .topic_arn(&arn)
                .protocol("sqs")
                .endpoint(queue_arn)
                .send()
                .await
                .context("subscribing the queue")?;
            topic_arn.insert(logical.clone(), arn);
            queue_url.insert(logical, queue);
        }
        // The rest alarms' queue, as the template declares it.
        let (rest_wake_queue_url, rest_wake_queue_arn) = create_queue(
            &sqs,
            &format!("{REST_WAKE_QUEUE}{suffix}"),
            &template.queue_property(REST_WAKE_QUEUE, "VisibilityTimeout")?,
        )
        .await?;
        let policy_template = match options.iam {
            IamMode::AsDeployed => Some(template.clone()),
            IamMode::Template(t) => Some(*t),
            IamMode::Off => None,
        };
        let mut policies = std::collections::HashMap::new();
        if let Some(t) = policy_template {
            let topics: Vec<(String, String)> = topic_arn
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for f in FUNCTIONS {
                let p = crate::iam::Policy::of(
                    &t,
                    f,
                    (TABLE.to_owned(), table.clone()),
                    topics.clone(),
                )
                .with_context(|| format!("{f}'s policy"))?
                .with_queues(vec![(
                    REST_WAKE_QUEUE.to_owned(),
                    rest_wake_queue_url.clone(),
                    rest_wake_queue_arn.clone(),
                )]);
                policies.insert(f, std::sync::Arc::new(p));
            }
        }
        let take = |m: &mut std::collections::HashMap<String, String>, k: &str| {
            m.remove(k)
                .context(format!("template.yaml has no topic {k}"))
        };
        Ok(Self {
            process_topic_arn: take(&mut topic_arn, PROCESS_TOPIC)?,
            trigger_topic_arn: take(&mut topic_arn, TRIGGER_TOPIC)?,
            process_queue_url: take(&mut queue_url, PROCESS_TOPIC)?,
            trigger_queue_url: take(&mut queue_url, TRIGGER_TOPIC)?,
            rest_wake_queue_url,
            template,
            ddb,
            streams,
            contention,
            index_lag,
            policies,
            sns,
            sqs,
            table,
            stream_arn,
            servers: kind,
            dynamodb_local,
            moto,
        })
    }
}

/// Puts back every task a claim holds under a live lease (TAKEN → PENDING,
/// claimable at once, `reason` in its history, the attempt given back as
/// process's own "retry later" gives it: [`lifo_core::Move::attempts_after`]):
/// what a stopped local stack's cut-short invocations held, so that nothing
/// waits for a lease to end and a stop costs no attempt. Only claims made
/// at or after `claimed_since` (epoch ms: this run's) are put back; an
/// earlier run's are left to their leases. A task that moved meanwhile is
/// left as it is. The count put back.
pub async fn put_back_held(
    store: &lifo_core::Store,
    reason: &str,
    claimed_since: u64,
) -> Result<usize> {
    let now = lifo_core::now_ms();
    let mut n = 0;
    for t in scan_tasks(store).await? {
        if t.task_status != lifo_core::TaskStatus::Taken || !t.lease_is_live(now) {
            continue;
        }
        let claimed_at = t
            .history
            .iter()
            .rev()
            .find(|e| e.status == lifo_core::TaskStatus::Taken)
            .map(|e| e.at);
        if claimed_at.is_some_and(|at| at < claimed_since) {
            continue;
        }
        let mv = lifo_core::Move::RetryLater {
            reason,
            history: &t.history,
            retry_at: 0,
        };
        let step = lifo_core::Step {
            now_ms: now,
            token: t.token,
            attempts: mv.attempts_after(t.attempts),
        };
        match store
            .record(&t.task_id, &mv, lifo_core::TaskStatus::Taken, &step)
            .await
        {
            Ok(()) => n += 1,
            Err(e) if e.is_condition_failed() => {}
            Err(e) => return Err(e).context(format!("putting back {}", t.task_id)),
        }
    }
    Ok(n)
}

/// Every task of `store`'s table (a full scan, without the queue's own
/// items: the control item, group leases; for reports and tests).
pub async fn scan_tasks(store: &lifo_core::Store) -> Result<Vec<lifo_core::Task>> {
    let mut tasks = Vec::new();
    let mut start = None;
    loop {
        let out = store
            .client()
            .scan()
            .table_name(store.table())
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .context("scanning the table")?;
        for item in out.items.unwrap_or_default() {
            let ours = matches!(item.get(lifo_core::expr::attr::TASK_ID),
                Some(aws_sdk_dynamodb::types::AttributeValue::S(id)) if lifo_core::store::is_queue_item(id));
            if !ours {
                tasks.push(lifo_core::store::item::from_item(item).context("parsing a task")?);
            }
        }
        start = out.last_evaluated_key;
        if start.is_none() {
            return Ok(tasks);
        }
    }
}
