//! What AWS bills for a request, by its documented rules, from the items
//! themselves: the yardstick the meter's figures (DynamoDB Local's
//! `ConsumedCapacity`) are checked against, so that a figure measured
//! locally can be quoted as AWS's.
//!
//! - **Item size**: attribute names plus values; a string its UTF-8 bytes,
//!   a number about 1 byte per 2 significant digits plus 1, a binary its
//!   bytes, a boolean or null 1, a list or map 3 bytes plus 1 per element
//!   and its elements (map keys count as names).
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html>
//! - **Writes**: 1 write unit per started KB of the larger of the item's
//!   images before and after (PutItem, UpdateItem, DeleteItem).
//! - **Indexes**: each global secondary index the write touches costs the
//!   same rule on its entry (the table's key, the index's keys, the
//!   projected attributes); an update that changes the entry's key costs
//!   two writes there, one to delete the old entry and one to put the new.
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html>
//! - **Query reads**: the sizes of every item read are summed, then rounded
//!   up to the next 4 KB: 1 read unit each, half with eventual consistency.
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html>

use super::Item;
use aws_sdk_dynamodb::types::AttributeValue;

/// What a global secondary index holds of an item.
#[derive(Debug, Clone, PartialEq)]
pub enum Projection {
    KeysOnly,
    Include(Vec<String>),
    All,
}

/// A global secondary index: its key attributes and projection.
#[derive(Debug, Clone, PartialEq)]
pub struct Index {
    pub name: String,
    pub keys: Vec<String>,
    pub projection: Projection,
}

fn value_bytes(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_bytes(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::L(l) => 3 + l.iter().map(|e| 1 + value_bytes(e)).sum::<usize>(),
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, e)| 1 + k.len() + value_bytes(e))
                .sum::<usize>()
        }
        AttributeValue::Ss(s) => s.iter().map(String::len).sum(),
        AttributeValue::Ns(n) => n.iter().map(|x| number_bytes(x)).sum(),
        AttributeValue::Bs(b) => b.iter().map(|x| x.as_ref().len()).sum(),
        _ => 0,
    }
}

/// A number: 1 byte per 2 significant digits, plus 1.
pub(crate) fn number_bytes(n: &str) -> usize {
    let digits: String = n.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0');
    significant.len().max(1).div_ceil(2) + 1
}

/// [`number_bytes`] of an integer, counted without formatting it (the
/// index's entries are sized at every query of the in-memory store).
pub(crate) fn integer_bytes(n: i128) -> usize {
    let mut n = n.unsigned_abs();
    if n == 0 {
        return 2;
    }
    while n.is_multiple_of(10) {
        n /= 10;
    }
    (n.ilog10() as usize + 1).div_ceil(2) + 1
}

/// An item's size: its attribute names and values.
pub fn item_bytes(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_bytes(v)).sum()
}

