//! The environment a task runs in: the domain's databases and the tools that act on them,
//! with tau2's semantics (`src/tau2/environment/environment.py`).
//!
//! Databases are plain JSON trees. Tools get their arguments unvalidated, as tau2's Python
//! methods do, and their results are what tau2's `Environment.get_response` would write, so
//! a trajectory recorded here replays in tau2 to the same state.

mod calc;
mod mock;
mod retail;

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::message::{Message, Requestor, ToolCall};
use crate::pyjson;
use crate::task::{EnvAssertion, EnvFunctionCall, EnvType, InitialState};

/// What a function returned, before tau2's `to_json_str`.
#[derive(Debug, Clone)]
pub(crate) enum Out {
    /// A `str`: written as it is.
    Text(String),
    /// A model, list or dict: written as JSON.
    Json(Value),
    /// A `bool` (assertions).
    Bool(bool),
}

impl Out {
    /// The tool message's content, as tau2 writes it: a string verbatim, a model as JSON,
    /// a bool as the JSON string of its `str()`.
    fn content(&self) -> String {
        match self {
            Out::Text(s) => s.clone(),
            Out::Json(v) => pyjson::dumps(v, false),
            Out::Bool(b) => format!("\"{}\"", if *b { "True" } else { "False" }),
        }
    }

    fn as_value(&self) -> Value {
        match self {
            Out::Text(s) => Value::String(s.clone()),
            Out::Json(v) => v.clone(),
            Out::Bool(b) => Value::Bool(*b),
        }
    }
}

/// A failed call: the text after tau2's `"Error: "`.
pub(crate) type Raised = String;

/// One side's functions (tools and the helpers tasks use for set-up and assertions).
pub(crate) trait Toolkit: Send + Sync {
    /// The Python class name, for argument errors (`MockTools.create_task() missing …`).
    fn class_name(&self) -> &'static str;
    /// Runs `name`; `None` when the toolkit has no such function.
    fn call(
        &self,
        db: &mut Value,
        name: &str,
        args: &Map<String, Value>,
    ) -> Option<Result<Out, Raised>>;
    /// What pydantic's `model_dump` adds to a database as read: absent optional fields as
    /// `null`, integral floats as floats.
    fn normalize(&self, db: &mut Value);
}

/// A tool's kind, as tau2's `@is_tool` declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolType {
    /// Reads only.
    Read,
    /// Changes the database (replayed when scoring).
    Write,
    /// Neither (transfer, calculate).
    Generic,
    /// A scratchpad.
    Think,
}

/// A tool as offered to an agent: OpenAI's function schema.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct ToolSchema {
    /// The name.
    pub name: String,
    /// What it does (tau2's docstring).
    pub description: String,
    /// Its parameters, as a JSON Schema.
    pub parameters: Value,
}

#[derive(Deserialize)]
struct ToolsFile {
    tools: Vec<ToolSchema>,
    tool_types: HashMap<String, ToolType>,
    #[serde(default)]
    user_tools: Vec<ToolSchema>,
    #[serde(default)]
    user_tool_types: HashMap<String, ToolType>,
}

/// A domain's toolkits, their tool schemas and kinds.
pub struct Tools {
    /// `mock`, `retail`.
    pub kind: &'static str,
    agent: Box<dyn Toolkit>,
    user: Option<Box<dyn Toolkit>>,
    /// The agent's tools.
    pub schemas: Vec<ToolSchema>,
    /// The user's tools (empty when the user has none).
    pub user_schemas: Vec<ToolSchema>,
    types: HashMap<String, ToolType>,
    user_types: HashMap<String, ToolType>,
}

impl std::fmt::Debug for Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tools").field("kind", &self.kind).finish()
    }
}

/// The toolkits agentry implements: tau2's mock and retail domains.
pub const TOOLKITS: &[&str] = &["mock", "retail"];

