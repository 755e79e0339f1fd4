//! A lenient reader of the Prometheus text exposition format: enough for the
//! counters, gauges and histograms inference servers expose. Lines it cannot
//! read are skipped (a server's odd metric must not stop a benchmark).

use std::collections::BTreeMap;

/// One sample: a metric name, its labels and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A histogram's cumulative buckets (upper bound, count), with sum and count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    pub buckets: Vec<(f64, f64)>,
    pub sum: f64,
    pub count: f64,
}

impl Histogram {
    /// `self - before`, bucket by bucket (bounds missing before count as 0).
    pub fn minus(&self, before: &Histogram) -> Histogram {
        let buckets = self
            .buckets
            .iter()
            .map(|(le, c)| {
                let prev = before
                    .buckets
                    .iter()
                    .find(|(b, _)| b == le)
                    .map_or(0.0, |(_, c)| *c);
                (*le, (c - prev).max(0.0))
            })
            .collect();
        Histogram {
            buckets,
            sum: (self.sum - before.sum).max(0.0),
            count: (self.count - before.count).max(0.0),
        }
    }

    /// Add another histogram with the same bounds; `None` if the bounds differ.
    pub fn plus(&self, other: &Histogram) -> Option<Histogram> {
        if self.buckets.len() != other.buckets.len()
            || self
                .buckets
                .iter()
                .zip(&other.buckets)
                .any(|(a, b)| a.0 != b.0)
        {
            return None;
        }
        Some(Histogram {
            buckets: self
                .buckets
                .iter()
                .zip(&other.buckets)
                .map(|(a, b)| (a.0, a.1 + b.1))
                .collect(),
            sum: self.sum + other.sum,
            count: self.count + other.count,
        })
    }

    /// The bucket holding quantile `q` (0..1): its lower bound (the previous
    /// `le`, 0 for the first) and its `le` (`None` for `+Inf`), in the
    /// histogram's unit. `None` when the histogram is empty.
    pub fn bucket_of(&self, q: f64) -> Option<(f64, Option<f64>)> {
        let total = self.buckets.last()?.1;
        if total <= 0.0 {
            return None;
        }
        let rank = q * total;
        let mut below = 0.0;
        for &(le, c) in &self.buckets {
            if c >= rank && c > 0.0 {
                return Some((below, le.is_finite().then_some(le)));
            }
            if le.is_finite() {
                below = le;
            }
        }
        Some((below, None))
    }
}

/// Every sample of one scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    samples: Vec<Sample>,
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// `{a="x",b="y\"z"}` -> pairs; returns the rest of the line after `}`.
fn parse_labels(s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    let mut rest = s.strip_prefix('{')?;
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        if let Some(after) = rest.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = rest.find('=')?;
        let key = rest[..eq].trim().to_string();
        rest = rest[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        rest = &rest[end + 1..];
        labels.push((key, value));
    }
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    let name = line[..name_end].to_string();
    let (labels, rest) = if line[name_end..].starts_with('{') {
        parse_labels(&line[name_end..])?
    } else {
        (Vec::new(), &line[name_end..])
    };
    let value = parse_value(rest.split_whitespace().next()?)?;
    Some(Sample {
        name,
        labels,
        value,
    })
}

impl Exposition {
    /// Read an exposition; unreadable lines are skipped.
    pub fn parse(text: &str) -> Self {
        Self {
            samples: text.lines().filter_map(parse_line).collect(),
        }
    }

    /// No samples at all (not a Prometheus endpoint).
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Whether any sample's name starts with `prefix`.
    pub fn has_prefix(&self, prefix: &str) -> bool {
        self.samples.iter().any(|s| s.name.starts_with(prefix))
    }

    fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> {
        self.samples.iter().filter(move |s| s.name == name)
    }

    /// Sum over every label set (engines, ranks, reasons); `None` if absent.
    pub fn sum(&self, name: &str) -> Option<f64> {
        let mut it = self.named(name).peekable();
        it.peek()?;
        Some(it.map(|s| s.value).sum())
    }

