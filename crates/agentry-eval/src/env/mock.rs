//! tau2's mock domain (`src/tau2/domains/mock/{tools,user_tools}.py`): users with tasks, and a
//! user-side notification inbox.

use serde_json::{Map, Value, json};

use super::{Out, Raised, Toolkit, bind, nulls, text};

pub(super) struct MockTools;
pub(super) struct MockUserTools;

impl Toolkit for MockTools {
    fn class_name(&self) -> &'static str {
        "MockTools"
    }

    fn call(
        &self,
        db: &mut Value,
        name: &str,
        args: &Map<String, Value>,
    ) -> Option<Result<Out, Raised>> {
        let c = self.class_name();
        Some(match name {
            "create_task" => bind(
                c,
                name,
                &[("user_id", true), ("title", true), ("description", false)],
                args,
            )
            .and_then(|a| create_task(db, a[0], a[1], a[2])),
            "get_users" => bind(c, name, &[], args).map(|_| {
                Out::Json(Value::Array(
                    db["users"]
                        .as_object()
                        .map(|u| u.values().cloned().collect())
                        .unwrap_or_default(),
                ))
            }),
            "update_task_status" => bind(c, name, &[("task_id", true), ("status", true)], args)
                .and_then(|a| {
                    let id = key(a[0]);
                    let task = db["tasks"]
                        .get_mut(&id)
                        .ok_or_else(|| format!("Task {id} not found"))?;
                    task["status"] = a[1].cloned().unwrap_or(Value::Null);
                    Ok(Out::Json(task.clone()))
                }),
            "assert_number_of_tasks" => bind(
                c,
                name,
                &[("user_id", true), ("expected_number", true)],
                args,
            )
            .and_then(|a| {
                let id = key(a[0]);
                let user = db["users"]
                    .get(&id)
                    .ok_or_else(|| format!("User {id} not found"))?;
                let n = user["tasks"].as_array().map_or(0, Vec::len);
                Ok(Out::Bool(super::pyjson::py_eq(
                    &json!(n),
                    a[1].unwrap_or(&Value::Null),
                )))
            }),
            "assert_task_status" => bind(
                c,
                name,
                &[("task_id", true), ("expected_status", true)],
                args,
            )
            .and_then(|a| {
                let id = key(a[0]);
                let task = db["tasks"]
                    .get(&id)
                    .ok_or_else(|| format!("Task {id} not found"))?;
                Ok(Out::Bool(Some(&task["status"]) == a[1]))
            }),
            "transfer_to_human_agents" => bind(c, name, &[("summary", true)], args)
                .map(|_| Out::Text("Transfer successful".into())),
            _ => return None,
        })
    }

    fn normalize(&self, db: &mut Value) {
        if let Some(tasks) = db.get_mut("tasks").and_then(Value::as_object_mut) {
            for t in tasks.values_mut() {
                nulls(t, &["description"]);
            }
        }
    }
}

/// A dictionary key as Python would look it up: strings as they are, anything else misses.
fn key(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn create_task(
    db: &mut Value,
    user_id: Option<&Value>,
    title: Option<&Value>,
    description: Option<&Value>,
) -> Result<Out, Raised> {
    let user_id = key(user_id);
    if db["users"].get(&user_id).is_none() {
        return Err(format!("User {user_id} not found"));
    }
    let n = db["tasks"].as_object().map_or(0, Map::len);
    let task_id = format!("task_{}", n + 1);
    let task = json!({
        "task_id": task_id,
        "title": title.cloned().unwrap_or(Value::Null),
        "description": description.cloned().unwrap_or(Value::Null),
        "status": "pending",
    });
    if let Some(tasks) = db["tasks"].as_object_mut() {
        tasks.insert(task_id.clone(), task.clone());
    }
    if let Some(list) = db["users"][&user_id]["tasks"].as_array_mut() {
        list.push(Value::String(task_id));
    }
    Ok(Out::Json(task))
}

impl Toolkit for MockUserTools {
    fn class_name(&self) -> &'static str {
        "MockUserTools"
    }

    fn call(
        &self,
        db: &mut Value,
        name: &str,
        args: &Map<String, Value>,
    ) -> Option<Result<Out, Raised>> {
        let c = self.class_name();
        Some(match name {
            "check_notifications" => bind(c, name, &[], args).map(|_| {
                Out::Json(Value::Array(
                    db["notifications"]
                        .as_object()
                        .map(|n| n.values().cloned().collect())
                        .unwrap_or_default(),
                ))
            }),
            "dismiss_notification" => {
                bind(c, name, &[("notification_id", true)], args).and_then(|a| {
                    let id = key(a[0]);
                    let n = db["notifications"]
                        .get_mut(&id)
                        .ok_or_else(|| format!("Notification {id} not found"))?;
                    n["status"] = json!("read");
                    Ok(Out::Text(format!("Notification {id} dismissed")))
                })
            }
            "add_notification" => bind(
                c,
                name,
                &[
                    ("notification_id", true),
                    ("message", true),
                    ("task_id", false),
                ],
                args,
            )
            .and_then(|a| {
                let id = text(a[0], "notification_id")?.to_owned();
                let n = json!({
                    "notification_id": id,
                    "message": a[1].cloned().unwrap_or(Value::Null),
                    "status": "unread",
                    "task_id": a[2].cloned().unwrap_or(Value::Null),
                });
                if !db["notifications"].is_object() {
                    db["notifications"] = json!({});
                }
                if let Some(map) = db["notifications"].as_object_mut() {
                    map.insert(id, n.clone());
                }
                Ok(Out::Json(n))
            }),
            "assert_notification_status" => bind(
                c,
                name,
                &[("notification_id", true), ("expected_status", true)],
                args,
            )
            .and_then(|a| {
                let id = key(a[0]);
                let n = db["notifications"]
                    .get(&id)
                    .ok_or_else(|| format!("Notification {id} not found"))?;
                Ok(Out::Bool(Some(&n["status"]) == a[1]))
            }),
            _ => return None,
        })
    }

    fn normalize(&self, db: &mut Value) {
        if let Some(ns) = db.get_mut("notifications").and_then(Value::as_object_mut) {
            for n in ns.values_mut() {
                nulls(n, &["task_id"]);
                if let Some(map) = n.as_object_mut() {
                    map.entry("status").or_insert_with(|| json!("unread"));
                }
            }
        }
    }
}