impl Tools {
    /// The toolkit named `kind`.
    pub fn by_kind(kind: &str) -> Option<Arc<Tools>> {
        let (kind, file, agent, user): (_, _, Box<dyn Toolkit>, Option<Box<dyn Toolkit>>) =
            match kind {
                "mock" => (
                    "mock",
                    include_str!("../../domains/mock.tools.json"),
                    Box::new(mock::MockTools),
                    Some(Box::new(mock::MockUserTools)),
                ),
                "retail" => (
                    "retail",
                    include_str!("../../domains/retail.tools.json"),
                    Box::new(retail::RetailTools),
                    None,
                ),
                _ => return None,
            };
        let f: ToolsFile = serde_json::from_str(file).expect("shipped tool schemas parse");
        Some(Arc::new(Tools {
            kind,
            agent,
            user,
            schemas: f.tools,
            user_schemas: f.user_tools,
            types: f.tool_types,
            user_types: f.user_tool_types,
        }))
    }

    /// The kind of a tool of either side (`None`: no such tool).
    pub fn tool_type(&self, name: &str) -> Option<ToolType> {
        self.types
            .get(name)
            .or_else(|| self.user_types.get(name))
            .copied()
    }

    fn has_tool(&self, name: &str) -> bool {
        self.tool_type(name).is_some()
    }

    /// Whether replaying a call to `name` must re-run it (unknown names: yes, as tau2 says).
    fn mutates(&self, name: &str) -> bool {
        self.tool_type(name).is_none_or(|t| t == ToolType::Write)
    }
}

/// An environment shared between the orchestrator and the MCP endpoint the agent calls.
pub type SharedEnv = Arc<std::sync::Mutex<Environment>>;

/// The databases of one simulation and the tools over them.
///
/// tau2 lets the two toolkits end up sharing one database object (initialization data for
/// one side re-points the other at it); the slots reproduce that aliasing exactly, because
/// the database hashes depend on it.
#[derive(Debug, Clone)]
pub struct Environment {
    tools: Arc<Tools>,
    slots: Vec<Value>,
    agent: usize,
    user: Option<usize>,
}

/// The environment could not be set up or replayed.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// A set-up function or assertion failed, or does not exist.
    #[error("{0}")]
    Function(String),
    /// A trajectory whose tool results do not follow their calls.
    #[error("malformed trajectory: {0}")]
    Trajectory(String),
}

impl Environment {
    /// A fresh environment over the given databases.
    pub fn new(tools: Arc<Tools>, mut db: Value, user_db: Option<Value>) -> Self {
        tools.agent.normalize(&mut db);
        let mut slots = vec![db];
        let user = match (&tools.user, user_db) {
            (Some(kit), Some(mut u)) => {
                kit.normalize(&mut u);
                slots.push(u);
                Some(1)
            }
            _ => None,
        };
        Environment {
            tools,
            slots,
            agent: 0,
            user,
        }
    }

    /// The domain's tools.
    pub fn tools(&self) -> &Arc<Tools> {
        &self.tools
    }

    /// The agent's database.
    pub fn db(&self) -> &Value {
        &self.slots[self.agent]
    }

    /// The user's database, for domains with user tools.
    pub fn user_db(&self) -> Option<&Value> {
        self.user.map(|u| &self.slots[u])
    }

    /// tau2's hash of the agent's database.
    pub fn db_hash(&self) -> String {
        pyjson::hash(self.db())
    }

    /// tau2's hash of the user's database (`None` without user tools).
    pub fn user_db_hash(&self) -> Option<String> {
        self.user_db().map(pyjson::hash)
    }

    fn side(&self, env_type: EnvType) -> Option<(&dyn Toolkit, usize)> {
        match env_type {
            EnvType::Assistant => Some((self.tools.agent.as_ref(), self.agent)),
            EnvType::User => Some((self.tools.user.as_deref()?, self.user?)),
        }
    }

    fn run(
        &mut self,
        env_type: EnvType,
        name: &str,
        args: &Map<String, Value>,
    ) -> Option<Result<Out, Raised>> {
        let tools = self.tools.clone();
        let (kit, slot) = match env_type {
            EnvType::Assistant => (tools.agent.as_ref(), self.agent),
            EnvType::User => (tools.user.as_deref()?, self.user?),
        };
        kit.call(&mut self.slots[slot], name, args)
    }