    /// Largest value over every label set; `None` if absent.
    pub fn max(&self, name: &str) -> Option<f64> {
        self.named(name)
            .map(|s| s.value)
            .filter(|v| !v.is_nan())
            .reduce(f64::max)
    }

    /// Sums grouped by one label's value.
    pub fn by_label(&self, name: &str, label: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for s in self.named(name) {
            if let Some(v) = s.label(label) {
                *out.entry(v.to_string()).or_insert(0.0) += s.value;
            }
        }
        out
    }

    /// The histogram `base` (its `_bucket`, `_sum`, `_count`), summed over label sets.
    pub fn histogram(&self, base: &str) -> Option<Histogram> {
        let mut buckets: Vec<(f64, f64)> = Vec::new();
        for s in self.named(&format!("{base}_bucket")) {
            let le = parse_value(s.label("le")?)?;
            match buckets.iter_mut().find(|(b, _)| *b == le) {
                Some(b) => b.1 += s.value,
                None => buckets.push((le, s.value)),
            }
        }
        if buckets.is_empty() {
            return None;
        }
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Some(Histogram {
            buckets,
            sum: self.sum(&format!("{base}_sum")).unwrap_or(0.0),
            count: self.sum(&format!("{base}_count")).unwrap_or(0.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP vllm:num_preemptions_total Cumulative number of preemption.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 3.0
vllm:num_preemptions_total{engine="1",model_name="m"} 2.0
vllm:kv_cache_usage_perc{engine="0",model_name="a \"quoted\", name"} 0.25
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 7.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",position="0"} 1.0
tgi_queue_size 4
x_bucket{le="0.1"} 2.0
x_bucket{le="1.0"} 6.0
x_bucket{le="+Inf"} 8.0
x_sum 9.5
x_count 8.0
this is { not valid
"#;

    #[test]
    fn samples_labels_and_sums() {
        let e = Exposition::parse(TEXT);
        assert_eq!(e.sum("vllm:num_preemptions_total"), Some(5.0));
        assert_eq!(e.max("vllm:kv_cache_usage_perc"), Some(0.25));
        assert_eq!(e.sum("tgi_queue_size"), Some(4.0));
        assert_eq!(e.sum("missing"), None);
        let pos = e.by_label(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            "position",
        );
        assert_eq!(pos.get("0"), Some(&8.0));
        assert_eq!(pos.get("1"), Some(&4.0));
        assert!(e.has_prefix("vllm:"));
        assert!(Exposition::parse("<html>nope</html>\n").is_empty());
    }

    #[test]
    fn histogram_deltas_and_quantiles() {
        let after = Exposition::parse(TEXT).histogram("x").unwrap();
        assert_eq!(after.buckets.len(), 3);
        let before = Histogram {
            buckets: vec![(0.1, 1.0), (1.0, 1.0), (f64::INFINITY, 1.0)],
            sum: 0.5,
            count: 1.0,
        };
        let d = after.minus(&before);
        assert_eq!(d.count, 7.0);
        assert_eq!(d.sum, 9.0);
        assert_eq!(d.buckets[1].1, 5.0);
        // rank 3.5 of 7: 1 below 0.1, 4 more up to 1.0: somewhere in (0.1, 1]
        assert_eq!(d.bucket_of(0.5), Some((0.1, Some(1.0))));
        // rank 0.7: the first bucket, (0, 0.1]
        assert_eq!(d.bucket_of(0.1), Some((0.0, Some(0.1))));
        // the top ranks fall in +Inf: above the highest finite bound
        assert_eq!(d.bucket_of(0.99), Some((1.0, None)));
        assert_eq!(d.plus(&d).unwrap().count, 14.0);
        let other = Histogram {
            buckets: vec![(0.5, 1.0)],
            ..Histogram::default()
        };
        assert!(d.plus(&other).is_none());
    }
}
