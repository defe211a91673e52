//! The chaos run's injected faults: DynamoDB's and SNS's answers replaced
//! by errors after the request was applied.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeDeserializationInterceptorContextMut;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Replaces a response by a throttling or 5xx error at `rate`, after the
/// request reached the server (the write may have been applied).
#[derive(Debug)]
pub struct Faults {
    pub rate: f64,
    pub json: bool,
    pub injected: Arc<AtomicUsize>,
    pub enabled: Arc<AtomicBool>,
}

impl Intercept for Faults {
    fn name(&self) -> &'static str {
        "chaos-faults"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if !self.enabled.load(Ordering::Relaxed) || fastrand::f64() >= self.rate {
            return Ok(());
        }
        self.injected.fetch_add(1, Ordering::Relaxed);
        let throttle = fastrand::bool();
        let response = context.response_mut();
        let (status, code) = if throttle {
            (400u16, "ThrottlingException")
        } else {
            (500, "InternalServerError")
        };
        *response.status_mut() = status.try_into()?;
        let body = if self.json {
            response.headers_mut().insert("x-amzn-errortype", code);
            format!(
                r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{code}","message":"injected"}}"#
            )
        } else {
            let code = if throttle {
                "Throttling"
            } else {
                "InternalError"
            };
            format!(
                "<ErrorResponse><Error><Type>Receiver</Type><Code>{code}</Code><Message>injected</Message></Error><RequestId>x</RequestId></ErrorResponse>"
            )
        };
        *response.body_mut() = SdkBody::from(body);
        Ok(())
    }
}
