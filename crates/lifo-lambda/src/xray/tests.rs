use super::*;
use std::time::Duration;

const ROOT: &str = "1-6743a1b2-0123456789abcdef01234567";
const HEADER_SAMPLED: &str =
    "Root=1-6743a1b2-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1";

/// A UDP socket standing in for the daemon; the documents it got.
pub(crate) struct Daemon(UdpSocket);

impl Daemon {
    pub(crate) fn start() -> Self {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        Self(s)
    }

    pub(crate) fn tracer(&self) -> Tracer {
        Tracer::to(self.0.local_addr().unwrap())
    }

    pub(crate) fn received(&self) -> Vec<Value> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; MAX_DATAGRAM + 1];
        while let Ok(n) = self.0.recv(&mut buf) {
            let text = std::str::from_utf8(&buf[..n]).unwrap();
            let (header, doc) = text.split_once('\n').unwrap();
            assert_eq!(header, HEADER.trim_end());
            out.push(serde_json::from_str(doc).unwrap());
        }
        out
    }
}

#[test]
fn the_header_is_parsed_and_anything_else_is_refused() {
    let h = TraceHeader::parse(HEADER_SAMPLED).unwrap();
    assert_eq!(
        (h.root.as_str(), h.parent.as_deref(), h.sampled),
        (ROOT, Some("53995c3f42cd8ad8"), Some(true))
    );
    assert_eq!(
        h.with_parent("0123456789abcdef"),
        format!("Root={ROOT};Parent=0123456789abcdef;Sampled=1")
    );
    assert_eq!(
        TraceHeader::parse(&format!("Root={ROOT};Sampled=0")).map(|h| h.sampled),
        Some(Some(false))
    );
    for bad in [
        "",
        "Root=2-x-y",
        "Parent=53995c3f42cd8ad8",
        "Root=1-6743a1b2-short",
    ] {
        assert_eq!(TraceHeader::parse(bad), None, "{bad}");
    }
    assert!(is_hex(&new_id(), 16));
    assert_eq!(
        daemon_address("udp:127.0.0.1:2000 tcp:127.0.0.1:2000"),
        "127.0.0.1:2000".parse().ok()
    );
    assert_eq!(
        daemon_address("127.0.0.1:2001"),
        "127.0.0.1:2001".parse().ok()
    );
}

#[tokio::test]
async fn a_sampled_trace_sends_nested_subsegments_and_an_unsampled_one_nothing() {
    let daemon = Daemon::start();
    let tracer = daemon.tracer();
    let trace = Trace::sampled(&tracer, Some(HEADER_SAMPLED));
    assert!(trace.is_some());
    scope(trace, async {
        let mut outer = Subsegment::start("task").unwrap();
        outer.annotate("taskId", "t-1").namespace("remote");
        scope(Some(outer.as_parent()), async {
            let mut inner = Subsegment::start("DynamoDB").unwrap();
            inner
                .field("aws", "operation", "UpdateItem")
                .flag("throttle");
            inner.end();
        })
        .await;
        outer.end();
    })
    .await;
    let docs = daemon.received();
    // One datagram: the inner subsegment travels inside the outer one.
    assert_eq!(docs.len(), 1, "{docs:?}");
    let outer = &docs[0];
    let inner = &outer["subsegments"][0];
    assert_eq!(outer["parent_id"], "53995c3f42cd8ad8");
    assert_eq!(
        (outer["type"].as_str(), outer["trace_id"].as_str()),
        (Some("subsegment"), Some(ROOT))
    );
    assert!(
        inner.get("parent_id").is_none() && inner.get("trace_id").is_none(),
        "{inner}"
    );
    for d in [outer, inner] {
        assert!(d["start_time"].as_f64() <= d["end_time"].as_f64());
    }
    assert!(outer["start_time"].as_f64() <= inner["start_time"].as_f64());
    assert!(inner["end_time"].as_f64() <= outer["end_time"].as_f64());
    assert_eq!(outer["annotations"]["taskId"], "t-1");
    assert_eq!(
        (inner["throttle"].as_bool(), inner["error"].as_bool()),
        (Some(true), Some(true))
    );

    // Not sampled, no header, or no daemon: nothing at all.
    for header in [
        Some(format!("Root={ROOT};Parent=53995c3f42cd8ad8;Sampled=0")),
        None,
    ] {
        assert!(Trace::sampled(&tracer, header.as_deref()).is_none());
    }
    assert!(Trace::sampled(&Tracer::default(), Some(HEADER_SAMPLED)).is_none());
    scope(None, async { assert!(Subsegment::start("x").is_none()) }).await;
    assert!(Subsegment::start("outside any scope").is_none());
    assert!(daemon.received().is_empty());
}

#[tokio::test]
async fn a_dropped_subsegment_is_a_fault_and_an_oversized_one_loses_its_annotations() {
    let daemon = Daemon::start();
    let trace = Trace::sampled(&daemon.tracer(), Some(HEADER_SAMPLED)).unwrap();
    drop(Subsegment::under(trace.clone(), "cancelled"));
    let mut big = Subsegment::under(trace.clone(), "big");
    big.annotate("blob", "x".repeat(MAX_DATAGRAM));
    big.end();
    let docs = daemon.received();
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0]["fault"], true);
    assert!(docs[1].get("annotations").is_none(), "{}", docs[1]);
    // A daemon that is not there changes nothing for the caller.
    let gone = {
        let d = Daemon::start();
        d.0.local_addr().unwrap()
    };
    let trace = Trace::sampled(&Tracer::to(gone), Some(HEADER_SAMPLED)).unwrap();
    for _ in 0..100 {
        Subsegment::under(trace.clone(), "into the void").end();
    }
}
