//! Grammar-constrained decoding: token masks that force the output to match a JSON Schema.
//!
//! A schema compiles to a [`Grammar`] (a tree of [`Node`]s). A [`Matcher`] is a small stack
//! machine over output *bytes*; a [`TokenTable`] holds every token's bytes in a trie, so the
//! tokens allowed next are found by walking the trie with a copy of the matcher and dropping
//! every branch the matcher refuses. Free string content, where almost every token is allowed,
//! takes a precomputed fast path instead of the walk.
//!
//! Output is compact JSON (no whitespace), objects list their properties in schema order, every
//! string is capped (`max_string` characters, or the schema's `maxLength`) and every array too
//! (`maxItems`, default 8): a call always closes within a bounded number of tokens.
//!
//! ```
//! use agentry_local::constrain::{Grammar, Matcher, TokenTable};
//! let vocab: Vec<Vec<u8>> = ["{", "}", "\"", "\"a\":", "1", "2", "x", "\"a\":1}"]
//!     .iter().map(|s| s.as_bytes().to_vec()).collect();
//! let table = TokenTable::new(vocab, None);
//! let schema = serde_json::json!({"type": "object", "properties": {"a": {"type": "integer"}},
//!                                 "required": ["a"]});
//! let grammar = Grammar::from_schema(&schema, 64).unwrap();
//! let m = Matcher::new(&grammar);
//! let allowed = table.allowed(&m);
//! assert_eq!(allowed, vec![0]); // only "{" can start the object
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

/// Why a schema cannot be compiled.
#[derive(Debug, thiserror::Error)]
#[error("schema not supported for constrained decoding at {path}: {reason}")]
pub struct SchemaError {
    /// Where in the schema (a JSON pointer).
    pub path: String,
    /// What is not supported there.
    pub reason: String,
}

/// One node of a compiled grammar.
#[derive(Debug, Clone)]
pub enum Node {
    /// `{"k1":v1,"k2":v2}` in this order; optional properties may be left out.
    Object(Vec<Property>),
    /// A free string of at most `max` characters.
    Str {
        /// Characters at most.
        max: usize,
    },
    /// One of these exact JSON texts (enum, const, booleans, null).
    Literal(Vec<Vec<u8>>),
    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, capped at 16 digits.
    Number {
        /// No fraction.
        integer: bool,
    },
    /// `[item,item]` with at most `max` items.
    Array {
        /// The node of each item.
        item: usize,
        /// Fewest items.
        min: usize,
        /// Most items.
        max: usize,
    },
    /// `{"name":"<one of names>","arguments":<args[i]>}`: the arguments' grammar depends on
    /// the name chosen, which a plain schema cannot say without `oneOf`.
    ToolCall {
        /// The tools' names.
        names: Vec<String>,
        /// The names as JSON strings, quotes included.
        quoted: Vec<Vec<u8>>,
        /// Each tool's arguments node, in the order of `names`.
        args: Vec<usize>,
    },
}

/// A property of an [`Node::Object`].
#[derive(Debug, Clone)]
pub struct Property {
    /// `"name":` as bytes.
    key: Vec<u8>,
    node: usize,
    required: bool,
}

/// A compiled grammar: nodes in an arena, node 0 is the root.
#[derive(Debug, Clone)]
pub struct Grammar {
    nodes: Vec<Node>,
}

impl Grammar {
    /// Compiles a JSON Schema. Supported: `type` object/string/integer/number/boolean/null/
    /// array (a list with `null` is read as the other type), `properties`/`required`,
    /// `enum`, `const`, `maxLength`, `items`/`minItems`/`maxItems`, local `$ref`s
    /// (`#/$defs/..`, `#/definitions/..`), and `anyOf`/`oneOf` whose branches are all
    /// literals. A schema with no type (`{}`) is read as a string.
    pub fn from_schema(schema: &Value, max_string: usize) -> Result<Grammar, SchemaError> {
        let mut g = Grammar { nodes: Vec::new() };
        let mut c = Compiler::new(schema, max_string);
        c.node(&mut g, schema, "$")?;
        // The root was pushed last among its subtree; move it to index 0.
        let root = g.nodes.len() - 1;
        g.reroot(root);
        Ok(g)
    }

    /// A tool call: `{"name":..., "arguments":...}` over these tools and their argument schemas.
    pub fn tool_call(tools: &[(String, Value)], max_string: usize) -> Result<Grammar, SchemaError> {
        let mut g = Grammar { nodes: Vec::new() };
        let mut args = Vec::new();
        for (name, schema) in tools {
            let mut c = Compiler::new(schema, max_string);
            args.push(c.node(&mut g, schema, &format!("{name}.arguments"))?);
        }
        g.nodes.push(Node::ToolCall {
            names: tools.iter().map(|(n, _)| n.clone()).collect(),
            quoted: tools
                .iter()
                .map(|(n, _)| serde_json::to_vec(n).expect("string serializes"))
                .collect(),
            args,
        });
        let root = g.nodes.len() - 1;
        g.reroot(root);
        Ok(g)
    }

    fn push(&mut self, n: Node) -> usize {
        self.nodes.push(n);
        self.nodes.len() - 1
    }