/// The item's entry in `index` (`table_key` is the table's hash key), or
/// `None` when the item lacks one of the index's keys (not in it).
pub fn entry(item: &Item, index: &Index, table_key: &str) -> Option<Item> {
    if !index.keys.iter().all(|k| item.contains_key(k)) {
        return None;
    }
    Some(
        item.iter()
            .filter(|(k, _)| {
                k.as_str() == table_key
                    || index.keys.contains(k)
                    || match &index.projection {
                        Projection::KeysOnly => false,
                        Projection::Include(names) => names.contains(k),
                        Projection::All => true,
                    }
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// Write units of one item image change: at least 1, per started KB.
fn units(bytes: usize) -> f64 {
    bytes.div_ceil(1024).max(1) as f64
}

/// What AWS bills for a write that changes an item from `before` to
/// `after` (`None`: absent), with `indexes` on the table.
pub fn write_units(
    before: Option<&Item>,
    after: Option<&Item>,
    indexes: &[Index],
    table_key: &str,
) -> f64 {
    write_units_by_partition(before, after, indexes, table_key)
        .iter()
        .map(|(_, units)| units)
        .sum()
}

/// Where a request's units go: a partition key value of the table
/// (`index: None`) or of one global secondary index. DynamoDB limits each
/// one's throughput on its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Partition {
    pub index: Option<String>,
    pub key: String,
}

impl Partition {
    /// The table's partition of the item whose key is `key`.
    pub fn table(key: &str) -> Self {
        Self {
            index: None,
            key: key.to_owned(),
        }
    }

    /// `index`'s partition of key value `key`.
    pub fn index(index: &str, key: &str) -> Self {
        Self {
            index: Some(index.to_owned()),
            key: key.to_owned(),
        }
    }
}

impl std::fmt::Display for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.index {
            Some(index) => write!(f, "{index} {}", self.key),
            None => write!(f, "table {}", self.key),
        }
    }
}

/// A partition key's value as text (a string or a number as written).
fn key_text(v: Option<&AttributeValue>) -> String {
    match v {
        Some(AttributeValue::S(s)) => s.clone(),
        Some(AttributeValue::N(n)) => n.clone(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// [`write_units`] by the partition each unit goes to: the item's own
/// (its table key), then each index entry the write places, changes or
/// removes, in its entry's partition (an entry that moves between
/// partitions costs its delete in the old one and its put in the new).
pub fn write_units_by_partition(
    before: Option<&Item>,
    after: Option<&Item>,
    indexes: &[Index],
    table_key: &str,
) -> Vec<(Partition, f64)> {
    let size = |i: Option<&Item>| i.map_or(0, item_bytes);
    let key = after.or(before).and_then(|i| i.get(table_key));
    let mut out = vec![(
        Partition::table(&key_text(key)),
        units(size(before).max(size(after))),
    )];
    for index in indexes {
        let old = before.and_then(|i| entry(i, index, table_key));
        let new = after.and_then(|i| entry(i, index, table_key));
        let keys = |e: &Item| -> Vec<Option<AttributeValue>> {
            index.keys.iter().map(|k| e.get(k).cloned()).collect()
        };
        let part = |e: &Item| {
            let hash = index.keys.first().and_then(|k| e.get(k));
            Partition::index(&index.name, &key_text(hash))
        };
        match (&old, &new) {
            (None, None) => {}
            (Some(e), None) | (None, Some(e)) => out.push((part(e), units(item_bytes(e)))),
            (Some(o), Some(n)) if keys(o) != keys(n) => {
                out.push((part(o), units(item_bytes(o))));
                out.push((part(n), units(item_bytes(n))));
            }
            // The entry is rewritten only when what it holds changed.
            (Some(o), Some(n)) if o == n => {}
            (Some(o), Some(n)) => out.push((part(n), units(item_bytes(o).max(item_bytes(n))))),
        }
    }
    out
}

/// What AWS bills for a Query that read items of these sizes.
pub fn query_read_units(sizes: &[usize], consistent: bool) -> f64 {
    let blocks = sizes.iter().sum::<usize>().div_ceil(4096).max(1) as f64;
    if consistent { blocks } else { blocks / 2.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.to_owned())
    }

    fn n(v: &str) -> AttributeValue {
        AttributeValue::N(v.to_owned())
    }

    proptest::proptest! {
        /// An integer is sized as its decimal text is.
        #[test]
        fn an_integer_is_sized_as_its_text(n in proptest::prelude::any::<i64>(), zeros in 0u32..6) {
            let n = i128::from(n) * 10i128.pow(zeros);
            proptest::prop_assert_eq!(integer_bytes(n), number_bytes(&n.to_string()), "{}", n);
        }
    }

    #[test]
    fn sizes_are_names_plus_values_as_aws_documents() {
        let item: Item = [
            ("taskId".to_owned(), s("abc")),
            ("n".to_owned(), n("12345")),
        ]
        .into();
        // "taskId" 6 + "abc" 3; "n" 1 + (5 digits → 3 bytes + 1).
        assert_eq!(item_bytes(&item), 6 + 3 + 1 + 4);
        assert_eq!(
            number_bytes("1000"),
            2,
            "trailing zeros are not significant"
        );
        assert_eq!(number_bytes("0.001"), 2);
        let list: Item = [("l".to_owned(), AttributeValue::L(vec![s("ab"), n("1")]))].into();
        assert_eq!(item_bytes(&list), 1 + 3 + (1 + 2) + (1 + 2));
    }

    #[test]
    fn a_query_sums_its_items_then_rounds_to_4_kb() {
        // AWS's own example: 10 items totalling 40.8 KB are 44 KB: 11 units.
        let sizes = vec![4178; 10];
        assert_eq!(query_read_units(&sizes, true), 11.0);
        assert_eq!(query_read_units(&sizes, false), 5.5);
        assert_eq!(
            query_read_units(&[], false),
            0.5,
            "an empty page still costs"
        );
    }

    #[test]
    fn writes_bill_the_larger_image_and_each_index_entry_they_touch() {
        let index = Index {
            name: "claimable-index".into(),
            keys: vec!["shard".into(), "at".into()],
            projection: Projection::KeysOnly,
        };
        let pending: Item = [
            ("taskId".to_owned(), s("t")),
            ("shard".to_owned(), n("0")),
            ("at".to_owned(), n("1")),
        ]
        .into();
        let mut claimed = pending.clone();
        claimed.insert("at".into(), n("2"));
        let mut done = pending.clone();
        done.remove("at");
        let ix = std::slice::from_ref(&index);
        // Put: the item, and its entry into the index.
        assert_eq!(write_units(None, Some(&pending), ix, "taskId"), 2.0);
        // A key change in the index: delete + put there.
        assert_eq!(
            write_units(Some(&pending), Some(&claimed), ix, "taskId"),
            3.0
        );
        // Leaving the index: one delete there.
        assert_eq!(write_units(Some(&claimed), Some(&done), ix, "taskId"), 2.0);
        // 1,500 bytes: 2 units.
        let mut big = done.clone();
        big.insert("p".into(), s(&"x".repeat(1500)));
        assert_eq!(write_units(Some(&done), Some(&big), &[], "taskId"), 2.0);
    }

    /// Each unit goes to the partition that spends it: the item's own, and
    /// the index entry's partition (its hash key's value); an entry that
    /// moves to another shard spends in both.
    #[test]
    fn write_units_are_split_by_partition() {
        let index = Index {
            name: "claimable-index".into(),
            keys: vec!["shard".into(), "at".into()],
            projection: Projection::KeysOnly,
        };
        let item = |shard: &str, at: Option<&str>| -> Item {
            let mut i: Item = [
                ("taskId".to_owned(), s("t")),
                ("shard".to_owned(), n(shard)),
            ]
            .into();
            if let Some(at) = at {
                i.insert("at".into(), n(at));
            }
            i
        };
        let ix = std::slice::from_ref(&index);
        let (a, b) = (item("3", Some("1")), item("3", Some("2")));
        assert_eq!(
            write_units_by_partition(None, Some(&a), ix, "taskId"),
            vec![
                (Partition::table("t"), 1.0),
                (Partition::index("claimable-index", "3"), 1.0)
            ]
        );
        // A new sort key in the same shard: delete and put, both in shard 3.
        assert_eq!(
            write_units_by_partition(Some(&a), Some(&b), ix, "taskId")[1..],
            [
                (Partition::index("claimable-index", "3"), 1.0),
                (Partition::index("claimable-index", "3"), 1.0)
            ]
        );
        let moved = item("4", Some("2"));
        assert_eq!(
            write_units_by_partition(Some(&b), Some(&moved), ix, "taskId")[1..],
            [
                (Partition::index("claimable-index", "3"), 1.0),
                (Partition::index("claimable-index", "4"), 1.0)
            ]
        );
        // Leaving the index; a write that leaves no entry spends only in the table.
        let done = item("4", None);
        assert_eq!(
            write_units_by_partition(Some(&moved), Some(&done), ix, "taskId")[1..],
            [(Partition::index("claimable-index", "4"), 1.0)]
        );
        assert_eq!(
            write_units_by_partition(Some(&done), Some(&done), ix, "taskId"),
            vec![(Partition::table("t"), 1.0)]
        );
    }
}
