//! General-purpose tools every factory can offer: `calculate` and `current_time`.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::tools::Tool;

#[derive(Deserialize, JsonSchema)]
// No doc comment: schemars would send it to models as the schema's description.
#[allow(missing_docs)]
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
// No doc comment: schemars would send it to models as the schema's description.
#[allow(missing_docs)]
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

/// Nesting (parentheses, unary minus, exponent chains) at most: the parser recurses once per
/// level, and an expression from the network must not exhaust the stack.
const MAX_DEPTH: usize = 64;
/// Longest expression accepted, in characters.
const MAX_LEN: usize = 4096;

/// Evaluates `+ - * / % ^` with parentheses and unary minus.
pub fn eval(expr: &str) -> Result<f64, String> {
    if expr.len() > MAX_LEN {
        return Err(format!(
            "the expression is longer than {MAX_LEN} characters"
        ));
    }
    let tokens: Vec<char> = expr.chars().filter(|c| !c.is_whitespace()).collect();
    let mut p = Parser {
        t: &tokens,
        i: 0,
        depth: 0,
    };
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
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.t.get(self.i).copied()
    }

    /// Runs `f` one nesting level deeper, refusing past [`MAX_DEPTH`].
    fn nested(&mut self, f: impl FnOnce(&mut Self) -> Result<f64, String>) -> Result<f64, String> {
        if self.depth >= MAX_DEPTH {
            return Err(format!(
                "the expression nests deeper than {MAX_DEPTH} levels"
            ));
        }
        self.depth += 1;
        let v = f(self);
        self.depth -= 1;
        v
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
            return Ok(-self.nested(Self::unary)?);
        }
        self.power()
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.atom()?;
        if self.peek() == Some('^') {
            self.i += 1;
            let exp = self.nested(Self::unary)?;
            return Ok(base.powf(exp));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('(') => {
                self.i += 1;
                let v = self.nested(Self::sum)?;
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

    /// Issue 18, item 7: 10k nested parentheses aborted `mcp serve builtin` (stack overflow).
    #[test]
    fn deep_nesting_is_refused_not_a_crash() {
        let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(eval(&deep).unwrap_err().contains("longer than"));
        let nested = format!("{}1{}", "(".repeat(1_000), ")".repeat(1_000));
        assert!(eval(&nested).unwrap_err().contains("nests deeper"));
        assert!(
            eval(&"-".repeat(3000))
                .unwrap_err()
                .contains("nests deeper")
        );
        assert!(
            eval(&format!("2{}", "^2".repeat(1000)))
                .unwrap_err()
                .contains("nests deeper")
        );
        let fine = format!("{}1{}", "(".repeat(60), ")".repeat(60));
        assert_eq!(eval(&fine).unwrap(), 1.0);
    }

    /// An expression tree, rendered fully parenthesized, with the value it must evaluate to.
    #[derive(Debug, Clone)]
    enum Expr {
        Num(u16),
        Neg(Box<Expr>),
        Bin(Box<Expr>, char, Box<Expr>),
    }

    impl Expr {
        fn text(&self) -> String {
            match self {
                Expr::Num(n) => n.to_string(),
                Expr::Neg(e) => format!("-({})", e.text()),
                Expr::Bin(a, op, b) => format!("({}) {op} ({})", a.text(), b.text()),
            }
        }
        fn value(&self) -> f64 {
            match self {
                Expr::Num(n) => f64::from(*n),
                Expr::Neg(e) => -e.value(),
                Expr::Bin(a, op, b) => {
                    let (a, b) = (a.value(), b.value());
                    match op {
                        '+' => a + b,
                        '-' => a - b,
                        '*' => a * b,
                        '/' => a / b,
                        '%' => a % b,
                        _ => a.powf(b),
                    }
                }
            }
        }
    }

    fn expr() -> impl Strategy<Value = Expr> {
        any::<u16>()
            .prop_map(Expr::Num)
            .prop_recursive(6, 40, 2, |inner| {
                prop_oneof![
                    inner.clone().prop_map(|e| Expr::Neg(Box::new(e))),
                    (
                        inner.clone(),
                        proptest::sample::select(vec!['+', '-', '*', '/', '%', '^']),
                        inner
                    )
                        .prop_map(|(a, op, b)| Expr::Bin(
                            Box::new(a),
                            op,
                            Box::new(b)
                        )),
                ]
            })
    }

    use proptest::prelude::*;

    proptest! {
        /// Any well-formed expression evaluates to what its tree says (or is refused as not
        /// finite when the tree's value is not).
        #[test]
        fn evaluates_like_the_tree(e in expr()) {
            let want = e.value();
            match eval(&e.text()) {
                Ok(v) => prop_assert!(v == want || (v - want).abs() <= want.abs() * 1e-12, "{} = {v}, not {want}", e.text()),
                Err(err) => prop_assert!(!want.is_finite(), "{}: {err}", e.text()),
            }
        }

        /// Any text over the expression alphabet gets a value or an error, never a panic or a
        /// stack overflow (the tool is served to whoever reaches `mcp serve builtin`).
        #[test]
        fn any_text_is_an_answer_or_an_error(s in "[-+*/%^() .0-9x]{0,6000}") {
            let _ = eval(&s);
        }
    }
}
