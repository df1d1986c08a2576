//! The ledger's repeated words (a line's kind, where it ran at what price,
//! whom it is charged to), as a line names them and as the store remembers
//! the numbers they are filed under (see `schema` for their tables).
//!
//! Owns nothing but the words' shape; the SQL is `ledger`'s.

/// A repeated word of a ledger line, filed in its own table (see `schema`).
pub(super) enum Word<'a> {
    Kind(&'a str),
    Place(u32, &'a str, &'a str, &'a str, &'a str),
    Owner([&'a str; 4]),
}

/// A word as the store remembers it: its parts kept apart, so that no
/// name (a tag is the submitter's text) can pass for another.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum WordKey {
    Kind(String),
    Place(u32, String, String, String, String),
    Owner([String; 4]),
}

impl Word<'_> {
    pub(super) fn key(&self) -> WordKey {
        match self {
            Word::Kind(label) => WordKey::Kind(label.to_string()),
            Word::Place(node, name, billing, instance_type, zone) => {
                WordKey::Place(*node, name.to_string(), billing.to_string(), instance_type.to_string(), zone.to_string())
            }
            Word::Owner(words) => WordKey::Owner(words.map(str::to_string)),
        }
    }
}
