//! The retail `calculate` tool's arithmetic: Python's `eval` restricted to numbers, `+ - * /`,
//! `//`, `**` and parentheses (the characters tau2 allows), with Python's int and float
//! semantics and error messages.

use super::Raised;

#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn f(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(x) => x,
        }
    }
}

/// Evaluates `expr` and returns `float(result)`.
pub(super) fn eval(expr: &str) -> Result<f64, Raised> {
    let tokens = lex(expr)?;
    let mut p = Parser { tokens, pos: 0 };
    let v = p.expr()?;
    if p.pos != p.tokens.len() {
        return Err(SYNTAX.into());
    }
    Ok(v.f())
}

const SYNTAX: &str = "invalid syntax (<string>, line 1)";

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(Num),
    Op(&'static str),
    Open,
    Close,
}

fn lex(s: &str) -> Result<Vec<Tok>, Raised> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' => i += 1,
            b'(' => {
                out.push(Tok::Open);
                i += 1
            }
            b')' => {
                out.push(Tok::Close);
                i += 1
            }
            b'+' => {
                out.push(Tok::Op("+"));
                i += 1
            }
            b'-' => {
                out.push(Tok::Op("-"));
                i += 1
            }
            b'*' if b.get(i + 1) == Some(&b'*') => {
                out.push(Tok::Op("**"));
                i += 2
            }
            b'*' => {
                out.push(Tok::Op("*"));
                i += 1
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                out.push(Tok::Op("//"));
                i += 2
            }
            b'/' => {
                out.push(Tok::Op("/"));
                i += 1
            }
            b'0'..=b'9' | b'.' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                    i += 1;
                }
                let lit = &s[start..i];
                if lit == "." || lit.matches('.').count() > 1 {
                    return Err(SYNTAX.into());
                }
                if lit.contains('.') {
                    out.push(Tok::Num(Num::Float(
                        lit.parse().map_err(|_| SYNTAX.to_owned())?,
                    )));
                } else {
                    if lit.len() > 1 && lit.starts_with('0') && lit.bytes().any(|c| c != b'0') {
                        return Err("leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers (<string>, line 1)".into());
                    }
                    out.push(Tok::Num(match lit.parse::<i128>() {
                        Ok(i) => Num::Int(i),
                        Err(_) => Num::Float(lit.parse().map_err(|_| SYNTAX.to_owned())?),
                    }));
                }
            }
            _ => return Err(SYNTAX.into()),
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek_op(&self) -> Option<&'static str> {
        match self.tokens.get(self.pos) {
            Some(Tok::Op(o)) => Some(o),
            _ => None,
        }
    }

    fn expr(&mut self) -> Result<Num, Raised> {
        let mut v = self.term()?;
        while let Some(op @ ("+" | "-")) = self.peek_op() {
            self.pos += 1;
            let r = self.term()?;
            v = arith(op, v, r)?;
        }
        Ok(v)
    }

    fn term(&mut self) -> Result<Num, Raised> {
        let mut v = self.factor()?;
        while let Some(op @ ("*" | "/" | "//")) = self.peek_op() {
            self.pos += 1;
            let r = self.factor()?;
            v = arith(op, v, r)?;
        }
        Ok(v)
    }

    fn factor(&mut self) -> Result<Num, Raised> {
        match self.peek_op() {
            Some("-") => {
                self.pos += 1;
                Ok(match self.factor()? {
                    Num::Int(i) => Num::Int(-i),
                    Num::Float(x) => Num::Float(-x),
                })
            }
            Some("+") => {
                self.pos += 1;
                self.factor()
            }
            _ => self.power(),
        }
    }

    fn power(&mut self) -> Result<Num, Raised> {
        let base = self.atom()?;
        if self.peek_op() == Some("**") {
            self.pos += 1;
            let exp = self.factor()?;
            return arith("**", base, exp);
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Num, Raised> {
        match self.tokens.get(self.pos).cloned() {
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Ok(n)
            }
            Some(Tok::Open) => {
                self.pos += 1;
                let v = self.expr()?;
                if self.tokens.get(self.pos) != Some(&Tok::Close) {
                    return Err(SYNTAX.into());
                }
                self.pos += 1;
                Ok(v)
            }
            _ => Err(SYNTAX.into()),
        }
    }
}

impl PartialEq for Num {
    fn eq(&self, other: &Self) -> bool {
        self.f() == other.f()
    }
}

fn arith(op: &str, a: Num, b: Num) -> Result<Num, Raised> {
    use Num::{Float, Int};
    Ok(match (op, a, b) {
        ("+", Int(x), Int(y)) => x.checked_add(y).map_or(Float(x as f64 + y as f64), Int),
        ("-", Int(x), Int(y)) => x.checked_sub(y).map_or(Float(x as f64 - y as f64), Int),
        ("*", Int(x), Int(y)) => x.checked_mul(y).map_or(Float(x as f64 * y as f64), Int),
        ("+", x, y) => Float(x.f() + y.f()),
        ("-", x, y) => Float(x.f() - y.f()),
        ("*", x, y) => Float(x.f() * y.f()),
        ("/", Int(_), Int(0)) => return Err("division by zero".into()),
        ("/", _, y) if y.f() == 0.0 => return Err("float division by zero".into()),
        ("/", x, y) => Float(x.f() / y.f()),
        ("//", Int(_), Int(0)) => return Err("integer division or modulo by zero".into()),
        ("//", Int(x), Int(y)) => {
            let q = x / y;
            Int(if x % y != 0 && ((x < 0) != (y < 0)) {
                q - 1
            } else {
                q
            })
        }
        ("//", _, y) if y.f() == 0.0 => return Err("float floor division by zero".into()),
        ("//", x, y) => Float((x.f() / y.f()).floor()),
        ("**", Int(x), Int(y)) if y >= 0 => u32::try_from(y)
            .ok()
            .and_then(|e| x.checked_pow(e))
            .map_or(Float((x as f64).powf(y as f64)), Int),
        ("**", x, y) if x.f() == 0.0 && y.f() < 0.0 => {
            return Err("0.0 cannot be raised to a negative power".into());
        }
        ("**", x, y) => Float(x.f().powf(y.f())),
        _ => return Err(SYNTAX.into()),
    })
}

#[cfg(test)]
mod tests {
    use super::eval;

    #[test]
    fn arithmetic_is_pythons() {
        assert_eq!(eval("2 + 2").unwrap(), 4.0);
        assert_eq!(eval("(10 - 4) / 4").unwrap(), 1.5);
        assert_eq!(eval("-7 // 2").unwrap(), -4.0);
        assert_eq!(eval("2 ** 3 ** 2").unwrap(), 512.0);
        assert_eq!(eval("-2 ** 2").unwrap(), -4.0);
        assert_eq!(eval("199.99 * 2").unwrap(), 199.99 * 2.0);
        assert_eq!(eval("1/0").unwrap_err(), "division by zero");
        assert_eq!(eval("1.0/0").unwrap_err(), "float division by zero");
        assert!(eval("2 3").is_err());
        assert!(eval("(1 + 2").is_err());
        assert!(eval("").is_err());
    }
}
