//! Hash maps keyed by what a capture contains: ahash (fast, and seeded per
//! process, so a crafted capture cannot aim for collisions).

pub type HashMap<K, V> = std::collections::HashMap<K, V, ahash::RandomState>;
pub type HashSet<K> = std::collections::HashSet<K, ahash::RandomState>;
pub type IndexMap<K, V> = indexmap::IndexMap<K, V, ahash::RandomState>;