    /// Swaps node `root` with node 0, fixing references.
    fn reroot(&mut self, root: usize) {
        if root == 0 {
            return;
        }
        self.nodes.swap(0, root);
        let fix = |i: &mut usize| {
            if *i == 0 {
                *i = root;
            } else if *i == root {
                *i = 0;
            }
        };
        for n in &mut self.nodes {
            match n {
                Node::Object(props) => props.iter_mut().for_each(|p| fix(&mut p.node)),
                Node::Array { item, .. } => fix(item),
                Node::ToolCall { args, .. } => args.iter_mut().for_each(fix),
                _ => {}
            }
        }
    }
}

/// Nodes one grammar may hold. With `$ref`s compiled once each the node count follows the
/// schema's size; the cap bounds what a large schema from a request can cost.
const MAX_NODES: usize = 10_000;

struct Compiler<'a> {
    root: &'a Value,
    max_string: usize,
    depth: usize,
    /// Each `$ref` target compiled once and shared: expanded inline, 31 levels of definitions
    /// that each use the previous one twice made 2^31 nodes from a 2.8 KB request.
    refs: HashMap<String, usize>,
}

impl<'a> Compiler<'a> {
    fn new(root: &'a Value, max_string: usize) -> Self {
        Compiler {
            root,
            max_string,
            depth: 0,
            refs: HashMap::new(),
        }
    }

    fn err(path: &str, reason: impl Into<String>) -> SchemaError {
        SchemaError {
            path: path.to_owned(),
            reason: reason.into(),
        }
    }

    fn resolve<'v>(&self, schema: &'v Value, path: &str) -> Result<&'v Value, SchemaError>
    where
        'a: 'v,
    {
        match schema.get("$ref").and_then(Value::as_str) {
            None => Ok(schema),
            Some(r) => {
                let ptr = r
                    .strip_prefix('#')
                    .ok_or_else(|| Self::err(path, format!("only local $ref is supported: {r}")))?;
                self.root
                    .pointer(ptr)
                    .ok_or_else(|| Self::err(path, format!("unresolved $ref {r}")))
            }
        }
    }

    fn node(&mut self, g: &mut Grammar, schema: &Value, path: &str) -> Result<usize, SchemaError> {
        if g.nodes.len() >= MAX_NODES {
            return Err(Self::err(path, format!("more than {MAX_NODES} nodes")));
        }
        let reference = schema.get("$ref").and_then(Value::as_str);
        if let Some(&n) = reference.and_then(|r| self.refs.get(r)) {
            return Ok(n);
        }
        self.depth += 1;
        if self.depth > 32 {
            return Err(Self::err(path, "nesting deeper than 32 (recursive $ref?)"));
        }
        let r = self.node_inner(g, schema, path);
        self.depth -= 1;
        if let (Some(reference), Ok(n)) = (reference, &r) {
            self.refs.insert(reference.to_owned(), *n);
        }
        r
    }

    fn node_inner(
        &mut self,
        g: &mut Grammar,
        schema: &Value,
        path: &str,
    ) -> Result<usize, SchemaError> {
        let schema = self.resolve(schema, path)?;
        if schema.as_bool() == Some(true) {
            return Ok(g.push(Node::Str {
                max: self.max_string,
            }));
        }
        if let Some(c) = schema.get("const") {
            return Ok(g.push(Node::Literal(vec![literal(c)])));
        }
        if let Some(e) = schema.get("enum").and_then(Value::as_array) {
            if e.is_empty() {
                return Err(Self::err(path, "empty enum"));
            }
            return Ok(g.push(Node::Literal(e.iter().map(literal).collect())));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(alts) = schema.get(key).and_then(Value::as_array) {
                let mut lits = Vec::new();
                let mut other = Vec::new();
                for a in alts {
                    let a = self.resolve(a, path)?;
                    if let Some(c) = a.get("const") {
                        lits.push(literal(c));
                    } else if let Some(e) = a.get("enum").and_then(Value::as_array) {
                        lits.extend(e.iter().map(literal));
                    } else if a.get("type").and_then(Value::as_str) == Some("null") {
                        continue;
                    } else {
                        other.push(a);
                    }
                }
                return match (lits.is_empty(), other.as_slice()) {
                    (false, []) => Ok(g.push(Node::Literal(lits))),
                    (true, [one]) => self.node(g, one, path),
                    _ => Err(Self::err(
                        path,
                        format!("{key} with several non-literal branches"),
                    )),
                };
            }
        }
        let ty = match schema.get("type") {
            Some(Value::String(s)) => s.as_str(),
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .unwrap_or("null"),
            None if schema.get("properties").is_some() => "object",
            None if schema.get("items").is_some() => "array",
            None => "string",
            Some(other) => return Err(Self::err(path, format!("bad type {other}"))),
        };
        let n = match ty {
            "string" => {
                let max = schema
                    .get("maxLength")
                    .and_then(Value::as_u64)
                    .map_or(self.max_string, |m| (m as usize).min(self.max_string));
                Node::Str { max }
            }
            "integer" => Node::Number { integer: true },
            "number" => Node::Number { integer: false },
            "boolean" => Node::Literal(vec![b"true".to_vec(), b"false".to_vec()]),
            "null" => Node::Literal(vec![b"null".to_vec()]),
            "array" => {
                let items = schema.get("items").cloned().unwrap_or(Value::Bool(true));
                let item = self.node(g, &items, &format!("{path}[]"))?;
                let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
                let max = schema
                    .get("maxItems")
                    .and_then(Value::as_u64)
                    .map_or(8, |m| m as usize)
                    .max(min);
                Node::Array { item, min, max }
            }
            "object" => {
                let required: HashSet<&str> = schema
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut props = Vec::new();
                if let Some(p) = schema.get("properties").and_then(Value::as_object) {
                    for (name, s) in p {
                        let node = self.node(g, s, &format!("{path}.{name}"))?;
                        let mut key = serde_json::to_vec(name).expect("string serializes");
                        key.push(b':');
                        props.push(Property {
                            key,
                            node,
                            required: required.contains(name.as_str()),
                        });
                    }
                }
                Node::Object(props)
            }
            other => return Err(Self::err(path, format!("unknown type {other}"))),
        };
        Ok(g.push(n))
    }
}

