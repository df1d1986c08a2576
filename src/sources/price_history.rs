//! AWS `DescribeSpotPriceHistory` responses, as the real dumps store them:
//! `{"NextToken": "...", "SpotPriceHistory": [{AvailabilityZone, InstanceType,
//! ProductDescription, SpotPrice, Timestamp}, ...]}`, newest first (a page
//! that is not is refused: every real dump is).
//!
//! A price history is a step function: each point holds until the next change.

use std::collections::BTreeMap;

use chrono::DateTime;
use serde::Deserialize;

use super::ParseError;
use crate::domain::ids::PoolKey;
use crate::domain::units::{At, Micros, MicrosPerHour};

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Response {
    #[serde(default)]
    next_token: Option<String>,
    /// Kept as values so that a missing or mistyped field is reported with
    /// its entry number rather than only a line and column.
    spot_price_history: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Entry {
    availability_zone: String,
    instance_type: String,
    product_description: String,
    spot_price: String,
    timestamp: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PricePoint {
    pub at: At,
    pub zone: String,
    pub instance_type: String,
    pub product: String,
    pub price: MicrosPerHour,
}

/// One parsed response page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PricePage {
    pub points: Vec<PricePoint>,
    /// Present and non-empty when there are more pages.
    pub next_token: Option<String>,
}

pub fn parse(source_name: &str, text: &str) -> Result<PricePage, ParseError> {
    let response: Response = serde_json::from_str(text).map_err(|e| ParseError::from_json(source_name, &e))?;
    let mut points = Vec::with_capacity(response.spot_price_history.len());
    let mut previous: Option<(At, String)> = None;
    for (i, value) in response.spot_price_history.into_iter().enumerate() {
        let position = format!("entry {i}");
        let entry = Entry::deserialize(value).map_err(|e| ParseError::new(source_name, position.clone(), e.to_string()))?;
        let price = Micros::parse_decimal(&entry.spot_price).map_err(|e| ParseError::new(source_name, position.clone(), format!("SpotPrice: {e}")))?;
        if price.0 < 0 {
            return Err(ParseError::new(source_name, position, format!("negative SpotPrice {:?}", entry.spot_price)));
        }
        let at = DateTime::parse_from_rfc3339(&entry.timestamp)
            .map_err(|e| ParseError::new(source_name, position.clone(), format!("Timestamp {:?}: {e}", entry.timestamp)))?
            .to_utc();
        if entry.availability_zone.is_empty() || entry.instance_type.is_empty() {
            return Err(ParseError::new(source_name, position, "empty AvailabilityZone or InstanceType"));
        }
        // Out of order means a page spliced or edited by hand: merging it
        // would silently build a different step function.
        if let Some((_, before)) = previous.as_ref().filter(|(t, _)| *t < at) {
            return Err(ParseError::new(
                source_name,
                position,
                format!("Timestamp {} is newer than entry {}'s {before}: a page must be newest first", entry.timestamp, i.saturating_sub(1)),
            ));
        }
        previous = Some((at, entry.timestamp));
        points.push(PricePoint {
            at,
            zone: entry.availability_zone,
            instance_type: entry.instance_type,
            product: entry.product_description,
            price: MicrosPerHour(price.0),
        });
    }
    Ok(PricePage { points, next_token: response.next_token.filter(|t| !t.is_empty()) })
}

/// Price step functions per pool, oldest first, one point per change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PriceSeries {
    pub pools: BTreeMap<PoolKey, Vec<(At, MicrosPerHour)>>,
}

