//! The overview's freshness chart: age at start (how long a task waited
//! between becoming claimable and being claimed) per 5 minutes over the
//! last hour, p50 and p95, drawn as an inline SVG. From a stack's
//! CloudWatch metric `AgeAtStartMs` (one GetMetricData per page load), or
//! on a local table from `Store::started_since` (a scan, free there).

use super::text::seconds;
use lifo_lab::report::percentile;
use maud::{Markup, html};

/// Minutes per bucket, and buckets in the hour.
pub const BUCKET_MS: u64 = 5 * 60_000;
pub const BUCKETS: u64 = 12;

/// One 5-minute bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Start of the bucket, epoch ms.
    pub from_ms: u64,
    pub started: usize,
    pub p50_ms: u64,
    pub p95_ms: u64,
}

/// The start of the first bucket: buckets end with the current 5 minutes
/// and start on 5-minute boundaries, as CloudWatch's periods do.
pub fn first_bucket(now_ms: u64) -> u64 {
    (now_ms / BUCKET_MS * BUCKET_MS).saturating_sub((BUCKETS - 1) * BUCKET_MS)
}

/// Buckets the hour up to `now_ms` from `(startedAt, readyAt)` pairs.
pub fn buckets(starts: &[(u64, u64)], now_ms: u64) -> Vec<Bucket> {
    let first = first_bucket(now_ms);
    (0..BUCKETS)
        .map(|i| {
            let from_ms = first + i * BUCKET_MS;
            let mut ages: Vec<u64> = starts
                .iter()
                .filter(|(started, _)| (from_ms..from_ms + BUCKET_MS).contains(started))
                .map(|(started, ready)| started.saturating_sub(*ready))
                .collect();
            ages.sort_unstable();
            Bucket {
                from_ms,
                started: ages.len(),
                p50_ms: percentile(&ages, 50.0),
                p95_ms: percentile(&ages, 95.0),
            }
        })
        .collect()
}

/// The hour up to `now_ms` from CloudWatch: `AgeAtStartMs` p50, p95 and
/// SampleCount per 5 minutes, dimension `Service` = the stack's name.
pub async fn from_cloudwatch(
    cw: &aws_sdk_cloudwatch::Client,
    namespace: &str,
    service: &str,
    now_ms: u64,
) -> Result<Vec<Bucket>, String> {
    use aws_sdk_cloudwatch::primitives::DateTime;
    use aws_sdk_cloudwatch::types::{Dimension, Metric, MetricDataQuery, MetricStat};
    let first = first_bucket(now_ms);
    let metric = Metric::builder()
        .namespace(namespace)
        .metric_name("AgeAtStartMs")
        .dimensions(Dimension::builder().name("Service").value(service).build())
        .build();
    let query = |id: &str, stat: &str| {
        let stat = MetricStat::builder()
            .metric(metric.clone())
            .period((BUCKET_MS / 1000) as i32)
            .stat(stat)
            .build();
        MetricDataQuery::builder().id(id).metric_stat(stat).build()
    };
    let mut buckets: Vec<Bucket> = (0..BUCKETS)
        .map(|i| Bucket {
            from_ms: first + i * BUCKET_MS,
            started: 0,
            p50_ms: 0,
            p95_ms: 0,
        })
        .collect();
    let mut pages = cw
        .get_metric_data()
        .start_time(DateTime::from_millis(first as i64))
        .end_time(DateTime::from_millis((first + BUCKETS * BUCKET_MS) as i64))
        .metric_data_queries(query("p50", "p50"))
        .metric_data_queries(query("p95", "p95"))
        .metric_data_queries(query("started", "SampleCount"))
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| {
            format!(
                "reading AgeAtStartMs from CloudWatch: {}",
                lifo_core::error::chain(&e)
            )
        })?;
        for r in page.metric_data_results() {
            for (t, v) in r.timestamps().iter().zip(r.values()) {
                let Some(i) = t
                    .to_millis()
                    .ok()
                    .and_then(|ms| u64::try_from(ms).ok())
                    .and_then(|ms| ms.checked_sub(first))
                    .map(|d| (d / BUCKET_MS) as usize)
                else {
                    continue;
                };
                let Some(b) = buckets.get_mut(i) else {
                    continue;
                };
                let v = v.max(0.0).round() as u64;
                match r.id() {
                    Some("p50") => b.p50_ms = v,
                    Some("p95") => b.p95_ms = v,
                    Some("started") => b.started = v as usize,
                    _ => {}
                }
            }
        }
    }
    Ok(buckets)
}

