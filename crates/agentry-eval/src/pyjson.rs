//! Python's view of JSON values, where tau2's scoring depends on it.
//!
//! tau2 hashes a database as `sha256(json.dumps(db, sort_keys=True))`, writes tool results with
//! `json.dumps`, rounds money with `round(x, 2)` and compares values with `==` (so `1 == 1.0`).
//! These helpers reproduce exactly that, so a run scored here scores the same in tau2.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// `repr(float)`: the shortest digits that read back to the same float, positional between
/// 1e-4 and 1e16 (`198.0`, `0.0001`), scientific outside (`1e+16`, `1.5e-05`).
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.5e-5", "-1.98e2".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let s = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            let (a, b) = digits.split_at(point as usize);
            format!("{a}.{b}")
        };
        format!("{sign}{s}")
    } else {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{first}{frac}e{esign}{:02}", exp.abs())
    }
}

/// `round(x, 2)`: round half to even on the exact binary value, which is what Rust's
/// fixed-precision formatting does too.
pub fn round2(x: f64) -> f64 {
    format!("{x:.2}").parse().unwrap_or(x)
}

/// `json.dumps(v, sort_keys=sort_keys)` with Python's defaults: `", "` and `": "` separators,
/// non-ASCII escaped, floats as `repr`.
pub fn dumps(v: &Value, sort_keys: bool) -> String {
    let mut out = String::new();
    write_value(&mut out, v, sort_keys);
    out
}

fn write_value(out: &mut String, v: &Value, sort_keys: bool) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if n.is_f64() {
                out.push_str(&float_repr(n.as_f64().unwrap_or(0.0)));
            } else {
                out.push_str(&n.to_string());
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item, sort_keys);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            // serde_json's map is ordered by key already (no `preserve_order`), which is
            // Python's code-point order for `sort_keys`.
            let _ = sort_keys;
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(out, k);
                out.push_str(": ");
                write_value(out, item, sort_keys);
            }
            out.push('}');
        }
    }
}

fn write_str(out: &mut String, s: &str) {
    use std::fmt::Write;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// tau2's database hash: `sha256(json.dumps(db, sort_keys=True))`, hex.
pub fn hash(v: &Value) -> String {
    let digest = Sha256::digest(dumps(v, true).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Python's `==` on JSON values: numbers compare by value (`1 == 1.0`), containers deeply.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        // Python's bool is an int: True == 1.
        (Value::Bool(x), Value::Number(n)) | (Value::Number(n), Value::Bool(x)) => {
            n.as_f64() == Some(if *x { 1.0 } else { 0.0 })
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| py_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| py_eq(a, b)))
        }
        _ => a == b,
    }
}

/// The type name Python would give a JSON value, for error messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_as_python_repr() {
        for (x, want) in [
            (198.0, "198.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (-2.5, "-2.5"),
            (123456.789, "123456.789"),
            (1e22, "1e+22"),
            (-0.0, "-0.0"),
        ] {
            assert_eq!(float_repr(x), want, "{x}");
        }
    }

    #[test]
    fn rounding_is_pythons() {
        assert_eq!(round2(2.675), 2.67);
        assert_eq!(round2(0.125), 0.12);
        assert_eq!(round2(0.375), 0.38);
        assert_eq!(round2(1.005), 1.0);
    }

    #[test]
    fn dumps_matches_python() {
        let v = json!({"b": [1, 2.0, "é\n"], "a": null, "c": {"x": true}});
        assert_eq!(
            dumps(&v, true),
            r#"{"a": null, "b": [1, 2.0, "\u00e9\n"], "c": {"x": true}}"#
        );
    }

    #[test]
    fn equality_is_pythons() {
        assert!(py_eq(&json!(1), &json!(1.0)));
        assert!(py_eq(&json!({"a": [1]}), &json!({"a": [1.0]})));
        assert!(!py_eq(&json!("1"), &json!(1)));
        assert!(py_eq(&json!(true), &json!(1)));
    }
}