fn literal(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON value serializes")
}

/// Where a frame of the matcher stands.
#[derive(Debug, Clone, PartialEq)]
enum Frame {
    /// A value of this node comes next.
    Value(usize),
    /// Inside an object: `next` is the first property not yet written; `open` says whether
    /// `{` has been written and nothing else, `key` holds the candidate keys being matched.
    Object {
        node: usize,
        next: usize,
        started: bool,
        key: Option<LitState>,
    },
    Str {
        len: usize,
        max: usize,
        escape: bool,
        utf8: u8,
    },
    Lit(LitState),
    Number {
        integer: bool,
        state: NumState,
        digits: u8,
    },
    Array {
        node: usize,
        count: usize,
        expect_item: bool,
    },
    /// Stages: 0 expects `{"name":`, 1 the name, 2 `,"arguments":`, 3 the value, 4 `}`.
    ToolCall {
        node: usize,
        stage: u8,
        fixed: LitState,
        chosen: usize,
    },
}

/// Matching one of several literals: candidates still alive and bytes matched so far.
#[derive(Debug, Clone, PartialEq)]
struct LitState {
    cands: Vec<u32>,
    pos: usize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum NumState {
    Start,
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
}

/// The stack machine that checks output bytes against a [`Grammar`].
#[derive(Debug, Clone)]
pub struct Matcher {
    grammar: Arc<Grammar>,
    stack: Vec<Frame>,
    /// Wrap up: strings take only their closing quote, arrays no more items, objects no more
    /// optional properties, numbers no more digits. Set when the token budget runs low, so
    /// the value still closes.
    pub closing: bool,
}

/// Bytes a JSON string may hold unescaped (ASCII part; bytes >= 0x80 are checked as UTF-8).
fn plain_ascii(b: u8) -> bool {
    b >= 0x20 && b != b'"' && b != b'\\' && b < 0x80
}

const MAX_DIGITS: u8 = 16;

impl Matcher {
    /// A matcher at the start of `grammar` (copies it; see [`Matcher::from_arc`]).
    pub fn new(grammar: &Grammar) -> Matcher {
        Self::from_arc(Arc::new(grammar.clone()))
    }

    /// A matcher at the start of a shared grammar.
    pub fn from_arc(grammar: Arc<Grammar>) -> Matcher {
        Matcher {
            grammar,
            stack: vec![Frame::Value(0)],
            closing: false,
        }
    }

    /// True when a complete value has been written.
    pub fn is_done(&self) -> bool {
        self.stack.is_empty()
            || (self.stack.len() == 1
                && matches!(
                    self.stack[0],
                    Frame::Number {
                        state: NumState::Zero | NumState::Int | NumState::Frac,
                        ..
                    }
                ))
    }

    /// Feeds bytes; false (and the matcher is left in an unspecified state) when refused.
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        bytes.iter().all(|&b| self.step(b))
    }

    /// Characters written so far when the top frame is free string content.
    pub fn open_string(&self) -> Option<usize> {
        match self.stack.last() {
            Some(Frame::Str {
                len,
                escape: false,
                utf8: 0,
                ..
            }) => Some(*len),
            _ => None,
        }
    }

    /// The top frame is free string content that takes any plain character.
    fn in_free_string(&self) -> Option<usize> {
        match self.stack.last() {
            Some(Frame::Str {
                len,
                max,
                escape: false,
                utf8: 0,
            }) => Some(if self.closing { 0 } else { max - len }),
            _ => None,
        }
    }

    fn step(&mut self, b: u8) -> bool {
        loop {
            let Some(top) = self.stack.pop() else {
                return false;
            };
            match self.advance(top, b) {
                Step::Consumed(frames) => {
                    self.stack.extend(frames);
                    return true;
                }
                Step::Done => return true,
                // The frame ended just before `b`: give `b` to the frame below.
                Step::Ended => continue,
                Step::Refused => return false,
            }
        }
    }