/// The chart: one bar pair per bucket (p50 solid, p95 light), scaled to the
/// largest p95, with its numbers in a table for screen readers and tests.
pub fn chart(buckets: &[Bucket]) -> Markup {
    const W: u64 = 900;
    const H: u64 = 150;
    let top = buckets.iter().map(|b| b.p95_ms).max().unwrap_or(0).max(1);
    let slot = W / BUCKETS;
    let height = |ms: u64| (ms * (H - 34) / top).max(u64::from(ms > 0));
    html! {
        figure.chart {
            svg viewBox=(format!("0 0 {W} {H}")) width=(W) height=(H) role="img" aria-label="age at start, p50 and p95, per 5 minutes" {
                line x1="0" y1=(H - 14) x2=(W) y2=(H - 14) class="axis" {}
                @for (i, b) in buckets.iter().enumerate() {
                    @let x = i as u64 * slot + 6;
                    rect class="p95" x=(x) y=(H - 14 - height(b.p95_ms)) width=(slot / 2 - 4) height=(height(b.p95_ms)) {
                        title { "p95 " (seconds(b.p95_ms)) ", " (b.started) " started" }
                    }
                    rect class="p50" x=(x + slot / 2 - 4) y=(H - 14 - height(b.p50_ms)) width=(slot / 2 - 4) height=(height(b.p50_ms)) {
                        title { "p50 " (seconds(b.p50_ms)) }
                    }
                }
                text x="4" y="12" class="label" { "max p95 " (seconds(top)) }
                text x="4" y=(H - 1) class="label" { "1 h ago" }
                text x=(W - 4) y=(H - 1) class="label end" { "now" }
            }
            figcaption {
                span.key.p95 {} " p95 " span.key.p50 {} " p50 of age at start, per 5 minutes, last hour (oldest left)"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_fall_in_their_five_minutes_with_nearest_rank_percentiles() {
        let last = 10 * 3_600_000; // the last bucket's start
        let now = last + 4 * 60_000;
        let starts: Vec<(u64, u64)> = (1..=20)
            .map(|i| (last + i, last + i - i * 100)) // ages 100 ms … 2000 ms
            .chain([(first_bucket(now) - 1, 0)]) // before the hour: left out
            .collect();
        let b = buckets(&starts, now);
        assert_eq!(b.len(), 12);
        assert_eq!(b[11].started, 20);
        assert_eq!((b[11].p50_ms, b[11].p95_ms), (1000, 1900));
        assert!(b[..11].iter().all(|b| b.started == 0 && b.p95_ms == 0));
        let svg = chart(&b).into_string();
        assert!(svg.contains("p95 1.9 s, 20 started"), "{svg}");
    }

    #[tokio::test]
    async fn cloudwatch_answers_fill_their_buckets_and_errors_say_what_failed() {
        use aws_sdk_cloudwatch::operation::get_metric_data::{
            GetMetricDataError, GetMetricDataOutput,
        };
        use aws_sdk_cloudwatch::primitives::DateTime;
        use aws_sdk_cloudwatch::types::MetricDataResult;
        use aws_smithy_mocks::{mock, mock_client};
        let last = 10 * 3_600_000;
        let now = last + 60_000;
        let series = move |id: &str, v: f64| {
            MetricDataResult::builder()
                .id(id)
                .timestamps(DateTime::from_millis(last as i64))
                .values(v)
                .timestamps(DateTime::from_millis((last - 3_600_000) as i64)) // outside
                .values(9e9)
                .build()
        };
        let ok = mock!(aws_sdk_cloudwatch::Client::get_metric_data)
            .match_requests(|r| {
                let stats: Vec<&str> = r
                    .metric_data_queries()
                    .iter()
                    .filter_map(|q| q.metric_stat()?.stat())
                    .collect();
                let dims = r.metric_data_queries()[0]
                    .metric_stat()
                    .and_then(|s| s.metric())
                    .map(|m| m.dimensions().to_vec())
                    .unwrap_or_default();
                stats == ["p50", "p95", "SampleCount"]
                    && dims.len() == 1
                    && dims[0].value() == Some("lifo-queue")
            })
            .then_output(move || {
                GetMetricDataOutput::builder()
                    .metric_data_results(series("p50", 120.4))
                    .metric_data_results(series("p95", 900.0))
                    .metric_data_results(series("started", 42.0))
                    .build()
            });
        let cw = mock_client!(aws_sdk_cloudwatch, [&ok]);
        let b = from_cloudwatch(&cw, "LifoQueue", "lifo-queue", now)
            .await
            .unwrap();
        assert_eq!(b.len(), 12);
        assert_eq!(
            b[11],
            Bucket {
                from_ms: last,
                started: 42,
                p50_ms: 120,
                p95_ms: 900
            }
        );
        assert!(b[..11].iter().all(|b| b.started == 0));

        let denied = mock!(aws_sdk_cloudwatch::Client::get_metric_data).then_error(|| {
            GetMetricDataError::generic(
                aws_sdk_cloudwatch::error::ErrorMetadata::builder()
                    .code("AccessDenied")
                    .message("not authorized to perform cloudwatch:GetMetricData")
                    .build(),
            )
        });
        let cw = mock_client!(aws_sdk_cloudwatch, [&denied]);
        let err = from_cloudwatch(&cw, "LifoQueue", "lifo-queue", now)
            .await
            .unwrap_err();
        assert!(
            err.starts_with("reading AgeAtStartMs from CloudWatch: "),
            "{err}"
        );
        assert!(err.contains("not authorized"), "{err}");
    }
}
