//! Reads template.yaml so the local stack is built from the deployed
//! definitions (table, index, stream, TTL, event filter, parameter defaults):
//! local and deployed schema cannot drift.

use anyhow::{Context, Result, anyhow, bail};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
};
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// template.yaml, as JSON (CloudFormation short tags become `{"!Tag": value}`).
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    doc: Value,
}

fn to_json(v: serde_yaml_ng::Value) -> Value {
    use serde_yaml_ng::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => serde_json::to_value(n.as_f64().unwrap_or_default())
            .ok()
            .filter(|_| n.as_i64().is_none())
            .or_else(|| n.as_i64().map(Value::from))
            .unwrap_or(Value::Null),
        Y::String(s) => Value::String(s),
        Y::Sequence(xs) => Value::Array(xs.into_iter().map(to_json).collect()),
        Y::Mapping(m) => Value::Object(
            m.into_iter()
                .filter_map(|(k, v)| k.as_str().map(|k| (k.to_owned(), to_json(v))))
                .collect(),
        ),
        Y::Tagged(t) => {
            let mut o = serde_json::Map::new();
            o.insert(t.tag.to_string(), to_json(t.value));
            Value::Object(o)
        }
    }
}

/// The table's definition, as CloudFormation properties.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TableDef {
    pub attribute_definitions: Vec<AttrDef>,
    pub key_schema: Vec<KeyDef>,
    #[serde(default)]
    pub global_secondary_indexes: Vec<IndexDef>,
    pub stream_specification: Option<StreamDef>,
    pub time_to_live_specification: Option<TtlDef>,
    pub billing_mode: Option<String>,
}

