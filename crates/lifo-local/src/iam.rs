//! IAM as deployed. In AWS each function's calls are allowed or refused by
//! the policy that template.yaml gives its role; DynamoDB Local and moto
//! allow everything. [`IamGuard`] is the HTTP client of one function's
//! clients in the local stack: it reads each request's action and resource
//! (the DynamoDB operation and its table or index, each item of a
//! transaction; an SNS publish and its topic; an SQS send and its queue,
//! and for an encrypted topic or queue the KMS key's `kms:GenerateDataKey`
//! and `kms:Decrypt`, which the sender needs as AWS documents), and answers
//! a call the
//! function's policy does not allow as AWS does: `AccessDeniedException`
//! (SNS: `AuthorizationError`), naming the function's role, the action and
//! the resource. The policy is [`Template::function_permissions`]: the
//! function's inline statements, which is all template.yaml uses (a managed
//! policy or a SAM policy template there is refused by that reader, so
//! nothing reaches a function unchecked).

use crate::template::Template;
use anyhow::Result;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use serde_json::Value;
use std::sync::Arc;

use crate::aws::{ACCOUNT, REGION};

pub mod proxy;

/// One function's policy, and how to name what it calls.
#[derive(Debug)]
pub struct Policy {
    /// The function's logical id (`CreateFunction`).
    pub function: String,
    /// `(action, resource)` as the template writes them
    /// (`dynamodb:PutItem`, `!GetAtt QueueTable.Arn`).
    pub allowed: Vec<(String, String)>,
    /// The local table's name and the topics' ARNs, with their logical ids.
    pub table: (String, String),
    pub topics: Vec<(String, String)>,
    /// The local queues: logical id, URL and ARN.
    pub queues: Vec<(String, String, String)>,
    /// The encrypted topics and queues, and their keys (template
    /// references, [`Template::encrypted`]).
    pub encrypted: Vec<(String, String)>,
}

impl Policy {
    /// `function`'s policy in `template`, over the local stack's names.
    pub fn of(
        template: &Template,
        function: &str,
        table: (String, String),
        topics: Vec<(String, String)>,
    ) -> Result<Self> {
        Ok(Self {
            function: function.to_owned(),
            allowed: template.function_permissions(function)?,
            table,
            topics,
            queues: Vec::new(),
            encrypted: template.encrypted(),
        })
    }

    /// Knows the local queues too (logical id, URL, ARN).
    pub fn with_queues(mut self, queues: Vec<(String, String, String)>) -> Self {
        self.queues = queues;
        self
    }

    /// Whether the policy allows `action` on `resource` (a template
    /// reference). A statement granted under a condition (`(if IsLambdaRunner)
    /// …`) counts: the local stack cannot know the condition.
    pub fn allows(&self, action: &str, resource: &str) -> bool {
        self.allowed.iter().any(|(a, r)| {
            let r = r.rsplit_once(") ").map_or(r.as_str(), |(_, r)| r);
            (a == action || a == "*") && (r == resource || r == "*")
        })
    }

    /// The role's session, as AWS names it in a refusal.
    fn principal(&self) -> String {
        format!(
            "arn:aws:sts::{ACCOUNT}:assumed-role/{f}Role/{f}",
            f = self.function
        )
    }

    /// The ARN a template reference stands for, for the message.
    fn arn(&self, resource: &str) -> String {
        let table_arn = format!("arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{}", self.table.1);
        if let Some(rest) = resource.strip_prefix(&format!("!Sub ${{{}.Arn}}", self.table.0)) {
            return format!("{table_arn}{rest}");
        }
        if resource == format!("!GetAtt {}.Arn", self.table.0) {
            return table_arn;
        }
        if let Some((_, key)) = self.encrypted.iter().find(|(_, k)| k == resource) {
            let key = key.trim_start_matches("!GetAtt ").trim_end_matches(".Arn");
            return format!("arn:aws:kms:{REGION}:{ACCOUNT}:key/{key}");
        }
        if let Some((_, _, arn)) = self
            .queues
            .iter()
            .find(|(logical, _, _)| resource == format!("!GetAtt {logical}.Arn"))
        {
            return arn.clone();
        }
        self.topics
            .iter()
            .find(|(logical, _)| resource == format!("!Ref {logical}"))
            .map_or_else(|| resource.to_owned(), |(_, arn)| arn.clone())
    }

    /// What `request` does, as `(action, resource)` pairs (a transaction:
    /// one per item; a send to an encrypted topic or queue: the key's two
    /// actions after it); empty for a request this guard does not judge.
    fn calls(&self, request: &HttpRequest) -> Vec<(String, String)> {
        self.calls_of(
            request.headers().get("x-amz-target"),
            request.body().bytes().unwrap_or_default(),
        )
    }

