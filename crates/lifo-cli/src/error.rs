//! A failed command: one line for the user, said once.
//!
//! An operation's error keeps its causes (`source()`), and some of them
//! already print their causes in their own text (`OpsError::Store` prints
//! the whole chain, for the HTTP API and the console): printing the chain
//! again doubled every SDK error. [`CliError::line`] says it once, and for
//! the failures of the way to AWS (no connection, no answer, an answer
//! that is not AWS's, a missing table) it names the endpoint and what was
//! wrong instead of the SDK's layers.

use aws_sdk_dynamodb::error::ConnectorError;
use lifo_ops::OpsError;
use std::error::Error;

/// A failed command: one line for the user.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// An operation's failure.
    #[error(transparent)]
    Ops(#[from] OpsError),
    /// The command line or its files (the operation never ran).
    #[error("{0}")]
    Other(String),
}

impl From<lifo_core::StoreError> for CliError {
    fn from(e: lifo_core::StoreError) -> Self {
        Self::Ops(OpsError::Store(e))
    }
}

/// What an AWS endpoint is, for a message: which service, where, and how
/// long the command waits for it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `DynamoDB`, `CloudFormation`, `Lambda`.
    pub service: &'static str,
    /// `--endpoint-url`'s value, or where the SDK's configuration points.
    pub url: Option<String>,
    pub region: Option<String>,
    pub connect_timeout_s: u64,
    pub read_timeout_s: u64,
}

impl Endpoint {
    /// `DynamoDB at http://127.0.0.1:9`, `DynamoDB (region eu-west-1)`.
    fn name(&self) -> String {
        match (&self.url, &self.region) {
            (Some(url), _) => format!("{} at {url}", self.service),
            (None, Some(region)) => format!("{} (region {region})", self.service),
            (None, None) => self.service.to_owned(),
        }
    }
}

impl CliError {
    /// The line `lifo` prints for this error (after `error: `): each cause
    /// once, and a failure on the way to `endpoint` as what went wrong
    /// there. Control characters are the caller's to escape.
    pub fn line(&self, endpoint: &Endpoint, table: &str) -> String {
        match self {
            Self::Other(message) => message.clone(),
            Self::Ops(OpsError::Store(e)) => sdk_line(e, endpoint, table),
            Self::Ops(OpsError::Interrupted {
                verb,
                done,
                asked,
                error,
            }) => format!(
                "{verb} {} of {asked}, then: {}",
                done.len(),
                sdk_line(error, endpoint, table)
            ),
            Self::Ops(e) => once(e),
        }
    }
}

/// `e` and its causes, each said once: a cause whose text the line already
/// holds (an error that prints its own causes) is not repeated.
pub fn once(e: &(dyn Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

/// The innermost cause of `e`: what the operating system or the parser
/// said.
fn innermost(e: &(dyn Error + 'static)) -> String {
    let mut last = e;
    while let Some(c) = last.source() {
        last = c;
    }
    last.to_string()
}

/// A store error on the way to `endpoint`: the transport's failure named,
/// a missing table named, anything else each cause once.
fn sdk_line(e: &lifo_core::StoreError, endpoint: &Endpoint, table: &str) -> String {
    let e: &(dyn Error + 'static) = e;
    transport(e, endpoint)
        .or_else(|| missing_table(e, endpoint, table))
        .unwrap_or_else(|| once(e))
}

/// The failure of the way to `endpoint` somewhere in `e`'s causes, if
/// that is what went wrong: no connection, no answer in time, an answer
/// that is not the service's, a request that could not be built.
pub fn transport(e: &(dyn Error + 'static), endpoint: &Endpoint) -> Option<String> {
    let name = endpoint.name();
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(conn) = c.downcast_ref::<ConnectorError>() {
            let why = innermost(conn);
            return Some(if conn.is_timeout() && why.contains("connect") {
                format!(
                    "no connection to {name} within {} s (--connect-timeout)",
                    endpoint.connect_timeout_s
                )
            } else if conn.is_timeout() {
                format!(
                    "{name} did not answer within {} s (--read-timeout)",
                    endpoint.read_timeout_s
                )
            } else if conn.is_io() {
                format!("cannot reach {name}: {why}")
            } else {
                format!("{name} did not answer as {} does: {why}", endpoint.service)
            });
        }
        // The SDK's own kinds (aws-smithy-runtime-api's `SdkError`
        // Display), whatever the operation's error type.
        match c.to_string().as_str() {
            "request has timed out" => {
                return Some(format!(
                    "{name} did not answer within {} s (--connect-timeout {} + --read-timeout {})",
                    endpoint.connect_timeout_s + endpoint.read_timeout_s,
                    endpoint.connect_timeout_s,
                    endpoint.read_timeout_s
                ));
            }
            // A modeled error with no code: the answer was not an AWS
            // error document (an HTML page, a body that is not JSON).
            "response error" | "unhandled error" => {
                return Some(format!(
                    "{name} answered something that is not {}'s answer: {}",
                    endpoint.service,
                    innermost(c)
                ));
            }
            "failed to construct request" => {
                return Some(format!(
                    "no request could be made for {name}: {}",
                    innermost(c)
                ));
            }
            _ => {}
        }
        cause = c.source();
    }
    None
}

/// DynamoDB's `ResourceNotFoundException` on a table operation: the table
/// (or its index) is not there.
fn missing_table(e: &(dyn Error + 'static), endpoint: &Endpoint, table: &str) -> Option<String> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.to_string().starts_with("ResourceNotFoundException") {
            return Some(format!(
                "table {table} (or one of its indexes) does not exist in {}: give the stack's \
                 table with --table or --stack",
                endpoint.name()
            ));
        }
        cause = c.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct SaysItsCause(#[source] std::io::Error);

    /// An error that prints its cause in its own text (as `OpsError::Store`
    /// does) once printed it twice ("Query failed: … refused: Query failed:
    /// … refused").
    #[test]
    fn a_cause_already_said_is_not_said_again() {
        let e = SaysItsCause(std::io::Error::other("refused"));
        assert_eq!(once(&e), "outer: refused");
        let e = lifo_core::StoreError::Other {
            operation: "Query",
            source: Box::new(std::io::Error::other("refused")),
        };
        let ops = CliError::Ops(OpsError::Store(e));
        let endpoint = Endpoint {
            service: "DynamoDB",
            url: None,
            region: None,
            connect_timeout_s: 5,
            read_timeout_s: 20,
        };
        assert_eq!(ops.line(&endpoint, "QueueTable"), "Query failed: refused");
    }
}