impl TableDef {
    /// Its indexes as AWS's billing rules read them
    /// ([`lifo_core::store::billing`]).
    pub fn billed_indexes(&self) -> Vec<lifo_core::store::billing::Index> {
        use lifo_core::store::billing::{Index, Projection};
        self.global_secondary_indexes
            .iter()
            .map(|i| Index {
                name: i.index_name.clone(),
                keys: i
                    .key_schema
                    .iter()
                    .map(|k| k.attribute_name.clone())
                    .collect(),
                projection: match i.projection.projection_type.as_str() {
                    "KEYS_ONLY" => Projection::KeysOnly,
                    "INCLUDE" => Projection::Include(i.projection.non_key_attributes.clone()),
                    _ => Projection::All,
                },
            })
            .collect()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AttrDef {
    pub attribute_name: String,
    pub attribute_type: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct KeyDef {
    pub attribute_name: String,
    pub key_type: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct IndexDef {
    pub index_name: String,
    pub key_schema: Vec<KeyDef>,
    pub projection: ProjectionDef,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ProjectionDef {
    pub projection_type: String,
    #[serde(default)]
    pub non_key_attributes: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StreamDef {
    pub stream_view_type: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TtlDef {
    pub attribute_name: String,
    pub enabled: bool,
}

fn keys(defs: &[KeyDef]) -> Result<Vec<KeySchemaElement>> {
    defs.iter()
        .map(|k| {
            KeySchemaElement::builder()
                .attribute_name(&k.attribute_name)
                .key_type(KeyType::from(k.key_type.as_str()))
                .build()
                .context("key schema")
        })
        .collect()
}

impl TableDef {
    /// The same definition as SDK request parts.
    pub fn create_table(
        &self,
        client: &aws_sdk_dynamodb::Client,
        name: &str,
    ) -> Result<aws_sdk_dynamodb::operation::create_table::builders::CreateTableFluentBuilder> {
        let mut req = client
            .create_table()
            .table_name(name)
            .billing_mode(BillingMode::from(
                self.billing_mode.as_deref().unwrap_or("PAY_PER_REQUEST"),
            ))
            .set_key_schema(Some(keys(&self.key_schema)?));
        for a in &self.attribute_definitions {
            req = req.attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(&a.attribute_name)
                    .attribute_type(ScalarAttributeType::from(a.attribute_type.as_str()))
                    .build()
                    .context("attribute definition")?,
            );
        }
        for i in &self.global_secondary_indexes {
            let projection = Projection::builder()
                .projection_type(ProjectionType::from(i.projection.projection_type.as_str()))
                .set_non_key_attributes(
                    (!i.projection.non_key_attributes.is_empty())
                        .then(|| i.projection.non_key_attributes.clone()),
                )
                .build();
            req = req.global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(&i.index_name)
                    .set_key_schema(Some(keys(&i.key_schema)?))
                    .projection(projection)
                    .build()
                    .context("global secondary index")?,
            );
        }
        if let Some(s) = &self.stream_specification {
            req = req.stream_specification(
                StreamSpecification::builder()
                    .stream_enabled(true)
                    .stream_view_type(StreamViewType::from(s.stream_view_type.as_str()))
                    .build()
                    .context("stream specification")?,
            );
        }
        Ok(req)
    }
}

/// How the template configures the function's asynchronous invocations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AsyncConfig {
    /// Reserved concurrency (`None`: unreserved, never throttled here).
    pub reserved: Option<usize>,
    /// `MaximumEventAgeInSeconds`.
    pub max_event_age: Duration,
    /// `MaximumRetryAttempts` (function errors).
    pub max_retries: u32,
    /// Whether failed or aged-out events go to an on-failure destination
    /// (the dead-letter queue).
    pub on_failure: bool,
}

/// An event source mapping of a function, as the template declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSource {
    pub batch_size: usize,
    pub batching_window_seconds: u64,
    /// Filter patterns (any one must match).
    pub filters: Vec<Value>,
    /// `FunctionResponseTypes: [ReportBatchItemFailures]`: the function's
    /// `batchItemFailures` are the only records that failed. Without it,
    /// Lambda ignores them, and an answer is the whole batch's success.
    pub report_batch_item_failures: bool,
}

impl Template {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).context(format!("reading {}", path.display()))?;
        Self::parse(&text)
    }

    /// The template.yaml of this workspace (where it was when `lifo` was
    /// built; `--template FILE` reads another, [`Template::load_or_workspace`]).
    pub fn workspace() -> Result<Self> {
        Self::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../template.yaml"))
    }

    /// `path`'s template, or the workspace's without one.
    pub fn load_or_workspace(path: Option<&Path>) -> Result<Self> {
        match path {
            Some(p) => Self::load(p),
            None => Self::workspace(),
        }
    }

    pub fn parse(text: &str) -> Result<Self> {
        let yaml: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(text).context("parsing template.yaml")?;
        Ok(Self { doc: to_json(yaml) })
    }

    fn resource(&self, logical_id: &str) -> Result<&Value> {
        self.doc
            .pointer(&format!("/Resources/{logical_id}"))
            .context(format!("template.yaml has no resource {logical_id}"))
    }

    /// The table resource's properties.
    pub fn table(&self, logical_id: &str) -> Result<TableDef> {
        let props = self
            .resource(logical_id)?
            .get("Properties")
            .cloned()
            .unwrap_or(Value::Null);
        serde_json::from_value(props).context(format!("{logical_id}.Properties"))
    }

    /// Logical ids of the SNS topics.
    pub fn topics(&self) -> Vec<String> {
        self.doc
            .get("Resources")
            .and_then(Value::as_object)
            .map(|r| {
                r.iter()
                    .filter(|(_, v)| {
                        v.get("Type").and_then(Value::as_str) == Some("AWS::SNS::Topic")
                    })
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The topics and queues encrypted with a KMS key of the template, as
    /// `(resource, key)` references the way policies write them
    /// (`!Ref ProcessTopic`, `!GetAtt RestWakeQueue.Arn`; `!GetAtt
    /// TopicKey.Arn`).
    pub fn encrypted(&self) -> Vec<(String, String)> {
        let Some(resources) = self.doc.get("Resources").and_then(Value::as_object) else {
            return Vec::new();
        };
        resources
            .iter()
            .filter_map(|(id, r)| {
                let key = r.pointer("/Properties/KmsMasterKeyId/!Ref")?.as_str()?;
                let reference = match r.get("Type")?.as_str()? {
                    "AWS::SNS::Topic" => format!("!Ref {id}"),
                    "AWS::SQS::Queue" => format!("!GetAtt {id}.Arn"),
                    _ => return None,
                };
                Some((reference, format!("!GetAtt {key}.Arn")))
            })
            .collect()
    }

    /// An event source mapping (`AWS::Lambda::EventSourceMapping`): batch
    /// size, window and filters.
    pub fn stream_source(&self, mapping: &str) -> Result<StreamSource> {
        let props = self
            .resource(mapping)?
            .get("Properties")
            .context(format!("{mapping} has no Properties"))?;
        let mut filters = Vec::new();
        for f in props
            .pointer("/FilterCriteria/Filters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let text = f
                .get("Pattern")
                .and_then(Value::as_str)
                .context("a filter without Pattern")?;
            let pattern: Value =
                serde_json::from_str(text).context(format!("filter pattern {text}"))?;
            crate::filter::validate(&pattern).context(format!("{mapping}'s filter {text}"))?;
            filters.push(pattern);
        }
        Ok(StreamSource {
            batch_size: props
                .get("BatchSize")
                .and_then(Value::as_u64)
                .unwrap_or(100) as usize,
            batching_window_seconds: props
                .get("MaximumBatchingWindowInSeconds")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            filters,
            report_batch_item_failures: props
                .get("FunctionResponseTypes")
                .and_then(Value::as_array)
                .is_some_and(|t| t.iter().any(|t| t == "ReportBatchItemFailures")),
        })
    }

    /// A property of an `AWS::SQS::Queue`, as a string (an attribute of
    /// CreateQueue).
    pub fn queue_property(&self, logical_id: &str, name: &str) -> Result<String> {
        match self
            .resource(logical_id)?
            .pointer(&format!("/Properties/{name}"))
        {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(Value::Number(n)) => Ok(n.to_string()),
            other => Err(anyhow!(
                "{logical_id}.Properties.{name} is {other:?}, not a value"
            )),
        }
    }

    /// The routes of the JWT API (`AWS::ApiGatewayV2::Route` with
    /// `AuthorizationType: JWT`): each route key (`GET /{proxy+}`) with the
    /// scopes it needs.
    pub fn jwt_routes(&self) -> Result<Vec<(String, Vec<String>)>> {
        let mut routes = Vec::new();
        for (id, r) in self
            .doc
            .get("Resources")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let props = r.get("Properties");
            let jwt = r.get("Type").and_then(Value::as_str) == Some("AWS::ApiGatewayV2::Route")
                && props
                    .and_then(|p| p.get("AuthorizationType"))
                    .and_then(Value::as_str)
                    == Some("JWT");
            if !jwt {
                continue;
            }
            let key = props
                .and_then(|p| p.get("RouteKey"))
                .and_then(Value::as_str)
                .context(format!("{id} has no RouteKey"))?;
            let scopes = props
                .and_then(|p| p.get("AuthorizationScopes"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect();
            routes.push((key.to_owned(), scopes));
        }
        if routes.is_empty() {
            bail!("template.yaml has no route with AuthorizationType JWT");
        }
        Ok(routes)
    }

    /// A parameter's default value, as a string.
    pub fn parameter_default(&self, name: &str) -> Result<String> {
        match self.doc.pointer(&format!("/Parameters/{name}/Default")) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(Value::Number(n)) => Ok(n.to_string()),
            Some(other) => Err(anyhow!(
                "parameter {name} has an unexpected default {other}"
            )),
            None => Err(anyhow!("template.yaml has no default for parameter {name}")),
        }
    }

    /// A numeric parameter's bounds, `MinValue..=MaxValue`.
    pub fn parameter_range(&self, name: &str) -> Result<std::ops::RangeInclusive<u64>> {
        let bound = |key: &str| {
            self.doc
                .pointer(&format!("/Parameters/{name}/{key}"))
                .and_then(Value::as_u64)
                .with_context(|| format!("parameter {name} has no {key}"))
        };
        Ok(bound("MinValue")?..=bound("MaxValue")?)
    }

    /// Every (action, resource) a function's inline policies allow, with
    /// CloudFormation references rendered (`!GetAtt QueueTable.Arn`). A
    /// policy that is not an inline statement list (a managed policy or a
    /// SAM policy template) is an error: least privilege is checked here.
    pub fn function_permissions(&self, function: &str) -> Result<Vec<(String, String)>> {
        fn render(v: &Value) -> String {
            match v {
                Value::String(s) => s.clone(),
                Value::Object(o) if o.len() == 1 => {
                    let (tag, inner) = o
                        .iter()
                        .next()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .unwrap_or_default();
                    format!("{tag} {}", render(&inner))
                }
                other => other.to_string(),
            }
        }
        let list = |v: Option<&Value>| -> Vec<Value> {
            match v {
                Some(Value::Array(xs)) => xs.clone(),
                Some(x) => vec![x.clone()],
                None => Vec::new(),
            }
        };
        let mut out = Vec::new();
        for policy in list(self.resource(function)?.pointer("/Properties/Policies")) {
            let statements = policy.get("Statement").context(format!(
                "{function} has a policy that is not an inline statement list: {policy}"
            ))?;
            for st in list(Some(statements)) {
                // `!If [Condition, statement, !Ref AWS::NoValue]`: granted
                // only under that condition, which the resource shows.
                let (st, condition) = match st.get("!If").and_then(Value::as_array) {
                    Some(branches) if branches.len() == 3 => {
                        if branches[2] != serde_json::json!({"!Ref": "AWS::NoValue"}) {
                            return Err(anyhow!(
                                "{function} has a conditional statement with an else branch: {st}"
                            ));
                        }
                        (
                            branches[1].clone(),
                            format!("(if {}) ", render(&branches[0])),
                        )
                    }
                    _ => (st, String::new()),
                };
                if st.get("Effect").and_then(Value::as_str) != Some("Allow") {
                    continue;
                }
                for action in list(st.get("Action")) {
                    for resource in list(st.get("Resource")) {
                        out.push((render(&action), format!("{condition}{}", render(&resource))));
                    }
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// A number of the template, or a `!Ref` to a parameter's default.
    fn number(&self, v: &Value) -> Result<u64> {
        if let Some(n) = v.as_u64() {
            return Ok(n);
        }
        let name = v
            .get("!Ref")
            .and_then(Value::as_str)
            .context(format!("expected a number or !Ref, got {v}"))?;
        self.parameter_default(name)?
            .parse()
            .context(format!("parameter {name}'s default"))
    }

    /// How Lambda invokes `function` asynchronously: its reserved
    /// concurrency and its EventInvokeConfig.
    pub fn async_config(&self, function: &str) -> Result<AsyncConfig> {
        let props = self
            .resource(function)?
            .get("Properties")
            .context(format!("{function} has no Properties"))?;
        let reserved = match props.get("ReservedConcurrentExecutions") {
            Some(v) => Some(usize::try_from(self.number(v)?)?),
            None => None,
        };
        let config = props.get("EventInvokeConfig");
        let field = |k: &str, default: u64| -> Result<u64> {
            config
                .and_then(|c| c.get(k))
                .map_or(Ok(default), |v| self.number(v))
        };
        Ok(AsyncConfig {
            reserved,
            // Lambda's defaults: 6 hours, 2 retries.
            max_event_age: Duration::from_secs(field("MaximumEventAgeInSeconds", 21_600)?),
            max_retries: u32::try_from(field("MaximumRetryAttempts", 2)?)?,
            on_failure: config
                .and_then(|c| c.pointer("/DestinationConfig/OnFailure"))
                .is_some(),
        })
    }

    /// How often a function's `Schedule` event `event` fires: its
    /// `rate(N minute[s] | hour[s])`.
    pub fn schedule_rate(&self, function: &str, event: &str) -> Result<Duration> {
        let expr = self
            .resource(function)?
            .pointer(&format!("/Properties/Events/{event}/Properties/Schedule"))
            .and_then(Value::as_str)
            .context(format!("{function} has no Schedule event {event}"))?;
        let inner = expr
            .strip_prefix("rate(")
            .and_then(|r| r.strip_suffix(')'))
            .context(format!("{expr} is not a rate expression"))?;
        let (n, unit) = inner
            .split_once(' ')
            .context(format!("{expr}: expected rate(N unit)"))?;
        let n: u64 = n.parse().context(format!("{expr}: N"))?;
        let per = match unit.trim_end_matches('s') {
            "minute" => 60,
            "hour" => 3600,
            "day" => 86_400,
            other => return Err(anyhow!("{expr}: unit {other}")),
        };
        Ok(Duration::from_secs(n * per))
    }

    /// A function's environment as deployed: the Globals' variables, then
    /// its own, each `!Ref` resolved by `resolve` (a parameter's default,
    /// or what `resolve` says a resource or pseudo parameter is).
    pub fn function_environment(
        &self,
        function: &str,
        resolve: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>> {
        let mut vars: Vec<(String, String)> = Vec::new();
        let globals = self.doc.pointer("/Globals/Function/Environment/Variables");
        let own = self
            .resource(function)?
            .pointer("/Properties/Environment/Variables");
        for map in [globals, own].into_iter().flatten() {
            let Some(map) = map.as_object() else { continue };
            for (name, v) in map {
                let value = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Object(o) if o.len() == 1 && o.contains_key("!Ref") => {
                        let r = o["!Ref"].as_str().unwrap_or_default();
                        match resolve(r) {
                            Some(v) => v,
                            None => self.parameter_default(r).with_context(|| {
                                format!("{function}'s {name}: !Ref {r} is neither a parameter nor known locally")
                            })?,
                        }
                    }
                    other => {
                        return Err(anyhow!(
                            "{function}'s {name}: {other} is not a value or a !Ref"
                        ));
                    }
                };
                vars.retain(|(n, _)| n != name);
                vars.push((name.clone(), value));
            }
        }
        Ok(vars)
    }

    /// A function's MemorySize in MB (its own, else the Globals').
    pub fn function_memory(&self, function: &str) -> Result<u64> {
        self.resource(function)?
            .pointer("/Properties/MemorySize")
            .or_else(|| self.doc.pointer("/Globals/Function/MemorySize"))
            .and_then(Value::as_u64)
            .context(format!("{function} has no MemorySize"))
    }

    /// A function's Timeout in seconds.
    pub fn function_timeout(&self, function: &str) -> Result<u64> {
        self.resource(function)?
            .pointer("/Properties/Timeout")
            .and_then(Value::as_u64)
            .context(format!("{function} has no Timeout"))
    }
}

#[cfg(test)]
mod tests;
