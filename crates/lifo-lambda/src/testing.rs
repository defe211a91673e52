//! SDK mocks the functions' tests share (the `test-util` feature).

use aws_sdk_sns::operation::publish::PublishOutput;
use aws_smithy_mocks::{Rule, mock};

/// SNS accepting every publish (message id `m`).
pub fn publish() -> Rule {
    mock!(aws_sdk_sns::Client::publish)
        .sequence()
        .output(|| PublishOutput::builder().message_id("m").build())
        .repeatedly()
        .build()
}

/// An endpoint that answers every request with `body` (200) and keeps the
/// X-Ray trace header each request carried on the wire.
#[derive(Debug, Clone)]
pub struct TraceWire {
    body: &'static str,
    headers: std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>,
}

impl TraceWire {
    pub fn answering(body: &'static str) -> Self {
        Self {
            body,
            headers: std::sync::Arc::default(),
        }
    }

    /// The trace header of each request so far, in order.
    pub fn headers(&self) -> Vec<Option<String>> {
        self.headers.lock().map(|h| h.clone()).unwrap_or_default()
    }

    /// An SDK HTTP client sending to this endpoint.
    pub fn http_client(&self) -> aws_smithy_runtime_api::client::http::SharedHttpClient {
        let wire = self.clone();
        aws_smithy_runtime_api::client::http::http_client_fn(move |_, _| {
            aws_smithy_runtime_api::client::http::SharedHttpConnector::new(wire.clone())
        })
    }
}

impl aws_smithy_runtime_api::client::http::HttpConnector for TraceWire {
    fn call(
        &self,
        request: aws_smithy_runtime_api::client::orchestrator::HttpRequest,
    ) -> aws_smithy_runtime_api::client::http::HttpConnectorFuture {
        let header = request.headers().get("x-amzn-trace-id").map(str::to_owned);
        if let Ok(mut h) = self.headers.lock() {
            h.push(header);
        }
        aws_smithy_runtime_api::client::http::HttpConnectorFuture::ready(Ok(
            aws_smithy_runtime_api::client::orchestrator::HttpResponse::new(
                aws_smithy_runtime_api::http::StatusCode::try_from(200u16)
                    .unwrap_or_else(|_| unreachable!("200 is a status")),
                aws_smithy_types::body::SdkBody::from(self.body),
            ),
        ))
    }
}

/// What the SDK's recursion detection does in Lambda: the invocation's
/// `_X_AMZN_TRACE_ID` as the `X-Amzn-Trace-Id` header of every call.
#[derive(Debug)]
pub struct LambdasTraceHeader;

impl aws_smithy_runtime_api::client::interceptors::Intercept for LambdasTraceHeader {
    fn name(&self) -> &'static str {
        "LambdasTraceHeader"
    }

    fn modify_before_signing(
        &self,
        context: &mut aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextMut<'_>,
        _: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        context.request_mut().headers_mut().insert(
            "x-amzn-trace-id",
            "Root=1-6743a1b2-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1",
        );
        Ok(())
    }
}