    fn advance(&self, frame: Frame, b: u8) -> Step {
        let g = &self.grammar;
        match frame {
            Frame::Value(n) => self.start_value(n, b),
            Frame::Object {
                node,
                next,
                started,
                key,
            } => {
                let Node::Object(props) = &g.nodes[node] else {
                    return Step::Refused;
                };
                if let Some(mut k) = key {
                    // Matching a key among the candidates `"name":`.
                    let keys: Vec<&[u8]> = props.iter().map(|p| p.key.as_slice()).collect();
                    if !k.step(&keys, b) {
                        return Step::Refused;
                    }
                    if let Some(i) = k.complete(&keys) {
                        let i = i as usize;
                        return Step::Consumed(vec![
                            Frame::Object {
                                node,
                                next: i + 1,
                                started: true,
                                key: None,
                            },
                            Frame::Value(props[i].node),
                        ]);
                    }
                    return Step::Consumed(vec![Frame::Object {
                        node,
                        next,
                        started,
                        key: Some(k),
                    }]);
                }
                // Between properties: after `{` (started == false) a key may begin, after a
                // value `,` introduces the next one; `}` when no required property is left.
                let rest_optional = props[next..].iter().all(|p| !p.required);
                let candidates: Vec<u32> = {
                    let mut c = Vec::new();
                    for (i, p) in props.iter().enumerate().skip(next) {
                        if self.closing && !p.required {
                            continue;
                        }
                        c.push(i as u32);
                        if p.required {
                            break;
                        }
                    }
                    c
                };
                if b == b'}' && rest_optional {
                    return Step::Done;
                }
                let begins_key = if started { b == b',' } else { b == b'"' };
                if !begins_key || candidates.is_empty() {
                    return Step::Refused;
                }
                let mut k = LitState {
                    cands: candidates,
                    pos: 0,
                };
                if !started {
                    let keys: Vec<&[u8]> = props.iter().map(|p| p.key.as_slice()).collect();
                    if !k.step(&keys, b) {
                        return Step::Refused;
                    }
                }
                Step::Consumed(vec![Frame::Object {
                    node,
                    next,
                    started: true,
                    key: Some(k),
                }])
            }
            Frame::Str {
                len,
                max,
                escape,
                utf8,
            } => {
                if escape {
                    return if matches!(b, b'"' | b'\\' | b'/' | b'n' | b't' | b'r') {
                        Step::Consumed(vec![Frame::Str {
                            len: len + 1,
                            max,
                            escape: false,
                            utf8: 0,
                        }])
                    } else {
                        Step::Refused
                    };
                }
                if utf8 > 0 {
                    return if b & 0xC0 == 0x80 {
                        Step::Consumed(vec![Frame::Str {
                            len,
                            max,
                            escape,
                            utf8: utf8 - 1,
                        }])
                    } else {
                        Step::Refused
                    };
                }
                if b == b'"' {
                    return Step::Done;
                }
                if len >= max || self.closing {
                    return Step::Refused;
                }
                let (escape, utf8) = match b {
                    b'\\' => (true, 0),
                    _ if plain_ascii(b) => (false, 0),
                    0xC2..=0xDF => (false, 1),
                    0xE0..=0xEF => (false, 2),
                    0xF0..=0xF4 => (false, 3),
                    _ => return Step::Refused,
                };
                Step::Consumed(vec![Frame::Str {
                    len: if escape { len } else { len + 1 },
                    max,
                    escape,
                    utf8,
                }])
            }
            Frame::Lit(mut l) => {
                let Some(lits) = self.literals_of(&l) else {
                    return Step::Refused;
                };
                let lits: Vec<&[u8]> = lits.iter().map(Vec::as_slice).collect();
                let complete = l.complete(&lits).is_some();
                if !l.step(&lits, b) {
                    // A literal that is a prefix of another ("1" and "12") may end here.
                    return if complete { Step::Ended } else { Step::Refused };
                }
                if l.complete(&lits).is_some() && l.cands.len() == 1 {
                    Step::Done
                } else {
                    Step::Consumed(vec![Frame::Lit(l)])
                }
            }
            Frame::Number {
                integer,
                state,
                digits,
            } => {
                use NumState::*;
                let next = match (state, b) {
                    (Start, b'-') => Some(Minus),
                    (Start | Minus, b'0') => Some(Zero),
                    (Start | Minus, b'1'..=b'9') => Some(Int),
                    (Int, b'0'..=b'9') if digits < MAX_DIGITS && !self.closing => Some(Int),
                    (Zero | Int, b'.') if !integer && !self.closing => Some(Dot),
                    (Dot, b'0'..=b'9') => Some(Frac),
                    (Frac, b'0'..=b'9') if digits < MAX_DIGITS && !self.closing => Some(Frac),
                    _ => None,
                };
                match next {
                    Some(state) => Step::Consumed(vec![Frame::Number {
                        integer,
                        state,
                        digits: digits + b.is_ascii_digit() as u8,
                    }]),
                    None if matches!(state, Zero | Int | Frac) => Step::Ended,
                    None => Step::Refused,
                }
            }
            Frame::Array {
                node,
                count,
                expect_item,
            } => {
                let Node::Array { item, min, max } = g.nodes[node] else {
                    return Step::Refused;
                };
                if expect_item {
                    // Right after `[`: an item, or `]` when none is required.
                    if b == b']' && min == 0 {
                        return Step::Done;
                    }
                    if self.closing && min == 0 {
                        return Step::Refused;
                    }
                    let below = Frame::Array {
                        node,
                        count: count + 1,
                        expect_item: false,
                    };
                    return match self.start_value(item, b) {
                        Step::Consumed(mut f) => {
                            f.insert(0, below);
                            Step::Consumed(f)
                        }
                        Step::Done => Step::Consumed(vec![below]),
                        other => other,
                    };
                }
                match b {
                    b']' if count >= min => Step::Done,
                    b',' if count < max && !self.closing => Step::Consumed(vec![
                        Frame::Array {
                            node,
                            count: count + 1,
                            expect_item: false,
                        },
                        Frame::Value(item),
                    ]),
                    _ => Step::Refused,
                }
            }
            Frame::ToolCall {
                node,
                stage,
                mut fixed,
                chosen,
            } => {
                let Node::ToolCall { quoted, args, .. } = &g.nodes[node] else {
                    return Step::Refused;
                };
                match stage {
                    0 | 2 | 4 => {
                        let text: &[u8] = match stage {
                            0 => b"{\"name\":",
                            2 => b",\"arguments\":",
                            _ => b"}",
                        };
                        if !fixed.step(&[text], b) {
                            return Step::Refused;
                        }
                        if fixed.complete(&[text]).is_none() {
                            return Step::Consumed(vec![Frame::ToolCall {
                                node,
                                stage,
                                fixed,
                                chosen,
                            }]);
                        }
                        if stage == 4 {
                            return Step::Done;
                        }
                        Step::Consumed(vec![Frame::ToolCall {
                            node,
                            stage: stage + 1,
                            fixed: LitState::all(if stage == 0 { quoted.len() } else { 1 }),
                            chosen,
                        }])
                    }
                    1 => {
                        let quoted: Vec<&[u8]> = quoted.iter().map(Vec::as_slice).collect();
                        if !fixed.step(&quoted, b) {
                            return Step::Refused;
                        }
                        match fixed.complete(&quoted) {
                            Some(i) => Step::Consumed(vec![Frame::ToolCall {
                                node,
                                stage: 2,
                                fixed: LitState::all(1),
                                chosen: i as usize,
                            }]),
                            None => Step::Consumed(vec![Frame::ToolCall {
                                node,
                                stage,
                                fixed,
                                chosen,
                            }]),
                        }
                    }
                    3 => {
                        let below = Frame::ToolCall {
                            node,
                            stage: 4,
                            fixed: LitState::all(1),
                            chosen,
                        };
                        match self.start_value(args[chosen], b) {
                            Step::Consumed(mut f) => {
                                f.insert(0, below);
                                Step::Consumed(f)
                            }
                            Step::Done => Step::Consumed(vec![below]),
                            other => other,
                        }
                    }
                    _ => Step::Refused,
                }
            }
        }
    }

