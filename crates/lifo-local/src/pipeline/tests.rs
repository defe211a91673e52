use super::*;

/// The local stack behaves as deployed unless a test says otherwise:
/// the default options take the template's batching window and sweep
/// rate, and AWS's timings.
#[test]
fn the_default_options_are_the_templates_and_aws() {
    let t = crate::Template::workspace().unwrap();
    let o = PipelineOptions::default();
    assert_eq!((o.batching_window, o.sweep), (None, SweepRate::Template));
    assert_eq!(o.timing, AwsTiming::default());
    let (window, sweep) = o.resolve(&t).unwrap();
    let text = include_str!("../../../../template.yaml");
    let declared = |key: &str| -> String {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .map(|v| v.trim().to_owned())
            .unwrap_or_default()
    };
    assert_eq!(
        window,
        Duration::from_secs(declared("MaximumBatchingWindowInSeconds:").parse().unwrap())
    );
    assert_eq!(declared("Schedule: rate("), "1 minute)");
    assert_eq!(sweep, Some(Duration::from_secs(60)));
    let fast = PipelineOptions::fast().resolve(&t).unwrap();
    assert_eq!(
        fast,
        (Duration::from_millis(500), Some(Duration::from_secs(5)))
    );
}