impl PriceSeries {
    /// Merges pages (overlapping dumps welcome): duplicates dropped, sorted by
    /// time, repeated equal prices collapsed. Only `product` is kept
    /// (prices differ per OS, e.g. "Linux/UNIX").
    pub fn merge<'a>(pages: impl IntoIterator<Item = &'a PricePage>, product: &str) -> PriceSeries {
        let mut raw: BTreeMap<PoolKey, BTreeMap<At, MicrosPerHour>> = BTreeMap::new();
        for page in pages {
            for p in page.points.iter().filter(|p| p.product == product) {
                let key = PoolKey { zone: p.zone.clone(), instance_type: p.instance_type.clone() };
                raw.entry(key).or_default().insert(p.at, p.price);
            }
        }
        let pools = raw
            .into_iter()
            .map(|(key, points)| {
                let mut steps: Vec<(At, MicrosPerHour)> = Vec::with_capacity(points.len());
                for (at, price) in points {
                    if steps.last().map(|(_, p)| *p) != Some(price) {
                        steps.push((at, price));
                    }
                }
                (key, steps)
            })
            .collect();
        PriceSeries { pools }
    }

    /// The price in force at `at`, if the series has started by then.
    pub fn price_at(&self, key: &PoolKey, at: At) -> Option<MicrosPerHour> {
        let steps = self.pools.get(key)?;
        let i = steps.partition_point(|(t, _)| *t <= at);
        (i > 0).then(|| steps[i - 1].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"{"NextToken": "", "SpotPriceHistory": [
        {"AvailabilityZone": "us-east-1c", "InstanceType": "p3.2xlarge", "ProductDescription": "Linux/UNIX", "SpotPrice": "0.970200", "Timestamp": "2020-02-20T21:57:36.000Z"},
        {"AvailabilityZone": "us-east-1c", "InstanceType": "p3.2xlarge", "ProductDescription": "Linux/UNIX", "SpotPrice": "0.970200", "Timestamp": "2020-02-20T20:00:00.000Z"},
        {"AvailabilityZone": "us-east-1c", "InstanceType": "p3.2xlarge", "ProductDescription": "Windows", "SpotPrice": "1.5", "Timestamp": "2020-02-20T19:00:00.000Z"},
        {"AvailabilityZone": "us-east-1c", "InstanceType": "p3.2xlarge", "ProductDescription": "Linux/UNIX", "SpotPrice": "0.9183", "Timestamp": "2020-02-20T18:00:00.000Z"}
    ]}"#;

    #[test]
    fn parses_and_merges_into_a_step_function() {
        let page = parse("page.json", PAGE).unwrap();
        assert_eq!(page.points.len(), 4);
        assert_eq!(page.next_token, None);
        let series = PriceSeries::merge([&page], "Linux/UNIX");
        let key = PoolKey { zone: "us-east-1c".into(), instance_type: "p3.2xlarge".into() };
        let steps = &series.pools[&key];
        assert_eq!(steps.len(), 2, "equal consecutive prices collapse: {steps:?}");
        assert_eq!(steps[0].1, MicrosPerHour(918_300));
        let at = DateTime::parse_from_rfc3339("2020-02-20T19:30:00Z").unwrap().to_utc();
        assert_eq!(series.price_at(&key, at), Some(MicrosPerHour(918_300)));
        let at = DateTime::parse_from_rfc3339("2020-02-20T21:00:00Z").unwrap().to_utc();
        assert_eq!(series.price_at(&key, at), Some(MicrosPerHour(970_200)));
        let before = DateTime::parse_from_rfc3339("2020-02-20T17:00:00Z").unwrap().to_utc();
        assert_eq!(series.price_at(&key, before), None);
    }

    #[test]
    fn bad_input_names_the_file_and_the_place() {
        let err = parse("broken.json", "{\"SpotPriceHistory\": [ {").unwrap_err();
        assert_eq!(err.source_name, "broken.json");
        assert!(err.position.starts_with("line 1"), "{err}");

        let nan = PAGE.replace("\"0.9183\"", "\"NaN\"");
        let err = parse("nan.json", &nan).unwrap_err();
        assert_eq!(err.position, "entry 3");
        assert!(err.to_string().contains("SpotPrice"), "{err}");

        let bad_time = PAGE.replace("2020-02-20T18:00:00.000Z", "yesterday");
        assert_eq!(parse("t.json", &bad_time).unwrap_err().position, "entry 3");

        let negative = PAGE.replace("\"0.9183\"", "\"-1\"");
        assert!(parse("neg.json", &negative).unwrap_err().message.contains("negative"));

        for bad in ["inf", "-inf", "Infinity", "1e3", "", "0.1234567"] {
            let text = PAGE.replace("\"0.9183\"", &format!("{bad:?}"));
            let err = parse("bad.json", &text).unwrap_err();
            assert_eq!((err.source_name.as_str(), err.position.as_str()), ("bad.json", "entry 3"), "{bad}: {err}");
        }

        let missing = PAGE.replace("\"SpotPrice\": \"0.9183\", ", "");
        let err = parse("missing.json", &missing).unwrap_err();
        assert_eq!(err.position, "entry 3");
        assert!(err.message.contains("SpotPrice"), "{err}");
        let number = PAGE.replace("\"0.9183\"", "0.9183");
        assert_eq!(parse("number.json", &number).unwrap_err().position, "entry 3");
        let no_list = parse("empty.json", "{}").unwrap_err();
        assert!(no_list.message.contains("SpotPriceHistory"), "{no_list}");
    }

    #[test]
    fn a_page_must_be_newest_first() {
        let swapped = PAGE.replace("2020-02-20T19:00:00.000Z", "2020-02-20T20:30:00.000Z");
        let err = parse("order.json", &swapped).unwrap_err();
        assert_eq!((err.source_name.as_str(), err.position.as_str()), ("order.json", "entry 2"));
        assert_eq!(err.message, "Timestamp 2020-02-20T20:30:00.000Z is newer than entry 1's 2020-02-20T20:00:00.000Z: a page must be newest first");
        // Equal times (several zones quoted at once) are in order.
        let tie = PAGE.replace("2020-02-20T19:00:00.000Z", "2020-02-20T20:00:00.000Z");
        assert!(parse("tie.json", &tie).is_ok());
    }

    #[test]
    fn keeps_a_next_token_for_pagination() {
        let page = parse("p", r#"{"NextToken": "abc", "SpotPriceHistory": []}"#).unwrap();
        assert_eq!(page.next_token.as_deref(), Some("abc"));
    }
}