    /// The first byte of a value of node `n`.
    fn start_value(&self, n: usize, b: u8) -> Step {
        match &self.grammar.nodes[n] {
            Node::Object(_) if b == b'{' => Step::Consumed(vec![Frame::Object {
                node: n,
                next: 0,
                started: false,
                key: None,
            }]),
            Node::Str { max } if b == b'"' => Step::Consumed(vec![Frame::Str {
                len: 0,
                max: *max,
                escape: false,
                utf8: 0,
            }]),
            Node::Literal(lits) => {
                let mut l = LitState::all(lits.len());
                let refs: Vec<&[u8]> = lits.iter().map(Vec::as_slice).collect();
                if !l.step(&refs, b) {
                    return Step::Refused;
                }
                l.cands.iter_mut().for_each(|c| *c |= (n as u32) << 16);
                if l.cands.len() == 1 && refs[(l.cands[0] & 0xFFFF) as usize].len() == 1 {
                    return Step::Done;
                }
                Step::Consumed(vec![Frame::Lit(l)])
            }
            Node::Number { integer } => self.advance(
                Frame::Number {
                    integer: *integer,
                    state: NumState::Start,
                    digits: 0,
                },
                b,
            ),
            Node::Array { .. } if b == b'[' => Step::Consumed(vec![Frame::Array {
                node: n,
                count: 0,
                expect_item: true,
            }]),
            Node::ToolCall { .. } => self.advance(
                Frame::ToolCall {
                    node: n,
                    stage: 0,
                    fixed: LitState::all(1),
                    chosen: 0,
                },
                b,
            ),
            _ => Step::Refused,
        }
    }

    /// Literal frames keep their node in the candidates' high 16 bits.
    fn literals_of(&self, l: &LitState) -> Option<&Vec<Vec<u8>>> {
        let node = (*l.cands.first()? >> 16) as usize;
        match &self.grammar.nodes[node] {
            Node::Literal(lits) => Some(lits),
            _ => None,
        }
    }

    /// Once a tool call's name is complete: which tool (index into the grammar's names).
    pub fn chosen_tool(&self) -> Option<usize> {
        self.stack.iter().find_map(|f| match f {
            Frame::ToolCall { stage, chosen, .. } if *stage >= 2 => Some(*chosen),
            _ => None,
        })
    }
}

enum Step {
    /// `b` was taken; push these frames (bottom first) in place of the popped one.
    Consumed(Vec<Frame>),
    /// `b` was taken and completed the frame.
    Done,
    /// The frame was already complete; `b` belongs to the frame below.
    Ended,
    Refused,
}

impl LitState {
    fn all(n: usize) -> Self {
        LitState {
            cands: (0..n as u32).collect(),
            pos: 0,
        }
    }

    /// Keeps the candidates whose next byte is `b` (candidate ids may carry a node tag in the
    /// high 16 bits).
    fn step(&mut self, lits: &[&[u8]], b: u8) -> bool {
        let pos = self.pos;
        self.cands.retain(|&c| {
            lits.get((c & 0xFFFF) as usize)
                .is_some_and(|l| l.get(pos) == Some(&b))
        });
        self.pos += 1;
        !self.cands.is_empty()
    }

    /// A candidate fully matched (the shortest, when one literal is a prefix of another).
    fn complete(&self, lits: &[&[u8]]) -> Option<u32> {
        self.cands
            .iter()
            .map(|&c| c & 0xFFFF)
            .find(|&c| lits[c as usize].len() == self.pos)
    }
}

/// Every token's bytes, in a trie, plus what the fast path needs.
pub struct TokenTable {
    bytes: Vec<Vec<u8>>,
    /// Trie over all non-special tokens.
    trie: Trie,
    /// Trie over the tokens the string fast path does not cover.
    rest: Trie,
    /// Tokens made only of whole plain string characters, sorted by character count.
    plain: Vec<(u32, u32)>,
    eos: Option<u32>,
}

