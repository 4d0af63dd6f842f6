//! General-purpose tools every factory can offer: `calculate` and `current_time`.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::tools::Tool;

#[derive(Deserialize, JsonSchema)]
pub struct CalculateArgs {
    /// An arithmetic expression: numbers, + - * / ^ %, parentheses.
    pub expression: String,
}

/// Evaluates arithmetic exactly as written (models are bad at it).
pub struct Calculate;

impl Tool for Calculate {
    const NAME: &'static str = "calculate";
    type Args = CalculateArgs;
    type Output = f64;
    type Error = String;

    fn description(&self) -> String {
        "Evaluates an arithmetic expression, e.g. \"(2 + 3) * 4 ^ 2\".".into()
    }

    async fn call(&self, args: CalculateArgs) -> Result<f64, String> {
        eval(&args.expression)
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct NoArgs {}

/// The current UTC time.
pub struct CurrentTime;

impl Tool for CurrentTime {
    const NAME: &'static str = "current_time";
    type Args = NoArgs;
    type Output = String;
    type Error = String;

    fn description(&self) -> String {
        "Returns the current date and time (UTC, RFC 3339).".into()
    }

    async fn call(&self, _args: NoArgs) -> Result<String, String> {
        Ok(agentry_a2a::time::now_rfc3339())
    }
}

/// Evaluates `+ - * / % ^` with parentheses and unary minus.
pub fn eval(expr: &str) -> Result<f64, String> {
    let tokens: Vec<char> = expr.chars().filter(|c| !c.is_whitespace()).collect();
    let mut p = Parser { t: &tokens, i: 0 };
    let v = p.sum()?;
    if p.i != tokens.len() {
        return Err(format!(
            "unexpected `{}` at position {}",
            tokens[p.i],
            p.i + 1
        ));
    }
    if !v.is_finite() {
        return Err("the result is not a finite number (division by zero?)".into());
    }
    Ok(v)
}

struct Parser<'a> {
    t: &'a [char],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.t.get(self.i).copied()
    }

    fn sum(&mut self) -> Result<f64, String> {
        let mut v = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.i += 1;
            let r = self.product()?;
            v = if op == '+' { v + r } else { v - r };
        }
        Ok(v)
    }

    fn product(&mut self) -> Result<f64, String> {
        let mut v = self.unary()?;
        while let Some(op @ ('*' | '/' | '%')) = self.peek() {
            self.i += 1;
            let r = self.unary()?;
            v = match op {
                '*' => v * r,
                '/' => v / r,
                _ => v % r,
            };
        }
        Ok(v)
    }

    /// `-` binds looser than `^`: -2^2 is -4.
    fn unary(&mut self) -> Result<f64, String> {
        if self.peek() == Some('-') {
            self.i += 1;
            return Ok(-self.unary()?);
        }
        self.power()
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.atom()?;
        if self.peek() == Some('^') {
            self.i += 1;
            let exp = self.unary()?;
            return Ok(base.powf(exp));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('(') => {
                self.i += 1;
                let v = self.sum()?;
                if self.peek() != Some(')') {
                    return Err("missing `)`".into());
                }
                self.i += 1;
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let start = self.i;
                while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '.') {
                    self.i += 1;
                }
                let s: String = self.t[start..self.i].iter().collect();
                s.parse().map_err(|_| format!("bad number `{s}`"))
            }
            Some(c) => Err(format!("unexpected `{c}` at position {}", self.i + 1)),
            None => Err("the expression ends too early".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::eval;

    #[test]
    fn arithmetic() {
        assert_eq!(eval("(2 + 3) * 4 ^ 2").unwrap(), 80.0);
        assert_eq!(eval("-2^2").unwrap(), -4.0);
        assert_eq!(eval("2^3^2").unwrap(), 512.0);
        assert_eq!(eval("10 % 4 - 1.5").unwrap(), 0.5);
        assert!(eval("1/0").is_err());
        assert!(eval("2 +").is_err());
        assert!(eval("(1").is_err());
        assert!(eval("x").is_err());
    }
}