    /// A tool call from either side, as tau2's `get_response` answers it: the result or
    /// `Error: …` with `error: true`.
    pub fn respond(&mut self, call: &ToolCall) -> Message {
        let side = match call.requestor {
            Requestor::Assistant => EnvType::Assistant,
            Requestor::User => EnvType::User,
        };
        let known = match side {
            EnvType::Assistant => self.tools.types.contains_key(&call.name),
            EnvType::User => self.tools.user_types.contains_key(&call.name),
        };
        let result = if !known {
            if side == EnvType::User && self.tools.user.is_none() {
                Err("User tools not available".to_owned())
            } else {
                Err(format!("Tool '{}' not found.", call.name))
            }
        } else {
            self.run(side, &call.name, &call.arguments)
                .unwrap_or_else(|| Err(format!("Tool '{}' not found.", call.name)))
        };
        match result {
            Ok(out) => Message::tool(&call.id, call.requestor, out.content(), false),
            Err(e) => Message::tool(&call.id, call.requestor, format!("Error: {e}"), true),
        }
    }

    /// Runs any function of either toolkit (tau2's `run_env_function_call`).
    pub fn run_function(&mut self, call: &EnvFunctionCall) -> Result<Value, EnvError> {
        if self.side(call.env_type).is_none() {
            return Err(EnvError::Function("User tools not available".into()));
        }
        let kind = match call.env_type {
            EnvType::Assistant => "assistant",
            EnvType::User => "user",
        };
        match self.run(call.env_type, &call.func_name, &call.arguments) {
            None => Err(EnvError::Function(format!(
                "Function {} not found in {kind} tools",
                call.func_name
            ))),
            Some(Ok(out)) => Ok(out.as_value()),
            Some(Err(e)) => Err(EnvError::Function(e)),
        }
    }

    /// Whether an assertion holds; an assertion function that raises is an error (tau2's
    /// evaluation aborts on it too).
    pub fn check(&mut self, assertion: &EnvAssertion) -> Result<bool, EnvError> {
        let got = self.run_function(&EnvFunctionCall {
            env_type: assertion.env_type,
            func_name: assertion.func_name.clone(),
            arguments: assertion.arguments.clone(),
        })?;
        Ok(pyjson::py_eq(&got, &assertion.assert_value))
    }

    /// tau2's `set_state`: initialization data, initialization actions, then the mutating
    /// calls of `messages` replayed (calls to unknown tools skipped, as they changed nothing).
    /// Returns how many replayed results differed from the recorded ones (tau2's live runs
    /// raise on that, its re-scorer warns; either way the state is the same).
    pub fn set_state(
        &mut self,
        initial: Option<&InitialState>,
        messages: &[Message],
    ) -> Result<usize, EnvError> {
        if let Some(data) = initial.and_then(|s| s.initialization_data.as_ref()) {
            if let Some(agent_data) = &data.agent_data {
                let mut db = self.slots[self.agent].clone();
                merge(&mut db, agent_data);
                self.tools.agent.normalize(&mut db);
                self.slots.push(db);
                self.agent = self.slots.len() - 1;
                if self.user.is_some() {
                    self.user = Some(self.agent);
                }
            }
            if let (Some(user_data), Some(u)) = (&data.user_data, self.user) {
                let mut db = self.slots[u].clone();
                merge(&mut db, user_data);
                if let Some(kit) = &self.tools.user {
                    kit.normalize(&mut db);
                }
                self.slots.push(db);
                self.user = Some(self.slots.len() - 1);
                self.agent = self.slots.len() - 1;
            }
        }
        for action in initial
            .and_then(|s| s.initialization_actions.as_deref())
            .unwrap_or(&[])
        {
            self.run_function(action)?;
        }
        let mut drift = 0;
        for (call, recorded) in pairs(messages)? {
            if !self.tools.has_tool(&call.name) || !self.tools.mutates(&call.name) {
                continue;
            }
            let replayed = self.respond(call);
            if !same_content(replayed.text(), recorded.text()) {
                drift += 1;
            }
        }
        Ok(drift)
    }
}