    /// What a request with `target` (its `X-Amz-Target` header: DynamoDB's
    /// and SQS's JSON protocols) and `body` does (without a target, the
    /// Query protocol's form: SNS's `Action=Publish`); a send to an
    /// encrypted topic or queue: the key's two actions after it.
    pub fn calls_of(&self, target: Option<&str>, body: &[u8]) -> Vec<(String, String)> {
        let mut calls = self.plain_calls(target, body);
        let sends: Vec<String> = calls
            .iter()
            .filter(|(a, _)| a == "sns:Publish" || a == "sqs:SendMessage")
            .map(|(_, r)| r.clone())
            .collect();
        for resource in sends {
            if let Some((_, key)) = self.encrypted.iter().find(|(r, _)| *r == resource) {
                calls.push(("kms:GenerateDataKey".to_owned(), key.clone()));
                calls.push(("kms:Decrypt".to_owned(), key.clone()));
            }
        }
        calls
    }

    /// [`Policy::calls_of`] but the KMS key's.
    fn plain_calls(&self, target: Option<&str>, body: &[u8]) -> Vec<(String, String)> {
        let table = format!("!GetAtt {}.Arn", self.table.0);
        if let Some(target) = target {
            // SQS: the JSON protocol, the queue by its URL.
            if let Some(op) = target.strip_prefix("AmazonSQS.") {
                let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                let url = body["QueueUrl"].as_str().unwrap_or_default();
                let resource = self.queues.iter().find(|(_, u, _)| u == url).map_or_else(
                    || url.to_owned(),
                    |(logical, _, _)| format!("!GetAtt {logical}.Arn"),
                );
                // A batch needs its single call's action (there is no
                // sqs:SendMessageBatch action in IAM).
                let action = op.strip_suffix("Batch").unwrap_or(op);
                return vec![(format!("sqs:{action}"), resource)];
            }
            let Some(op) = target.strip_prefix("DynamoDB_20120810.") else {
                return Vec::new();
            };
            let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            if op == "TransactWriteItems" {
                let items = body["TransactItems"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                return items
                    .iter()
                    .filter_map(|i| {
                        let kind = ["Put", "Update", "Delete", "ConditionCheck"]
                            .into_iter()
                            .find(|k| i.get(k).is_some())?;
                        let action = if kind == "ConditionCheck" {
                            "dynamodb:ConditionCheckItem".to_owned()
                        } else {
                            format!("dynamodb:{kind}Item")
                        };
                        Some((action, table.clone()))
                    })
                    .collect();
            }
            let resource = match body["IndexName"].as_str() {
                Some(index) => format!("!Sub ${{{}.Arn}}/index/{index}", self.table.0),
                None => table,
            };
            return vec![(format!("dynamodb:{op}"), resource)];
        }
        // SNS: the query protocol, a form body.
        let form = String::from_utf8_lossy(body);
        let field = |name: &str| {
            form.split('&').find_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                (k == name).then(|| {
                    percent_encoding::percent_decode_str(&v.replace('+', " "))
                        .decode_utf8_lossy()
                        .into_owned()
                })
            })
        };
        match field("Action").as_deref() {
            Some("Publish") => {
                let arn = field("TopicArn").unwrap_or_default();
                let resource = self
                    .topics
                    .iter()
                    .find(|(_, a)| *a == arn)
                    .map_or(arn, |(logical, _)| format!("!Ref {logical}"));
                vec![("sns:Publish".to_owned(), resource)]
            }
            _ => Vec::new(),
        }
    }

    /// AWS's refusal of `action` on `resource`.
    fn refusal(&self, request: &HttpRequest, action: &str, resource: &str) -> HttpResponse {
        let json = request.headers().get("x-amz-target").is_some();
        let refused = self.refusal_of(json, action, resource);
        let mut res = HttpResponse::new(
            refused.status.try_into().unwrap_or_else(|_| unreachable!()),
            SdkBody::from(refused.body),
        );
        res.headers_mut()
            .insert("content-type", refused.content_type);
        res
    }

    /// AWS's refusal of `action` on `resource`, as the JSON protocols
    /// (`json`: DynamoDB's, SQS's `AccessDeniedException`) or the Query
    /// protocol (SNS's `AuthorizationError`) answer it.
    pub fn refusal_of(&self, json: bool, action: &str, resource: &str) -> Refusal {
        let message = format!(
            "User: {} is not authorized to perform: {action} on resource: {} because no \
             identity-based policy allows the {action} action (the local stack checks \
             {}'s policy in the template)",
            self.principal(),
            self.arn(resource),
            self.function
        );
        // A key's refusal comes back under KMS's own code.
        let kms = action.starts_with("kms:");
        if json {
            Refusal {
                status: 400,
                content_type: "application/x-amz-json-1.0",
                body: serde_json::json!({
                    "__type": if kms { "KMS.AccessDeniedException" } else { "com.amazon.coral.service#AccessDeniedException" },
                    "Message": message,
                })
                .to_string(),
            }
        } else {
            let escaped = message
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;");
            Refusal {
                status: 403,
                content_type: "text/xml",
                body: format!(
                    "<ErrorResponse><Error><Type>Sender</Type><Code>{}</Code>\
                     <Message>{escaped}</Message></Error><RequestId>local</RequestId></ErrorResponse>",
                    if kms {
                        "KMSAccessDenied"
                    } else {
                        "AuthorizationError"
                    }
                ),
            }
        }
    }

    /// The first of `calls` this policy does not allow.
    pub fn refused<'c>(&self, calls: &'c [(String, String)]) -> Option<&'c (String, String)> {
        calls.iter().find(|(a, r)| !self.allows(a, r))
    }
}

