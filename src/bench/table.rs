//! One line of the bench's figures table and how its figures read:
//! thousands grouped, ratios to targets. Shared by the report and the
//! console's rows, so neither imports the other.

/// One line of the figures table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub measure: String,
    pub figure: String,
    pub target: String,
    /// figure ÷ target (below 1 meets it), or "—" where there is no target.
    pub ratio: String,
}

/// 1234567 as "1,234,567".
pub fn thousands(n: u64) -> String {
    crate::domain::text::grouped(n)
}

pub fn ratio(figure: f64, target: f64) -> String {
    let r = figure / target;
    format!("{r:.2} ({})", if r <= 1.0 { "met" } else { "missed" })
}
