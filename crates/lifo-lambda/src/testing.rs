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
