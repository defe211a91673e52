//! The stack's functions as they run on AWS: each handler's clients, wired
//! to the stack's resources and guarded by its function's IAM policy
//! ([`crate::iam`]), and the environment a handler's binary is given.

use super::{LocalStack, PROCESS_TOPIC, REST_WAKE_QUEUE, TABLE, TRIGGER_TOPIC, scan_tasks};
use anyhow::{Context, Result};
use std::time::Duration;

impl LocalStack {
    /// `store` as `function` reaches it: through a client that its policy
    /// guards ([`crate::iam`]), unless IAM is off.
    pub fn store_as(&self, function: &str, store: &lifo_core::Store) -> lifo_core::Store {
        match self.policies.get(function) {
            Some(policy) => {
                let conf = store.client().config().clone();
                let guard = crate::iam::IamGuard::new(conf.http_client(), policy.clone());
                let client = aws_sdk_dynamodb::Client::from_conf(
                    conf.to_builder().http_client(guard).build(),
                );
                store.with_client(client)
            }
            None => store.clone(),
        }
    }

    /// The SNS client `function` publishes with (its policy guards it).
    pub fn sns_as(&self, function: &str) -> aws_sdk_sns::Client {
        match self.policies.get(function) {
            Some(policy) => {
                let conf = self.sns.config().clone();
                let guard = crate::iam::IamGuard::new(conf.http_client(), policy.clone());
                aws_sdk_sns::Client::from_conf(conf.to_builder().http_client(guard).build())
            }
            None => self.sns.clone(),
        }
    }

    /// The SQS client `function` calls with (its policy guards it).
    pub fn sqs_as(&self, function: &str) -> aws_sdk_sqs::Client {
        match self.policies.get(function) {
            Some(policy) => {
                let conf = self.sqs.config().clone();
                let guard = crate::iam::IamGuard::new(conf.http_client(), policy.clone());
                aws_sdk_sqs::Client::from_conf(conf.to_builder().http_client(guard).build())
            }
            None => self.sqs.clone(),
        }
    }

    /// The rest alarm as `function` sets it ([`lifo_lambda::alarm`]).
    pub fn rest_alarm_as(&self, function: &str) -> lifo_lambda::alarm::RestAlarm {
        lifo_lambda::alarm::RestAlarm::new(self.sqs_as(function), &self.rest_wake_queue_url)
    }

    /// The trigger handler over this stack: wakes the process topic, and
    /// sweeps `store` (`shards` LIFO shards) on scheduled events.
    pub fn trigger(
        &self,
        store: lifo_core::Store,
        shards: u32,
        max_ttl_seconds: u64,
    ) -> trigger::Trigger {
        const F: &str = "TriggerFunction";
        trigger::Trigger::new(lifo_lambda::Notifier::new(
            self.sns_as(F),
            &self.process_topic_arn,
        ))
        .with_sweep(trigger::Sweep {
            store: self.store_as(F, &store),
            shard_count: shards,
            max_ttl_seconds,
        })
        .with_rest_alarm(self.rest_alarm_as(F))
    }

    /// scheduler-start over this stack, with the template's defaults for
    /// due shards, catch-up days, TTL and retention.
    pub fn scheduler(&self, store: lifo_core::Store) -> Result<scheduler_start::Scheduler> {
        let param = |name: &str| -> Result<u64> {
            self.template
                .parameter_default(name)?
                .parse()
                .context(format!("template parameter {name}"))
        };
        const F: &str = "SchedulerStartFunction";
        Ok(scheduler_start::Scheduler::new(
            self.store_as(F, &store),
            lifo_lambda::Notifier::new(self.sns_as(F), &self.process_topic_arn),
            scheduler_start::SchedulerConfig {
                table_name: self.table.clone(),
                process_topic_arn: self.process_topic_arn.clone(),
                due_shard_count: u32::try_from(param("DueShardCount")?).context("DueShardCount")?,
                catch_up_days: u32::try_from(param("CatchUpDays")?).context("CatchUpDays")?,
                parallelism: usize::try_from(param("SchedulerParallelism")?)
                    .context("SchedulerParallelism")?,
                default_ttl_seconds: param("TaskTtlSeconds")?,
                retention_seconds: param("RetentionSeconds")?,
                deadline_margin: Duration::from_secs(2),
                processors: 1,
            },
        ))
    }

