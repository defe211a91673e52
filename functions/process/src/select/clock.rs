//! The clock the claim policy reads: the wall clock, or in this crate's
//! tests a clock the scenario corpus sets (`select::corpus`), so that a
//! scripted run gives the same picks every time.

use std::time::Instant;

#[cfg(test)]
thread_local! {
    /// The scripted time (epoch ms), when a test set one.
    static SCRIPTED: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
    /// The instant that stands for [`SCRIPT_EPOCH_MS`].
    static BASE: Instant = Instant::now();
}

/// The epoch ms a scripted clock starts from.
#[cfg(test)]
pub const SCRIPT_EPOCH_MS: u64 = 1_800_000_000_000;

/// Sets the scripted time (epoch ms, at least [`SCRIPT_EPOCH_MS`]), or
/// goes back to the wall clock.
#[cfg(test)]
pub fn script(at_ms: Option<u64>) {
    SCRIPTED.with(|s| s.set(at_ms));
}

/// The time (epoch ms).
pub fn now_ms() -> u64 {
    #[cfg(test)]
    if let Some(ms) = SCRIPTED.with(std::cell::Cell::get) {
        return ms;
    }
    lifo_core::now_ms()
}

/// The time, as an instant.
pub fn now() -> Instant {
    #[cfg(test)]
    if let Some(ms) = SCRIPTED.with(std::cell::Cell::get) {
        let since = std::time::Duration::from_millis(ms.saturating_sub(SCRIPT_EPOCH_MS));
        return BASE.with(|b| *b + since);
    }
    Instant::now()
}