/// An answer refusing a call: its HTTP status, content type and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

/// The HTTP client that enforces a [`Policy`] in front of `inner`.
#[derive(Debug, Clone)]
pub struct IamGuard {
    inner: SharedHttpClient,
    policy: Arc<Policy>,
}

impl IamGuard {
    /// In front of `inner` (the client's own HTTP client, or plain HTTP).
    pub fn new(inner: Option<SharedHttpClient>, policy: Arc<Policy>) -> Self {
        Self {
            inner: inner.unwrap_or_else(|| aws_smithy_http_client::Builder::new().build_http()),
            policy,
        }
    }
}

impl HttpClient for IamGuard {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(Guarded {
            inner: self.inner.http_connector(settings, components),
            policy: self.policy.clone(),
        })
    }
}

#[derive(Debug)]
struct Guarded {
    inner: SharedHttpConnector,
    policy: Arc<Policy>,
}

impl HttpConnector for Guarded {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let p = &self.policy;
        if let Some((action, resource)) = p.refused(&p.calls(&request)) {
            tracing::warn!(function = %p.function, action, resource, "IAM as deployed: refused");
            return HttpConnectorFuture::ready(Ok(p.refusal(&request, action, resource)));
        }
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CreateFunction's policy allowing `allowed`, over a local table,
    /// topic and queue (the proxy's tests use it too).
    pub(super) fn policy(allowed: &[(&str, &str)]) -> Policy {
        Policy {
            function: "CreateFunction".into(),
            allowed: allowed
                .iter()
                .map(|(a, r)| ((*a).to_owned(), (*r).to_owned()))
                .collect(),
            table: ("QueueTable".into(), "QueueTable".into()),
            topics: vec![(
                "ProcessTopic".into(),
                "arn:aws:sns:us-east-1:000000000000:ProcessTopic".into(),
            )],
            queues: vec![(
                "RestWakeQueue".into(),
                "http://127.0.0.1:1/000000000000/RestWakeQueue".into(),
                "arn:aws:sqs:us-east-1:000000000000:RestWakeQueue".into(),
            )],
            encrypted: Vec::new(),
        }
    }

    fn ddb(op: &str, body: Value) -> HttpRequest {
        let mut r = HttpRequest::new(SdkBody::from(body.to_string()));
        r.headers_mut()
            .insert("x-amz-target", format!("DynamoDB_20120810.{op}"));
        r
    }

    #[test]
    fn each_call_is_named_by_its_action_and_resource() {
        let p = policy(&[]);
        assert_eq!(
            p.calls(&ddb("Query", serde_json::json!({"IndexName": "due-index"}))),
            [(
                "dynamodb:Query".to_owned(),
                "!Sub ${QueueTable.Arn}/index/due-index".to_owned()
            )]
        );
        assert_eq!(
            p.calls(&ddb(
                "TransactWriteItems",
                serde_json::json!({"TransactItems": [{"Put": {}}, {"Update": {}}]})
            )),
            [
                (
                    "dynamodb:PutItem".to_owned(),
                    "!GetAtt QueueTable.Arn".to_owned()
                ),
                (
                    "dynamodb:UpdateItem".to_owned(),
                    "!GetAtt QueueTable.Arn".to_owned()
                )
            ]
        );
        let publish = HttpRequest::new(SdkBody::from(
            "Action=Publish&TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3AProcessTopic&Message=x",
        ));
        assert_eq!(
            p.calls(&publish),
            [("sns:Publish".to_owned(), "!Ref ProcessTopic".to_owned())]
        );
        let mut send = HttpRequest::new(SdkBody::from(
            serde_json::json!({"QueueUrl": "http://127.0.0.1:1/000000000000/RestWakeQueue"})
                .to_string(),
        ));
        send.headers_mut()
            .insert("x-amz-target", "AmazonSQS.SendMessageBatch");
        assert_eq!(
            p.calls(&send),
            [(
                "sqs:SendMessage".to_owned(),
                "!GetAtt RestWakeQueue.Arn".to_owned()
            )]
        );
        assert_eq!(
            p.arn("!GetAtt RestWakeQueue.Arn"),
            "arn:aws:sqs:us-east-1:000000000000:RestWakeQueue"
        );
    }

