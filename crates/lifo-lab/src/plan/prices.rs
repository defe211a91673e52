//! AWS's on-demand prices that `lifo plan` charges with, in one table,
//! each with its source and the date of the figure, and the two rules that
//! turn a task's use into dollars: a price per unit, and SQS's requests
//! per message.
//!
//! The figures were gathered on [`CHECKED`], without live access to AWS's
//! pages: AWS draws its price tables with JavaScript, so stored copies
//! often show none, and each figure was checked against other sources
//! (AWS's compute blog for Lambda's tiers, third-party price summaries of
//! 2025 and 2026). Region us-east-1; no free tier (it is per account and
//! month, not per task).

/// When the figures below were gathered.
pub const CHECKED: &str = "2026-11-28";
/// Where they apply.
pub const REGION: &str = "us-east-1";

/// One price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub name: &'static str,
    /// Dollars per [`Price::per`] units.
    pub usd: f64,
    pub per: f64,
    /// What it is charged for (plural).
    pub unit: &'static str,
    pub source: &'static str,
    /// The date of the figure, as its source gives it.
    pub as_of: &'static str,
}

impl Price {
    /// What the price is per, as printed: "1M invocations", "GB-second".
    pub fn per_text(&self) -> String {
        if self.per == 1.0 {
            self.unit.to_owned()
        } else if self.per == 1e6 {
            format!("1M {}", self.unit)
        } else {
            format!("{} {}", self.per, self.unit)
        }
    }

    /// Dollars per million tasks that each use `units_per_task` units.
    pub fn usd_per_million_tasks(&self, units_per_task: f64) -> f64 {
        units_per_task * 1e6 * self.usd / self.per
    }
}

pub const DYNAMODB_WRITE: Price = Price {
    name: "DynamoDB on-demand write request unit",
    usd: 0.625,
    per: 1e6,
    unit: "write units (a standard write, per started KB)",
    source: "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    as_of: "2024-11-01 (the on-demand cut's effective date)",
};

pub const DYNAMODB_READ: Price = Price {
    name: "DynamoDB on-demand read request unit",
    usd: 0.125,
    per: 1e6,
    unit: "read units (4 KB strongly consistent; eventually consistent, half)",
    source: "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    as_of: "2024-11-01 (the on-demand cut's effective date)",
};

pub const SNS_PUBLISH: Price = Price {
    name: "SNS standard topic publish",
    usd: 0.50,
    per: 1e6,
    unit: "publishes (per 64 KB); no charge for delivery to Lambda (unverified)",
    source: "https://aws.amazon.com/sns/pricing/",
    as_of: "undated page",
};

pub const LAMBDA_REQUEST: Price = Price {
    name: "Lambda request",
    usd: 0.20,
    per: 1e6,
    unit: "invocations",
    source: "https://aws.amazon.com/lambda/pricing/",
    as_of: "undated page (rate unchanged since 2021)",
};

pub const LAMBDA_ARM64_GB_SECOND: Price = Price {
    name: "Lambda duration, arm64, first tier",
    usd: 0.000_013_333_4,
    per: 1.0,
    unit: "GB-second",
    source: "https://aws.amazon.com/lambda/pricing/",
    as_of: "undated page; tiers per AWS's compute blog, 2022",
};

pub const SQS_REQUEST: Price = Price {
    name: "SQS standard queue request",
    usd: 0.40,
    per: 1e6,
    unit: "requests (per 64 KB)",
    source: "https://aws.amazon.com/sqs/pricing/",
    as_of: "undated page; confirmed by third parties, 2026-03 and 2026-06",
};

/// Every price used, as printed under the answer.
pub const PRICES: [Price; 6] = [
    DYNAMODB_WRITE,
    DYNAMODB_READ,
    SNS_PUBLISH,
    LAMBDA_REQUEST,
    LAMBDA_ARM64_GB_SECOND,
    SQS_REQUEST,
];

/// SQS bills each 64 KB of a request's payload as one request.
pub const SQS_CHUNK_BYTES: usize = 64 * 1024;

/// SQS requests per message of `payload_bytes`, unbatched: a send and a
/// receive that carry it (a request per 64 KB chunk each) and a delete
/// that does not.
pub fn sqs_requests_per_message(payload_bytes: usize) -> f64 {
    let chunks = payload_bytes.div_ceil(SQS_CHUNK_BYTES).max(1);
    (2 * chunks + 1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_price_per_unit_is_dollars_per_million_tasks() {
        // 6 write units a task: $3.75 per million tasks.
        assert!((DYNAMODB_WRITE.usd_per_million_tasks(6.0) - 3.75).abs() < 1e-12);
        assert!((DYNAMODB_READ.usd_per_million_tasks(0.5) - 0.0625).abs() < 1e-12);
        // 1 GB-s a task at arm64's rate: $13.33 per million.
        assert!((LAMBDA_ARM64_GB_SECOND.usd_per_million_tasks(1.0) - 13.3334).abs() < 1e-9);
        assert_eq!(SNS_PUBLISH.usd_per_million_tasks(0.0), 0.0);
    }

    /// Send, receive and delete: $1.20 a million up to 64 KB; a send and
    /// a receive of 100 KB are two requests each.
    #[test]
    fn sqs_is_three_requests_a_message_up_to_64_kb() {
        for (bytes, requests) in [
            (0, 3.0),
            (4096, 3.0),
            (65_536, 3.0),
            (65_537, 5.0),
            (100 * 1024, 5.0),
        ] {
            assert_eq!(sqs_requests_per_message(bytes), requests, "{bytes} B");
        }
        let usd = SQS_REQUEST.usd_per_million_tasks(sqs_requests_per_message(4096));
        assert!((usd - 1.20).abs() < 1e-12, "{usd}");
    }

    #[test]
    fn every_price_names_its_source_and_date() {
        for p in PRICES {
            assert!(
                p.source.starts_with("https://aws.amazon.com/"),
                "{}",
                p.name
            );
            assert!(
                !p.as_of.is_empty() && p.usd >= 0.0 && p.per > 0.0,
                "{}",
                p.name
            );
        }
    }
}
