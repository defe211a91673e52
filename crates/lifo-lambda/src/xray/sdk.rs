//! One X-Ray subsegment per AWS SDK call (DynamoDB, SNS, Lambda Invoke):
//! an interceptor added to each client. It opens the subsegment when the
//! call starts, under the current trace ([`super::scope`]), and sends it
//! when the call ends, with the operation, the resource, the SDK's request
//! id and X-Ray's error, throttle and fault flags. Without a sampled trace
//! it does nothing.

use super::Subsegment;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use std::sync::{Arc, Mutex};

/// The interceptor: the service's name in X-Ray (`DynamoDB`, `SNS`,
/// `Lambda`) and the resource its client works on (`table_name`,
/// `topic_arn`, `function_name`), as X-Ray's `aws` fields.
#[derive(Debug, Clone)]
pub struct SdkSubsegments {
    service: &'static str,
    resource: Option<(&'static str, String)>,
}

impl SdkSubsegments {
    pub fn dynamodb(table: &str) -> Self {
        Self {
            service: "DynamoDB",
            resource: Some(("table_name", table.to_owned())),
        }
    }

    pub fn sns(topic_arn: &str) -> Self {
        Self {
            service: "SNS",
            resource: Some(("topic_arn", topic_arn.to_owned())),
        }
    }

    pub fn sqs(queue_url: &str) -> Self {
        Self {
            service: "SQS",
            resource: Some(("queue_url", queue_url.to_owned())),
        }
    }

    pub fn lambda(function: &str) -> Self {
        Self {
            service: "Lambda",
            resource: Some(("function_name", function.to_owned())),
        }
    }
}

/// The call's open subsegment, kept in the call's config bag.
#[derive(Debug, Clone)]
struct Open(Arc<Mutex<Option<Subsegment>>>);

impl Storable for Open {
    type Storer = StoreReplace<Self>;
}

impl Intercept for SdkSubsegments {
    fn name(&self) -> &'static str {
        "XraySdkSubsegments"
    }

    fn read_before_execution(
        &self,
        _ctx: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(mut s) = Subsegment::start(self.service) {
            s.namespace("aws");
            if let Some((key, value)) = &self.resource {
                s.field("aws", key, value.as_str());
            }
            cfg.interceptor_state()
                .store_put(Open(Arc::new(Mutex::new(Some(s)))));
        }
        Ok(())
    }

    fn read_after_execution(
        &self,
        ctx: &FinalizerInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(open) = cfg.load::<Open>() else {
            return Ok(());
        };
        let Some(mut s) = open.0.lock().ok().and_then(|mut o| o.take()) else {
            return Ok(());
        };
        if let Some(meta) = cfg.load::<aws_smithy_runtime_api::client::orchestrator::Metadata>() {
            s.field("aws", "operation", meta.name());
        }
        match ctx.response() {
            Some(res) => {
                let status = res.status().as_u16();
                let id = ["x-amzn-requestid", "x-amz-request-id"]
                    .iter()
                    .find_map(|h| res.headers().get(*h));
                if let Some(id) = id {
                    s.field("aws", "request_id", id);
                }
                let throttled = status == 429
                    || res.headers().get("x-amzn-errortype").is_some_and(|t| {
                        t.contains("Throttl") || t.contains("ProvisionedThroughputExceeded")
                    });
                if status >= 400 {
                    // The status only where it says something.
                    s.field("http", "response", serde_json::json!({ "status": status }));
                }
                if throttled {
                    s.flag("throttle");
                } else if (400..500).contains(&status) {
                    s.flag("error");
                } else if status >= 500 {
                    s.flag("fault");
                }
            }
            None => {
                s.flag("fault");
            }
        }
        s.end();
        Ok(())
    }
}
