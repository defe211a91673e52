//! Realistic task payloads for benchmarks and tests: seeded JSON documents
//! shaped like the events people queue (an IoT reading, a webhook, a job
//! description), with the entropy of real data (ids, timestamps, measured
//! values, free text, nested lists) rather than a repeated character, which
//! any compressor shrinks to nothing.

use serde_json::{Map, Value, json};

const WORDS: &[&str] = &[
    "sensor",
    "gateway",
    "firmware",
    "battery",
    "signal",
    "order",
    "invoice",
    "customer",
    "shipment",
    "warehouse",
    "thumbnail",
    "render",
    "upload",
    "region",
    "latency",
    "retry",
    "account",
    "payment",
    "refund",
    "session",
    "device",
    "update",
    "alert",
    "threshold",
    "temperature",
    "humidity",
    "pressure",
    "voltage",
    "status",
    "queue",
    "priority",
    "label",
];

fn word(rng: &mut fastrand::Rng) -> &'static str {
    WORDS[rng.usize(..WORDS.len())]
}

fn sentence(rng: &mut fastrand::Rng, words: usize) -> String {
    (0..words).map(|_| word(rng)).collect::<Vec<_>>().join(" ")
}

fn uuid(rng: &mut fastrand::Rng) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        rng.u32(..),
        rng.u16(..),
        rng.u16(..),
        rng.u16(..),
        rng.u64(..) & 0xffff_ffff_ffff
    )
}

/// One reading: what a fleet of devices reports, many times over.
fn reading(rng: &mut fastrand::Rng, at: u64) -> Value {
    let unit = ["C", "%", "hPa", "V", "dBm"][rng.usize(..5)];
    json!({
        "ts": at,
        "sensor": format!("{}-{}", word(rng), rng.u16(..1000)),
        "value": (rng.f64() * 1000.0 * 100.0).round() / 100.0,
        "unit": unit,
        "ok": rng.u8(..10) > 0,
    })
}

/// A JSON object of about `bytes` bytes (compact), from `seed`: the same
/// seed and size give the same document.
pub fn realistic(seed: u64, bytes: usize) -> Map<String, Value> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let at = 1_764_547_200_000 + rng.u64(..86_400_000);
    let mut doc = Map::new();
    doc.insert("eventId".into(), json!(uuid(&mut rng)));
    doc.insert(
        "type".into(),
        json!(format!("{}.{}", word(&mut rng), word(&mut rng))),
    );
    doc.insert("occurredAt".into(), json!(at));
    doc.insert(
        "source".into(),
        json!({
            "deviceId": uuid(&mut rng),
            "ip": format!("10.{}.{}.{}", rng.u8(..), rng.u8(..), rng.u8(..)),
            "firmware": format!("{}.{}.{}", rng.u8(..10), rng.u8(..20), rng.u8(..100)),
            "site": sentence(&mut rng, 2),
        }),
    );
    doc.insert("note".into(), json!(sentence(&mut rng, 8)));
    let mut readings = Vec::new();
    let mut i = 0u64;
    loop {
        let size = serde_json::to_vec(&doc).map_or(0, |v| v.len());
        if size >= bytes {
            break;
        }
        readings.push(reading(&mut rng, at + i * 1000));
        i += 1;
        doc.insert("readings".into(), Value::Array(readings.clone()));
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_seeded_sized_and_not_trivially_compressible() {
        for bytes in [1024, 4096, 16_384, 61_440] {
            let a = realistic(7, bytes);
            assert_eq!(a, realistic(7, bytes), "same seed, same document");
            assert_ne!(a, realistic(8, bytes));
            let len = serde_json::to_vec(&a).unwrap().len();
            assert!(len >= bytes && len < bytes + 200, "{bytes}: {len}");
            // Distinct values all the way through: no run of one character.
            let text = serde_json::to_string(&a).unwrap();
            let distinct: std::collections::HashSet<char> = text.chars().collect();
            assert!(
                distinct.len() > 40,
                "{bytes}: {} distinct chars",
                distinct.len()
            );
        }
    }
}