    #[test]
    fn a_call_outside_the_policy_is_refused_naming_role_action_and_resource() {
        let p = policy(&[
            ("dynamodb:PutItem", "!GetAtt QueueTable.Arn"),
            ("lambda:InvokeFunction", "(if IsLambdaRunner) !Ref Worker"),
        ]);
        assert!(p.allows("dynamodb:PutItem", "!GetAtt QueueTable.Arn"));
        assert!(p.allows("lambda:InvokeFunction", "!Ref Worker"));
        assert!(!p.allows("dynamodb:DeleteItem", "!GetAtt QueueTable.Arn"));
        let req = ddb("DeleteItem", serde_json::json!({}));
        let res = p.refusal(&req, "dynamodb:DeleteItem", "!GetAtt QueueTable.Arn");
        let body: Value = serde_json::from_slice(res.body().bytes().unwrap_or_default()).unwrap();
        let msg = body["Message"].as_str().unwrap();
        assert!(
            msg.contains("assumed-role/CreateFunctionRole/CreateFunction"),
            "{msg}"
        );
        assert!(msg.contains("dynamodb:DeleteItem"), "{msg}");
        assert!(
            msg.contains("arn:aws:dynamodb:us-east-1:000000000000:table/QueueTable"),
            "{msg}"
        );
    }

    /// A send to an encrypted topic or queue needs the key's
    /// `kms:GenerateDataKey` and `kms:Decrypt` (SNS and SQS document both
    /// for senders): without them it is refused under KMS's code, naming
    /// the key (issue 50, item 9).
    #[test]
    fn a_send_to_an_encrypted_topic_or_queue_needs_its_key() {
        let send_only = [
            ("sns:Publish", "!Ref ProcessTopic"),
            ("sqs:SendMessage", "!GetAtt RestWakeQueue.Arn"),
        ];
        let mut p = policy(&send_only);
        p.encrypted = Template::workspace().unwrap().encrypted();
        assert!(
            p.encrypted.contains(&(
                "!Ref ProcessTopic".to_owned(),
                "!GetAtt TopicKey.Arn".to_owned()
            )) && p.encrypted.contains(&(
                "!GetAtt RestWakeQueue.Arn".to_owned(),
                "!GetAtt TopicKey.Arn".to_owned()
            )),
            "{:?}",
            p.encrypted
        );
        let publish = HttpRequest::new(SdkBody::from(
            "Action=Publish&TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3AProcessTopic&Message=x",
        ));
        let calls = p.calls(&publish);
        assert_eq!(
            calls,
            [
                ("sns:Publish".to_owned(), "!Ref ProcessTopic".to_owned()),
                (
                    "kms:GenerateDataKey".to_owned(),
                    "!GetAtt TopicKey.Arn".to_owned()
                ),
                ("kms:Decrypt".to_owned(), "!GetAtt TopicKey.Arn".to_owned())
            ]
        );
        let (action, resource) = calls.iter().find(|(a, r)| !p.allows(a, r)).unwrap();
        let res = p.refusal(&publish, action, resource);
        let body = String::from_utf8_lossy(res.body().bytes().unwrap_or_default()).into_owned();
        assert!(body.contains("<Code>KMSAccessDenied</Code>"), "{body}");
        assert!(
            body.contains(
                "kms:GenerateDataKey on resource: arn:aws:kms:us-east-1:000000000000:key/TopicKey"
            ),
            "{body}"
        );
        let with_key = [
            send_only[0],
            send_only[1],
            ("kms:GenerateDataKey", "!GetAtt TopicKey.Arn"),
            ("kms:Decrypt", "!GetAtt TopicKey.Arn"),
        ];
        let mut p = policy(&with_key);
        p.encrypted = Template::workspace().unwrap().encrypted();
        assert!(p.calls(&publish).iter().all(|(a, r)| p.allows(a, r)));
    }
}
