//! Serializes a map whose keys are structs as a list of `[key, value]` pairs
//! (JSON object keys must be strings). Used for snapshots of the `Room`.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Writes the map as a sequence of `[key, value]` pairs.
pub fn serialize<K: Serialize, V: Serialize, S: Serializer>(map: &BTreeMap<K, V>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(map.iter())
}

/// Reads a sequence of `[key, value]` pairs back into a map (a repeated key
/// keeps its last value).
pub fn deserialize<'de, K, V, D>(deserializer: D) -> Result<BTreeMap<K, V>, D::Error>
where
    K: Deserialize<'de> + Ord,
    V: Deserialize<'de>,
    D: Deserializer<'de>,
{
    let pairs: Vec<(K, V)> = Vec::deserialize(deserializer)?;
    Ok(pairs.into_iter().collect())
}