/// Each tool call with the result that must follow it, as tau2's replay pairs them.
fn pairs(messages: &[Message]) -> Result<Vec<(&ToolCall, &Message)>, EnvError> {
    let mut out = Vec::new();
    let mut it = messages.iter();
    while let Some(m) = it.next() {
        if m.role == crate::message::Role::Tool {
            return Err(EnvError::Trajectory(
                "a tool message that follows no tool call".into(),
            ));
        }
        for call in m.tool_calls.iter().flatten() {
            let Some(result) = it.next() else {
                return Err(EnvError::Trajectory(format!(
                    "no result for tool call {}",
                    call.id
                )));
            };
            if result.role != crate::message::Role::Tool {
                return Err(EnvError::Trajectory(format!(
                    "tool call {} is followed by a {:?} message",
                    call.id, result.role
                )));
            }
            if result.id.as_deref() != Some(call.id.as_str()) {
                return Err(EnvError::Trajectory(format!(
                    "tool call id mismatch: {} and {}",
                    call.id,
                    result.id.as_deref().unwrap_or("")
                )));
            }
            out.push((call, result));
        }
    }
    Ok(out)
}

fn same_content(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) {
        (Ok(x), Ok(y)) => pyjson::py_eq(&x, &y),
        _ => a == b,
    }
}

/// addict's `update`: objects merge key by key, anything else replaces.
fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

/// Python's call binding for keyword arguments: unknown keywords and missing required
/// parameters raise `TypeError` with Python's wording.
pub(crate) fn bind<'a>(
    class: &str,
    func: &str,
    params: &[(&str, bool)],
    args: &'a Map<String, Value>,
) -> Result<Vec<Option<&'a Value>>, Raised> {
    if let Some(k) = args.keys().find(|k| !params.iter().any(|(p, _)| p == k)) {
        return Err(format!(
            "{class}.{func}() got an unexpected keyword argument '{k}'"
        ));
    }
    let missing: Vec<String> = params
        .iter()
        .filter(|(p, required)| *required && !args.contains_key(*p))
        .map(|(p, _)| format!("'{p}'"))
        .collect();
    if !missing.is_empty() {
        let list = match missing.len() {
            1 => missing[0].clone(),
            2 => format!("{} and {}", missing[0], missing[1]),
            n => format!("{}, and {}", missing[..n - 1].join(", "), missing[n - 1]),
        };
        let s = if missing.len() == 1 { "" } else { "s" };
        return Err(format!(
            "{class}.{func}() missing {} required positional argument{s}: {list}",
            missing.len()
        ));
    }
    Ok(params.iter().map(|(p, _)| args.get(*p)).collect())
}

/// A `str` parameter. Python would fail somewhere later with a type-dependent message; the
/// state is unchanged either way.
pub(crate) fn text<'a>(v: Option<&'a Value>, name: &str) -> Result<&'a str, Raised> {
    match v {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "argument '{name}' must be str, not {}",
            pyjson::type_name(other)
        )),
        None => Err(format!("argument '{name}' is missing")),
    }
}

/// A `List[str]` parameter.
pub(crate) fn texts(v: Option<&Value>, name: &str) -> Result<Vec<String>, Raised> {
    match v {
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| text(Some(i), name).map(str::to_owned))
            .collect(),
        Some(other) => Err(format!(
            "argument '{name}' must be list, not {}",
            pyjson::type_name(other)
        )),
        None => Err(format!("argument '{name}' is missing")),
    }
}

/// A float field of a database record (0.0 when absent or not a number).
pub(crate) fn num(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// A float as a JSON number.
pub(crate) fn float(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// Turns integral numbers under `keys` into floats, anywhere in `v` (pydantic's `float`
/// fields read `198` as `198.0`, and the hash prints the difference).
pub(crate) fn floats(v: &mut Value, keys: &[&str]) {
    match v {
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                if keys.contains(&k.as_str()) {
                    if let Some(x) = item.as_f64().filter(|_| !item.is_f64()) {
                        *item = float(x);
                    }
                } else {
                    floats(item, keys);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| floats(i, keys)),
        _ => {}
    }
}

/// Adds `null` for each of `keys` a record lacks.
pub(crate) fn nulls(record: &mut Value, keys: &[&str]) {
    if let Some(map) = record.as_object_mut() {
        for k in keys {
            map.entry(*k).or_insert(Value::Null);
        }
    }
}