#[derive(Default)]
struct Trie {
    /// Per node: children as (byte, node) sorted by byte, and the tokens ending here.
    children: Vec<Vec<(u8, u32)>>,
    ends: Vec<Vec<u32>>,
}

impl Trie {
    fn new() -> Self {
        Trie {
            children: vec![Vec::new()],
            ends: vec![Vec::new()],
        }
    }

    fn insert(&mut self, bytes: &[u8], id: u32) {
        let mut n = 0usize;
        for &b in bytes {
            n = match self.children[n].binary_search_by_key(&b, |&(k, _)| k) {
                Ok(i) => self.children[n][i].1 as usize,
                Err(i) => {
                    let new = self.children.len() as u32;
                    self.children.push(Vec::new());
                    self.ends.push(Vec::new());
                    self.children[n].insert(i, (b, new));
                    new as usize
                }
            };
        }
        self.ends[n].push(id);
    }

    /// Every token whose bytes the matcher accepts.
    fn walk(&self, node: usize, m: &Matcher, out: &mut Vec<u32>) {
        for &(b, child) in &self.children[node] {
            let mut next = m.clone();
            if next.step(b) {
                out.extend_from_slice(&self.ends[child as usize]);
                self.walk(child as usize, &next, out);
            }
        }
    }
}

/// Character count of `bytes` when they are whole, plain string characters.
fn plain_chars(bytes: &[u8]) -> Option<usize> {
    let s = std::str::from_utf8(bytes).ok()?;
    if s.is_empty() || !s.chars().all(|c| c as u32 >= 0x20 && c != '"' && c != '\\') {
        return None;
    }
    Some(s.chars().count())
}

impl TokenTable {
    /// `bytes[i]` is token i's bytes; empty for special tokens (never allowed by a grammar).
    /// `eos` is allowed once the matcher is done.
    pub fn new(bytes: Vec<Vec<u8>>, eos: Option<u32>) -> TokenTable {
        let mut trie = Trie::new();
        let mut rest = Trie::new();
        let mut plain = Vec::new();
        for (i, b) in bytes.iter().enumerate() {
            if b.is_empty() {
                continue;
            }
            trie.insert(b, i as u32);
            match plain_chars(b) {
                Some(n) => plain.push((n as u32, i as u32)),
                None => rest.insert(b, i as u32),
            }
        }
        plain.sort_unstable();
        TokenTable {
            bytes,
            trie,
            rest,
            plain,
            eos,
        }
    }

