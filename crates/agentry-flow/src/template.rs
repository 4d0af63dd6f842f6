//! `${...}` templates over a run's context.
//!
//! The context is JSON: `{"input": …, "steps": {"ID": {"output": "text", "data": {…},
//! "artifacts": [{"name": …, "text": …}]}}}`. `${steps.ID.output.FIELD}` reads FIELD of the
//! step's structured output (its data parts, or its text when that is a JSON object). Strings
//! are inserted as they are, anything else as JSON; `$${` writes a literal `${`.
//!
//! ```
//! use agentry_flow::template::render;
//! let ctx = serde_json::json!({"input": {"order": {"items": ["a", "b"]}},
//!     "steps": {"s": {"output": "done", "data": {"summary": "short"}}}});
//! assert_eq!(render("${input.order.items} / ${steps.s.output.summary}", &ctx).unwrap(), r#"["a","b"] / short"#);
//! ```

use serde_json::Value;

/// A template that names something missing, or is malformed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// `${` without its `}` (at this byte).
    #[error("unclosed `${{` at byte {0}")]
    Unclosed(usize),
    /// `${}` with nothing inside.
    #[error("empty `${{}}`")]
    Empty,
    /// A path the run's context does not have.
    #[error("`${{{0}}}` names nothing in the run's context")]
    Missing(String),
}

/// The references of a template, each as a dotted path split into segments.
pub fn references(template: &str) -> Result<Vec<Vec<String>>, TemplateError> {
    let mut out = Vec::new();
    scan(template, |path| {
        out.push(path.split('.').map(str::to_owned).collect());
        Ok(String::new())
    })?;
    Ok(out)
}

/// Renders `template` against `ctx`.
pub fn render(template: &str, ctx: &Value) -> Result<String, TemplateError> {
    scan(template, |path| {
        let v = lookup(ctx, path).ok_or_else(|| TemplateError::Missing(path.to_owned()))?;
        Ok(match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    })
}

/// Finds a dotted path; array elements by index (`items.0`).
pub fn lookup<'a>(ctx: &'a Value, path: &str) -> Option<&'a Value> {
    let segs: Vec<&str> = path.split('.').collect();
    // steps.ID.output.FIELD reads the step's structured output.
    if segs.len() > 3 && segs[0] == "steps" && segs[2] == "output" {
        let step = ctx.get("steps")?.get(segs[1])?;
        return walk(step.get("data")?, &segs[3..]);
    }
    walk(ctx, &segs)
}

fn walk<'a>(mut v: &'a Value, segs: &[&str]) -> Option<&'a Value> {
    for s in segs {
        v = match v {
            Value::Object(m) => m.get(*s)?,
            Value::Array(a) => a.get(s.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(v)
}

fn scan(
    t: &str,
    mut f: impl FnMut(&str) -> Result<String, TemplateError>,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(t.len());
    let mut rest = t;
    let mut offset = 0;
    while let Some(i) = rest.find("${") {
        if i > 0 && rest.as_bytes()[i - 1] == b'$' {
            out.push_str(&rest[..i - 1]);
            out.push_str("${");
            rest = &rest[i + 2..];
            offset += i + 2;
            continue;
        }
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let end = after.find('}').ok_or(TemplateError::Unclosed(offset + i))?;
        let path = after[..end].trim();
        if path.is_empty() {
            return Err(TemplateError::Empty);
        }
        out.push_str(&f(path)?);
        rest = &after[end + 1..];
        offset += i + 2 + end + 1;
    }
    out.push_str(rest);
    Ok(out)
}

/// Evaluates a step condition: `A == B`, `A != B`, or a truthy template.
pub fn condition_holds(cond: &str, ctx: &Value) -> Result<bool, TemplateError> {
    for (op, eq) in [("!=", false), ("==", true)] {
        if let Some((a, b)) = cond.split_once(op) {
            let a = render(a.trim(), ctx)?;
            let b = render(b.trim(), ctx)?;
            let (a, b) = (unquote(a.trim()), unquote(b.trim()));
            return Ok((a == b) == eq);
        }
    }
    let v = render(cond.trim(), ctx)?;
    let v = v.trim().to_ascii_lowercase();
    Ok(!(v.is_empty() || v == "false" || v == "0" || v == "null" || v == "no"))
}

fn unquote(s: &str) -> &str {
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> Value {
        json!({"input": {"n": 3, "name": "Ada", "list": [1, 2]},
               "steps": {"a": {"output": "yes", "data": {"score": 0.9, "tags": ["x"]}, "artifacts": []}}})
    }

    #[test]
    fn renders_and_reports() {
        assert_eq!(
            render("Hi ${input.name}, n=${input.n}, ${input.list.1}", &ctx()).unwrap(),
            "Hi Ada, n=3, 2"
        );
        assert_eq!(
            render("${steps.a.output} ${steps.a.output.score}", &ctx()).unwrap(),
            "yes 0.9"
        );
        assert_eq!(
            render("cost: $${input.n}", &ctx()).unwrap(),
            "cost: ${input.n}"
        );
        assert_eq!(
            render("${input.nope}", &ctx()),
            Err(TemplateError::Missing("input.nope".into()))
        );
        assert_eq!(render("${input.n", &ctx()), Err(TemplateError::Unclosed(0)));
        assert_eq!(
            references("${a.b} and ${steps.x.output}").unwrap(),
            vec![vec!["a", "b"], vec!["steps", "x", "output"]]
        );
    }

    #[test]
    fn conditions() {
        assert!(condition_holds("${steps.a.output} == yes", &ctx()).unwrap());
        assert!(condition_holds("${steps.a.output} != 'no'", &ctx()).unwrap());
        assert!(!condition_holds("${input.n} == 4", &ctx()).unwrap());
        assert!(condition_holds("${steps.a.output}", &ctx()).unwrap());
        assert!(!condition_holds("false", &ctx()).unwrap());
    }
}
