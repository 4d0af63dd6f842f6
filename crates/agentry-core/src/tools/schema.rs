//! A small JSON Schema check for tool arguments: the subset tool schemas use (`type`,
//! `properties`, `required`, `enum`, `items`, `additionalProperties: false`, numeric and length
//! bounds, `anyOf`/`oneOf`, local `$ref`s). Errors name the failing path, so the model can fix
//! its call.

use serde_json::Value;

/// Checks `value` against `schema`; the first problem found, with its path.
pub fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    check(schema, schema, value, "$")
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => {
            v.as_i64().is_some()
                || v.as_u64().is_some()
                || v.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => true,
    }
}

fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str)
        && let Some(ptr) = r.strip_prefix('#')
        && let Some(target) = root.pointer(ptr)
    {
        return target;
    }
    schema
}

fn check(root: &Value, schema: &Value, v: &Value, path: &str) -> Result<(), String> {
    let schema = resolve(root, schema);
    if let Some(alts) = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Value::as_array)
    {
        if alts.iter().any(|s| check(root, s, v, path).is_ok()) {
            return Ok(());
        }
        return Err(format!("{path} matches none of the allowed shapes"));
    }
    match schema.get("type") {
        Some(Value::String(t)) if !type_ok(t, v) => {
            return Err(format!("{path} must be {t}, got {}", kind(v)));
        }
        Some(Value::Array(ts)) if !ts.iter().filter_map(Value::as_str).any(|t| type_ok(t, v)) => {
            return Err(format!("{path} has the wrong type ({})", kind(v)));
        }
        _ => {}
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(v)
    {
        return Err(format!(
            "{path} must be one of {}",
            Value::Array(options.clone())
        ));
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(format!("{path} must be >= {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(format!("{path} must be <= {max}"));
        }
    }
    if let Some(s) = v.as_str() {
        let len = s.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            return Err(format!("{path} must have at least {min} characters"));
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            return Err(format!("{path} must have at most {max} characters"));
        }
    }
    if let Some(obj) = v.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(req) = schema.get("required").and_then(Value::as_array) {
            for r in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(r) {
                    return Err(format!("{path}.{r} is required"));
                }
            }
        }
        for (k, val) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(s) => check(root, s, val, &format!("{path}.{k}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    let known: Vec<&str> = props
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    return Err(format!(
                        "{path}.{k} is not a known field (known: {})",
                        known.join(", ")
                    ));
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, item) in arr.iter().enumerate() {
            check(root, items, item, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checks_the_common_subset() {
        let s = json!({"type": "object", "required": ["q"], "additionalProperties": false,
            "properties": {"q": {"type": "string", "minLength": 1}, "n": {"type": "integer", "minimum": 1},
                           "mode": {"enum": ["a", "b"]}, "tags": {"type": "array", "items": {"type": "string"}}}});
        assert!(validate(&s, &json!({"q": "x", "n": 2, "mode": "a", "tags": ["t"]})).is_ok());
        assert_eq!(validate(&s, &json!({})).unwrap_err(), "$.q is required");
        assert!(
            validate(&s, &json!({"q": 1}))
                .unwrap_err()
                .contains("$.q must be string")
        );
        assert!(
            validate(&s, &json!({"q": "x", "n": 0}))
                .unwrap_err()
                .contains(">= 1")
        );
        assert!(
            validate(&s, &json!({"q": "x", "mode": "c"}))
                .unwrap_err()
                .contains("one of")
        );
        assert!(
            validate(&s, &json!({"q": "x", "tags": [1]}))
                .unwrap_err()
                .contains("$.tags[0]")
        );
        assert!(
            validate(&s, &json!({"q": "x", "zzz": 1}))
                .unwrap_err()
                .contains("not a known field")
        );
        assert!(
            validate(&s, &json!("str"))
                .unwrap_err()
                .contains("must be object")
        );
    }
}