    /// How many tokens the vocabulary has.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the vocabulary is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Token `id`'s bytes (empty for an unknown id).
    pub fn bytes(&self, id: u32) -> &[u8] {
        self.bytes.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// The tokens the matcher accepts next (the end-of-sequence token once it is done).
    pub fn allowed(&self, m: &Matcher) -> Vec<u32> {
        let mut out = Vec::new();
        if m.is_done()
            && let Some(eos) = self.eos
        {
            out.push(eos);
        }
        if m.stack.is_empty() {
            return out;
        }
        if let Some(room) = m.in_free_string() {
            let end = self.plain.partition_point(|&(n, _)| n as usize <= room);
            out.extend(self.plain[..end].iter().map(|&(_, id)| id));
            self.rest.walk(0, m, &mut out);
        } else {
            self.trie.walk(0, m, &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table(tokens: &[&str]) -> TokenTable {
        TokenTable::new(tokens.iter().map(|t| t.as_bytes().to_vec()).collect(), None)
    }

    fn accepts(g: &Grammar, text: &str) -> bool {
        let mut m = Matcher::new(g);
        m.feed(text.as_bytes()) && m.is_done()
    }

    #[test]
    fn objects_strings_numbers_enums_arrays() {
        let schema = json!({"type": "object", "properties": {
            "q": {"type": "string", "maxLength": 5},
            "n": {"type": "integer"},
            "x": {"type": ["number", "null"]},
            "kind": {"enum": ["bar", "line"]},
            "tags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2},
        }, "required": ["q", "kind"]});
        let g = Grammar::from_schema(&schema, 100).unwrap();
        // serde_json's map keeps keys sorted: kind, n, q, tags, x.
        assert!(accepts(&g, r#"{"kind":"bar","q":"hello"}"#));
        assert!(accepts(
            &g,
            r#"{"kind":"line","n":-12,"q":"","tags":[true,false],"x":0.5}"#
        ));
        assert!(!accepts(&g, r#"{"kind":"pie","q":"a"}"#), "not in enum");
        assert!(!accepts(&g, r#"{"q":"a"}"#), "required kind missing");
        assert!(!accepts(&g, r#"{"kind":"bar","q":"toolong"}"#), "maxLength");
        assert!(!accepts(&g, r#"{"kind":"bar","n":1.5,"q":"a"}"#), "integer");
        assert!(!accepts(
            &g,
            r#"{"kind":"bar","q":"a","tags":[true,true,true]}"#
        ));
        assert!(
            !accepts(&g, r#"{"kind":"bar","q":"a","zzz":1}"#),
            "unknown key"
        );
        assert!(!accepts(&g, r#"{"kind":"bar", "q":"a"}"#), "no whitespace");
        assert!(
            accepts(&g, r#"{"kind":"bar","q":"é\"\n"}"#),
            "escapes and UTF-8"
        );
    }

    #[test]
    fn tool_call_arguments_follow_the_chosen_name() {
        let tools = vec![
            (
                "add".to_string(),
                json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
            ),
            (
                "search".to_string(),
                json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
            ),
        ];
        let g = Grammar::tool_call(&tools, 50).unwrap();
        assert!(accepts(&g, r#"{"name":"add","arguments":{"a":3}}"#));
        assert!(accepts(
            &g,
            r#"{"name":"search","arguments":{"query":"x"}}"#
        ));
        assert!(!accepts(&g, r#"{"name":"add","arguments":{"query":"x"}}"#));
        assert!(!accepts(&g, r#"{"name":"delete","arguments":{}}"#));
        let mut m = Matcher::new(&g);
        assert!(m.feed(br#"{"name":"search","#));
        assert_eq!(m.chosen_tool(), Some(1));
    }

    #[test]
    fn masks_allow_only_tokens_that_keep_the_output_valid() {
        let t = table(&[
            "{",
            "\"",
            "\"name\":",
            "\"na",
            "me\":",
            "\"add\"",
            "\"delete\"",
            "ad",
            "d\"",
            ",",
            ",\"arguments\":",
            "{}",
            "}",
            "}}",
            " ",
            "hello",
            "\"a\":",
            "7",
            "77",
            "x",
        ]);
        let tools = vec![(
            "add".to_string(),
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
        )];
        let g = Grammar::tool_call(&tools, 50).unwrap();
        let mut m = Matcher::new(&g);
        let names = |ids: Vec<u32>| -> Vec<String> {
            ids.iter()
                .map(|&i| String::from_utf8(t.bytes(i).to_vec()).unwrap())
                .collect()
        };
        assert_eq!(names(t.allowed(&m)), vec!["{"]);
        m.feed(b"{");
        let mut a = names(t.allowed(&m));
        a.sort();
        assert_eq!(a, vec!["\"", "\"na", "\"name\":"]);
        m.feed(b"\"name\":");
        let mut a = names(t.allowed(&m));
        a.sort();
        assert_eq!(
            a,
            vec!["\"", "\"add\""],
            "the invented \"delete\" is impossible"
        );
        m.feed(b"\"add\",\"arguments\":{\"a\":");
        let mut a = names(t.allowed(&m));
        a.sort();
        assert_eq!(a, vec!["7", "77"]);
        m.feed(b"7");
        let mut a = names(t.allowed(&m));
        a.sort();
        assert_eq!(a, vec!["7", "77", "}", "}}"]);
        m.feed(b"}}");
        assert!(m.is_done());
        assert!(t.allowed(&m).is_empty());
    }

    #[test]
    fn string_fast_path_matches_the_walk() {
        let t = table(&[
            "ab", "abc", "\"", "a\"", "a\",", "é", "\\n", "\\", "x}", "\n",
        ]);
        let g = Grammar::from_schema(&json!({"type": "string", "maxLength": 2}), 100).unwrap();
        let mut m = Matcher::new(&g);
        m.feed(b"\"");
        let mut fast = t.allowed(&m);
        let mut walked = Vec::new();
        t.trie.walk(0, &m, &mut walked);
        fast.sort();
        walked.sort();
        assert_eq!(fast, walked);
        // "abc" is too long, "a\"," continues past the end of the value, "\n" is a raw control;
        // "x}" is plain string content.
        let names: Vec<&str> = fast
            .iter()
            .map(|&i| std::str::from_utf8(t.bytes(i)).unwrap())
            .collect();
        assert_eq!(names, vec!["ab", "\"", "a\"", "é", "\\n", "\\", "x}"]);
    }

    #[test]
    fn closing_mode_only_lets_the_value_end() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "array", "items": {"type": "string"}},
            "n": {"type": "number"},
            "opt": {"type": "string"},
            "s": {"type": "string"},
        }, "required": ["a", "n", "s"]});
        let g = Grammar::from_schema(&schema, 100).unwrap();
        let mut m = Matcher::new(&g);
        assert!(m.feed(br#"{"a":["xy"#));
        m.closing = true;
        let mut c = m.clone();
        assert!(!c.feed(b"z"), "no more string content");
        let mut c = m.clone();
        assert!(!c.feed(br#"","#), "no more items");
        assert!(m.feed(br#""],"n":1"#));
        let mut c = m.clone();
        assert!(!c.feed(b"2"), "no more digits");
        let mut c = m.clone();
        assert!(!c.feed(br#","opt""#), "optional properties are skipped");
        assert!(m.feed(br#","s":""}"#));
        assert!(m.is_done());
    }

    /// Issue 18, item 4: 31 definitions, each using the previous one twice, expanded to 2^31
    /// nodes and aborted `model serve`; each `$ref` is now compiled once.
    #[test]
    fn shared_refs_compile_once() {
        let mut defs = serde_json::Map::new();
        defs.insert("d0".into(), json!({"type": "integer"}));
        for i in 1..=31 {
            let prev = format!("#/$defs/d{}", i - 1);
            defs.insert(
                format!("d{i}"),
                json!({"type": "object", "properties": {"a": {"$ref": prev}, "b": {"$ref": prev}},
                       "required": ["a", "b"]}),
            );
        }
        let schema = json!({"$defs": defs, "$ref": "#/$defs/d31"});
        assert!(schema.to_string().len() < 4000);
        let g = Grammar::from_schema(&schema, 16).unwrap();
        assert!(g.nodes.len() <= 40, "{} nodes", g.nodes.len());
        // Still the same language: two levels spelled out.
        let two = json!({"$defs": {"d0": {"type": "integer"}, "d1": {"type": "object",
            "properties": {"a": {"$ref": "#/$defs/d0"}, "b": {"$ref": "#/$defs/d0"}},
            "required": ["a", "b"]}}, "$ref": "#/$defs/d1"});
        let g = Grammar::from_schema(&two, 16).unwrap();
        assert!(accepts(&g, r#"{"a":1,"b":2}"#));
        // A wide schema hits the node cap with an error, not an allocation failure.
        let wide: serde_json::Map<String, Value> = (0..20_000)
            .map(|i| (format!("p{i}"), json!({"type": "integer"})))
            .collect();
        let e = Grammar::from_schema(&json!({"type": "object", "properties": wide}), 16);
        assert!(e.unwrap_err().reason.contains("nodes"));
    }

    #[test]
    fn refs_and_unsupported_schemas() {
        let s = json!({"$defs": {"k": {"enum": ["a", "b"]}}, "type": "object",
                       "properties": {"k": {"$ref": "#/$defs/k"}}, "required": ["k"]});
        let g = Grammar::from_schema(&s, 10).unwrap();
        assert!(accepts(&g, r#"{"k":"b"}"#));
        let bad = json!({"anyOf": [{"type": "string"}, {"type": "object"}]});
        let e = Grammar::from_schema(&bad, 10).unwrap_err();
        assert!(e.to_string().contains("anyOf"), "{e}");
        let rec = json!({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"});
        assert!(Grammar::from_schema(&rec, 10).is_err());
    }

    use proptest::prelude::*;

    /// A schema and one value it allows, built together.
    fn schema_and_value() -> impl Strategy<Value = (Value, Value)> {
        let leaf = prop_oneof![
            (0usize..8, "[a-z ]{0,8}").prop_map(|(n, s)| {
                let s: String = s.chars().take(n).collect();
                (json!({"type": "string", "maxLength": n}), json!(s))
            }),
            any::<i32>().prop_map(|i| (json!({"type": "integer"}), json!(i))),
            (any::<i32>(), 0u32..1000).prop_map(|(i, f)| {
                let x = f64::from(i) + f64::from(f) / 1000.0;
                (json!({"type": "number"}), json!(x))
            }),
            any::<bool>().prop_map(|b| (json!({"type": "boolean"}), json!(b))),
            Just((json!({"type": "null"}), Value::Null)),
            (
                proptest::collection::btree_set("[a-z]{1,5}", 1..4),
                any::<proptest::sample::Index>()
            )
                .prop_map(|(set, i)| {
                    let v: Vec<String> = set.into_iter().collect();
                    let pick = v[i.index(v.len())].clone();
                    (json!({"enum": v}), json!(pick))
                }),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                (inner.clone(), any::<bool>()).prop_map(|((s, v), one)| (
                    json!({"type": "array", "items": s}),
                    if one { json!([v]) } else { json!([]) }
                )),
                proptest::collection::btree_map("[a-z]{1,6}", (inner, 0u8..3), 0..4).prop_map(
                    |props| {
                        let mut properties = serde_json::Map::new();
                        let mut required = Vec::new();
                        let mut value = serde_json::Map::new();
                        for (k, ((s, v), how)) in props {
                            properties.insert(k.clone(), s);
                            // 0: required, 1: optional and given, 2: optional and left out.
                            if how == 0 {
                                required.push(k.clone());
                            }
                            if how < 2 {
                                value.insert(k, v);
                            }
                        }
                        (
                            json!({"type": "object", "properties": properties, "required": required}),
                            Value::Object(value),
                        )
                    }
                ),
            ]
        })
    }

    /// JSON shaped like schemas, right or wrong: what a request's `response_format` may hold.
    fn schema_like() -> impl Strategy<Value = Value> {
        let key = proptest::sample::select(vec![
            "type",
            "properties",
            "items",
            "$ref",
            "enum",
            "anyOf",
            "oneOf",
            "required",
            "maxLength",
            "$defs",
            "const",
            "minItems",
            "maxItems",
            "x",
        ]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            proptest::sample::select(vec![
                "object",
                "string",
                "integer",
                "number",
                "array",
                "boolean",
                "null",
                "#/$defs/a",
                "#/$defs/b",
                "#",
                "#/x",
                "http://e/x",
            ])
            .prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(6, 64, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(key.clone(), inner.clone(), 0..6).prop_map(|m| {
                    Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                }),
                proptest::collection::btree_map("[a-b]", inner, 1..3)
                    .prop_map(|defs| json!({"$defs": defs, "$ref": "#/$defs/a"})),
            ]
        })
    }

    proptest! {
        /// What a schema allows, its grammar accepts (written compactly, keys in order).
        #[test]
        fn the_grammar_accepts_what_the_schema_allows((schema, value) in schema_and_value()) {
            let g = Grammar::from_schema(&schema, 64).unwrap();
            let text = value.to_string();
            prop_assert!(accepts(&g, &text), "{schema} refused {text}");
        }

        /// Any schema-like JSON compiles or is refused, within the node cap, and any bytes fed
        /// to what compiled are taken or refused: never a panic, a stack overflow or a hang.
        #[test]
        fn any_schema_compiles_or_is_refused(schema in schema_like(), bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(g) = Grammar::from_schema(&schema, 16) {
                prop_assert!(g.nodes.len() <= MAX_NODES);
                let mut m = Matcher::new(&g);
                let _ = m.feed(&bytes);
            }
        }
    }
}
