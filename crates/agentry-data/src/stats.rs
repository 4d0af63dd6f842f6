//! Summary statistics of a [`Table`]: for numeric columns count, mean, standard deviation,
//! minimum, quartiles (linear interpolation, as pandas' `describe`) and maximum; for others
//! count, distinct values and the most frequent one.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use super::query::Table;

/// Summary statistics of one column.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ColumnStats {
    /// The column's name.
    pub column: String,
    /// Non-null values.
    pub count: usize,
    /// Null values.
    pub nulls: usize,
    /// Numeric or categorical figures.
    #[serde(flatten)]
    pub kind: Kind,
}

/// The figures of a column, by what it holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Kind {
    /// Numbers: moments and quartiles (pandas' `describe`, sample standard deviation).
    #[allow(missing_docs)]
    Numeric {
        mean: f64,
        std: f64,
        min: f64,
        p25: f64,
        median: f64,
        p75: f64,
        max: f64,
    },
    /// Anything else: how many distinct values, the most frequent and its count.
    #[allow(missing_docs)]
    Categorical {
        distinct: usize,
        top: Option<String>,
        top_count: usize,
    },
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = (sorted.len() - 1) as f64 * q;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Statistics of every column.
pub fn describe(t: &Table) -> Vec<ColumnStats> {
    t.columns
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let vals: Vec<&Value> = t
                .rows
                .iter()
                .map(|r| &r[i])
                .filter(|v| !v.is_null())
                .collect();
            let nulls = t.rows.len() - vals.len();
            let nums: Vec<f64> = vals.iter().filter_map(|v| v.as_f64()).collect();
            let kind = if !vals.is_empty() && nums.len() == vals.len() {
                let mut s = nums.clone();
                s.sort_by(f64::total_cmp);
                let n = s.len() as f64;
                let mean = s.iter().sum::<f64>() / n;
                let var = if s.len() > 1 {
                    s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
                } else {
                    0.0
                };
                Kind::Numeric {
                    mean,
                    std: var.sqrt(),
                    min: s[0],
                    p25: quantile(&s, 0.25),
                    median: quantile(&s, 0.5),
                    p75: quantile(&s, 0.75),
                    max: s[s.len() - 1],
                }
            } else {
                let mut freq: HashMap<String, usize> = HashMap::new();
                for v in &vals {
                    let k = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    *freq.entry(k).or_default() += 1;
                }
                let top = freq
                    .iter()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                    .map(|(k, c)| (k.clone(), *c));
                Kind::Categorical {
                    distinct: freq.len(),
                    top_count: top.as_ref().map_or(0, |t| t.1),
                    top: top.map(|t| t.0),
                }
            };
            ColumnStats {
                column: name.clone(),
                count: vals.len(),
                nulls,
                kind,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numeric_and_categorical_columns() {
        let t = Table {
            columns: vec!["x".into(), "s".into()],
            rows: vec![
                vec![json!(1), json!("a")],
                vec![json!(2), json!("b")],
                vec![json!(3), json!("a")],
                vec![json!(4), Value::Null],
            ],
            truncated: false,
        };
        let d = describe(&t);
        match &d[0].kind {
            Kind::Numeric {
                mean,
                std,
                p25,
                median,
                ..
            } => {
                assert_eq!((*mean, *median, *p25), (2.5, 2.5, 1.75));
                assert!((std - 1.290_994).abs() < 1e-5);
            }
            k => panic!("{k:?}"),
        }
        assert_eq!(d[1].nulls, 1);
        assert_eq!(
            d[1].kind,
            Kind::Categorical {
                distinct: 2,
                top: Some("a".into()),
                top_count: 2
            }
        );
    }
}