    /// What a function binary needs to run against this stack, as its
    /// environment: the table, the trigger topic, and the endpoints of
    /// DynamoDB Local and moto.
    pub fn function_env(&self) -> Vec<(String, String)> {
        [
            ("TABLE_NAME", self.table.as_str()),
            ("TRIGGER_TOPIC_ARN", self.trigger_topic_arn.as_str()),
            ("PROCESS_TOPIC_ARN", self.process_topic_arn.as_str()),
            ("AWS_ENDPOINT_URL_DYNAMODB", &self.dynamodb_local.endpoint),
            ("AWS_ENDPOINT_URL_SNS", &self.moto.endpoint),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// What `function`'s binary runs with against this stack, as Lambda
    /// would start it: the template's environment (parameters at their
    /// defaults, the table and topics as created here), Lambda's own
    /// variables (name, memory, timeout, JSON logs), the region, dummy
    /// credentials and the endpoints of DynamoDB Local and moto.
    pub fn binary_env(&self, function: &str) -> Result<Vec<(String, String)>> {
        let mut env = self.template.function_environment(function, |r| match r {
            TABLE => Some(self.table.clone()),
            PROCESS_TOPIC => Some(self.process_topic_arn.clone()),
            TRIGGER_TOPIC => Some(self.trigger_topic_arn.clone()),
            REST_WAKE_QUEUE => Some(self.rest_wake_queue_url.clone()),
            "AWS::StackName" => Some("lifo-local".to_owned()),
            "AWS::Region" => Some("us-east-1".to_owned()),
            _ => None,
        })?;
        let timeout = self.template.function_timeout(function)?.to_string();
        let memory = self.template.function_memory(function)?.to_string();
        env.extend(
            [
                ("AWS_LAMBDA_FUNCTION_NAME", function),
                ("AWS_LAMBDA_FUNCTION_TIMEOUT", timeout.as_str()),
                ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory.as_str()),
                ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
                ("AWS_REGION", "us-east-1"),
                ("AWS_DEFAULT_REGION", "us-east-1"),
                ("AWS_ACCESS_KEY_ID", "local"),
                ("AWS_SECRET_ACCESS_KEY", "local"),
                ("AWS_ENDPOINT_URL_DYNAMODB", &self.dynamodb_local.endpoint),
                ("AWS_ENDPOINT_URL_SNS", &self.moto.endpoint),
                ("AWS_ENDPOINT_URL_SQS", &self.moto.endpoint),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        Ok(env)
    }

    /// [`LocalStack::binary_env`] with the function's binary behind its
    /// policy, as deployed: its DynamoDB, SNS and SQS endpoints are an IAM
    /// proxy ([`crate::iam::proxy`]) that refuses what the policy does not
    /// allow, as AWS does. Without IAM (`IamMode::Off`), no proxy. Keep the
    /// proxy while the binary runs.
    pub async fn guarded_binary_env(
        &self,
        function: &str,
    ) -> Result<(Vec<(String, String)>, Option<crate::iam::proxy::IamProxy>)> {
        let mut env = self.binary_env(function)?;
        let Some(policy) = self.policies.get(function) else {
            return Ok((env, None));
        };
        let proxy = crate::iam::proxy::IamProxy::start(
            policy.clone(),
            &self.dynamodb_local.endpoint,
            &self.moto.endpoint,
        )
        .await?;
        for (k, v) in &mut env {
            if matches!(
                k.as_str(),
                "AWS_ENDPOINT_URL_DYNAMODB" | "AWS_ENDPOINT_URL_SNS" | "AWS_ENDPOINT_URL_SQS"
            ) {
                v.clone_from(&proxy.endpoint);
            }
        }
        Ok((env, Some(proxy)))
    }

    /// A process handler over this stack: `store`, tail calls through its
    /// trigger topic, `runner`, `config`.
    pub fn processor<R: process::runner::TaskRunner>(
        &self,
        store: lifo_core::Store,
        runner: std::sync::Arc<R>,
        config: process::ProcessConfig,
    ) -> process::Processor<R> {
        const F: &str = "ProcessFunction";
        process::Processor::new(
            self.store_as(F, &store),
            lifo_lambda::Notifier::new(self.sns_as(F), &self.trigger_topic_arn),
            runner,
            config,
        )
        .with_rest_alarm(self.rest_alarm_as(F))
    }

    /// create as the template deploys it: it wakes the processor itself,
    /// through this stack's process topic (`processors` shard groups).
    pub fn creator(
        &self,
        store: lifo_core::Store,
        config: lifo_ops::create::CreateConfig,
        processors: u32,
    ) -> lifo_ops::create::Creator {
        self.creator_as("CreateFunction", store, config, processors)
    }

    /// [`LocalStack::creator`] run by `function` under its policy (the API
    /// function creates tasks with create's code and its own role).
    pub fn creator_as(
        &self,
        function: &str,
        store: lifo_core::Store,
        config: lifo_ops::create::CreateConfig,
        processors: u32,
    ) -> lifo_ops::create::Creator {
        lifo_ops::create::Creator::new(self.store_as(function, &store), config).with_wakeups(
            lifo_lambda::notify::Fanout::new(
                lifo_lambda::Notifier::new(self.sns_as(function), &self.process_topic_arn),
                processors,
            ),
        )
    }

    /// A store over the local table.
    pub fn store(&self) -> lifo_core::Store {
        lifo_core::Store::new(self.ddb.clone(), &self.table)
    }

    /// Every task of the table (a full scan, without the queue's own items:
    /// the control item, group leases; for reports and tests).
    pub async fn scan_tasks(&self) -> Result<Vec<lifo_core::Task>> {
        scan_tasks(&self.store()).await
    }
}
