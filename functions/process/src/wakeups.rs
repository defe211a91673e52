//! The wake-ups an invocation was started by: an SNS event of one or more
//! [`Wakeup`]s, read into what the invocation needs of them.

use crate::ProcessError;
use lifo_lambda::Wakeup;

/// What woke an invocation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wakeups {
    /// SNS records (wake-ups) in the event.
    pub records: usize,
    /// Shard groups the wake-ups named (more than one processor): taken
    /// first, in this order.
    pub groups: Vec<u32>,
    /// The X-Ray trace of the invocation before this one in the tail-call
    /// loop (each starts its own).
    pub previous_trace: Option<String>,
    /// The latest rest end a rest alarm among the wake-ups named (epoch
    /// ms): the invocation looks until then ([`lifo_lambda::alarm`]).
    pub wake_at: Option<u64>,
    /// What a tail call's claim policy handed over
    /// ([`crate::select::Handover`]).
    pub handover: Option<Handover>,
}

/// What a tail call's claim policy handed over, and for which group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handover {
    /// The shard group it was for (more than one processor).
    pub group: Option<u32>,
    pub value: crate::select::Handover,
}

impl Wakeups {
    /// One wake-up naming no group (the sweep's, a test's).
    pub fn one() -> Self {
        Self {
            records: 1,
            groups: Vec::new(),
            previous_trace: None,
            wake_at: None,
            handover: None,
        }
    }

    /// [`Wakeups::parse`] for the event as the runtime hands it over.
    pub fn parse_raw(event: &serde_json::value::RawValue) -> Result<Self, ProcessError> {
        let event = lifo_lambda::event::parse(event)
            .map_err(|e| ProcessError::Malformed(format!("the event is {e}")))?;
        Self::parse(event)
    }

    /// Checks that `event` is an SNS event and reads its wake-ups. Any
    /// wake-up means "look"; one that names a shard group (a [`Wakeup`]
    /// with `group`) says where.
    pub fn parse(event: serde_json::Value) -> Result<Self, ProcessError> {
        // serde reads a struct from an array too: `[[]]` would be an SNS
        // event of no records.
        if !event
            .get("Records")
            .is_some_and(serde_json::Value::is_array)
        {
            return Err(ProcessError::Malformed(
                "an SNS event is an object with a \"Records\" array".to_owned(),
            ));
        }
        let sns: aws_lambda_events::sns::SnsEvent =
            serde_json::from_value(event).map_err(|e| ProcessError::Malformed(e.to_string()))?;
        let mut groups = Vec::new();
        let mut previous_trace = None;
        let mut wake_at: Option<u64> = None;
        let mut handover = None;
        for r in &sns.records {
            let w = serde_json::from_str::<Wakeup>(&r.sns.message).ok();
            // Only an object is a handover: anything else (another
            // version's) is ignored.
            if handover.is_none()
                && let Some(w) = &w
                && let Some(serde_json::Value::Object(value)) = &w.handover
            {
                handover = Some(Handover {
                    group: w.group,
                    value: value.clone(),
                });
            }
            if previous_trace.is_none() {
                previous_trace = w.as_ref().and_then(|w| w.previous_trace.clone());
            }
            wake_at = wake_at.max(w.as_ref().and_then(|w| w.wake_at));
            if let Some(g) = w.and_then(|w| w.group)
                && !groups.contains(&g)
            {
                groups.push(g);
            }
        }
        Ok(Self {
            records: sns.records.len(),
            groups,
            previous_trace,
            wake_at,
            handover,
        })
    }
}
