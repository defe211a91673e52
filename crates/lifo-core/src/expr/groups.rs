//! The shard-group lease's expressions (see [`crate::groups`]): taken at
//! the start of an invocation, given back at its end.

use super::*;
use std::collections::BTreeMap;

/// A processor takes its shard group's lease (the `#group-<g>` item): when
/// it is free or its lease ended. A new token each time; `claimedBy` names the
/// invocation, for logs.
pub fn take_group(lease_until: u64, now_ms: u64, claimed_by: &str) -> Expr {
    Expr {
        main: "SET #leaseUntil = :lease, #token = if_not_exists(#token, :zero) + :one, \
               #claimedBy = :claimedBy"
            .to_owned(),
        condition: "attribute_not_exists(#leaseUntil) OR #leaseUntil < :now".to_owned(),
        names: BTreeMap::from([
            ("#leaseUntil", attr::LEASE_UNTIL),
            ("#token", attr::TOKEN),
            ("#claimedBy", "claimedBy"),
        ]),
        values: BTreeMap::from([
            (":lease", n(lease_until)),
            (":now", n(now_ms)),
            (":zero", n(0)),
            (":one", n(1)),
            (":claimedBy", s(truncate(claimed_by))),
        ]),
    }
}

/// A processor gives its group's lease back at the end of an invocation,
/// if it still holds it (same token).
pub fn release_group(token: u64) -> Expr {
    Expr {
        main: "SET #leaseUntil = :zero".to_owned(),
        condition: "#token = :token".to_owned(),
        names: BTreeMap::from([("#leaseUntil", attr::LEASE_UNTIL), ("#token", attr::TOKEN)]),
        values: BTreeMap::from([(":zero", n(0)), (":token", n(token))]),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn a_group_lease_is_taken_when_free_and_given_back_only_by_its_holder() {
        let e = take_group(NOW + 62_000, NOW, "req-1");
        assert_eq!(
            e.main,
            "SET #leaseUntil = :lease, #token = if_not_exists(#token, :zero) + :one, #claimedBy = :claimedBy"
        );
        assert_eq!(
            e.condition,
            "attribute_not_exists(#leaseUntil) OR #leaseUntil < :now"
        );
        assert_eq!(
            names(&e),
            "#claimedBy=claimedBy #leaseUntil=leaseUntil #token=token"
        );
        assert_eq!(
            values(&e),
            ":claimedBy=S:req-1 :lease=N:1764547262123 :now=N:1764547200123 :one=N:1 :zero=N:0"
        );
        let e = release_group(4);
        assert_eq!(e.main, "SET #leaseUntil = :zero");
        assert_eq!(e.condition, "#token = :token");
        assert_eq!(values(&e), ":token=N:4 :zero=N:0");
    }
}
