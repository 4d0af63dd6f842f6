//! tau2's retail domain (`src/tau2/domains/retail/tools.py`), ported line by line: the same
//! checks in the same order with the same messages, the same float arithmetic and rounding,
//! and the same quirks (a modified order's items all take the last new variant's price and
//! options; a cancellation refunds gift cards before a later payment method can fail).

use serde_json::{Map, Value, json};

use super::calc;
use super::{Out, Raised, Toolkit, bind, float, floats, nulls, num, text, texts};
use crate::pyjson::{float_repr, round2};

pub(super) struct RetailTools;

const ORDER_OPTIONALS: &[&str] = &[
    "cancel_reason",
    "exchange_items",
    "exchange_new_items",
    "exchange_payment_method_id",
    "exchange_price_difference",
    "return_items",
    "return_payment_method_id",
];

const ADDRESS: &[(&str, bool)] = &[
    ("address1", true),
    ("address2", true),
    ("city", true),
    ("state", true),
    ("country", true),
    ("zip", true),
];

impl Toolkit for RetailTools {
    fn class_name(&self) -> &'static str {
        "RetailTools"
    }

    fn call(
        &self,
        db: &mut Value,
        name: &str,
        args: &Map<String, Value>,
    ) -> Option<Result<Out, Raised>> {
        let c = self.class_name();
        let b = |params: &[(&str, bool)]| bind(c, name, params, args);
        Some(match name {
            "calculate" => b(&[("expression", true)]).and_then(|a| {
                let e = text(a[0], "expression")?;
                if !e.chars().all(|ch| "0123456789+-*/(). ".contains(ch)) {
                    return Err("Invalid characters in expression".into());
                }
                let x = calc::eval(e)?;
                Ok(Out::Text(float_repr(round2(x))))
            }),
            "cancel_pending_order" => b(&[("order_id", true), ("reason", true)])
                .and_then(|a| cancel_pending_order(db, a[0], a[1])),
            "exchange_delivered_order_items" => b(&[
                ("order_id", true),
                ("item_ids", true),
                ("new_item_ids", true),
                ("payment_method_id", true),
            ])
            .and_then(|a| exchange(db, a[0], a[1], a[2], a[3])),
            "find_user_id_by_name_zip" => {
                b(&[("first_name", true), ("last_name", true), ("zip", true)]).and_then(|a| {
                    let first = text(a[0], "first_name")?.to_lowercase();
                    let last = text(a[1], "last_name")?.to_lowercase();
                    let found = db["users"].as_object().and_then(|users| {
                        users.iter().find(|(_, u)| {
                            u["name"]["first_name"]
                                .as_str()
                                .is_some_and(|f| f.to_lowercase() == first)
                                && u["name"]["last_name"]
                                    .as_str()
                                    .is_some_and(|l| l.to_lowercase() == last)
                                && Some(&u["address"]["zip"]) == a[2]
                        })
                    });
                    found
                        .map(|(id, _)| Out::Text(id.clone()))
                        .ok_or_else(|| "User not found".into())
                })
            }
            "find_user_id_by_email" => b(&[("email", true)]).and_then(|a| {
                let email = text(a[0], "email")?.to_lowercase();
                db["users"]
                    .as_object()
                    .and_then(|users| {
                        users.iter().find(|(_, u)| {
                            u["email"]
                                .as_str()
                                .is_some_and(|e| e.to_lowercase() == email)
                        })
                    })
                    .map(|(id, _)| Out::Text(id.clone()))
                    .ok_or_else(|| "User not found".into())
            }),
            "get_order_details" => {
                b(&[("order_id", true)]).and_then(|a| order(db, a[0]).map(|o| Out::Json(o.clone())))
            }
            "get_product_details" => b(&[("product_id", true)])
                .and_then(|a| product(db, a[0]).map(|p| Out::Json(p.clone()))),
            "get_item_details" => b(&[("item_id", true)]).and_then(|a| {
                let id = key(a[0]);
                db["products"]
                    .as_object()
                    .and_then(|ps| ps.values().find_map(|p| p["variants"].get(&id)))
                    .map(|v| Out::Json(v.clone()))
                    .ok_or_else(|| "Item not found".into())
            }),
            "get_user_details" => {
                b(&[("user_id", true)]).and_then(|a| user(db, a[0]).map(|u| Out::Json(u.clone())))
            }
            "list_all_product_types" => b(&[]).map(|_| {
                let names: Map<String, Value> = db["products"]
                    .as_object()
                    .map(|ps| {
                        ps.values()
                            .map(|p| {
                                (
                                    p["name"].as_str().unwrap_or_default().to_owned(),
                                    p["product_id"].clone(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                Out::Text(crate::pyjson::dumps(&Value::Object(names), true))
            }),
            "modify_pending_order_address" => {
                let mut params = vec![("order_id", true)];
                params.extend_from_slice(ADDRESS);
                b(&params).and_then(|a| {
                    let o = order_mut(db, a[0])?;
                    if !o["status"].as_str().unwrap_or_default().contains("pending") {
                        return Err("Non-pending order cannot be modified".into());
                    }
                    o["address"] = address(&a[1..])?;
                    Ok(Out::Json(o.clone()))
                })
            }
            "modify_pending_order_items" => b(&[
                ("order_id", true),
                ("item_ids", true),
                ("new_item_ids", true),
                ("payment_method_id", true),
            ])
            .and_then(|a| modify_items(db, a[0], a[1], a[2], a[3])),
            "modify_pending_order_payment" => b(&[("order_id", true), ("payment_method_id", true)])
                .and_then(|a| modify_payment(db, a[0], a[1])),
            "modify_user_address" => {
                let mut params = vec![("user_id", true)];
                params.extend_from_slice(ADDRESS);
                b(&params).and_then(|a| {
                    let addr = address(&a[1..])?;
                    let id = key(a[0]);
                    let u = db["users"]
                        .get_mut(&id)
                        .ok_or_else(|| "User not found".to_owned())?;
                    u["address"] = addr;
                    Ok(Out::Json(u.clone()))
                })
            }
            "return_delivered_order_items" => b(&[
                ("order_id", true),
                ("item_ids", true),
                ("payment_method_id", true),
            ])
            .and_then(|a| return_items(db, a[0], a[1], a[2])),
            "transfer_to_human_agents" => {
                b(&[("summary", true)]).map(|_| Out::Text("Transfer successful".into()))
            }
            _ => return None,
        })
    }

    fn normalize(&self, db: &mut Value) {
        if let Some(orders) = db.get_mut("orders").and_then(Value::as_object_mut) {
            for o in orders.values_mut() {
                nulls(o, ORDER_OPTIONALS);
            }
        }
        floats(
            db,
            &["price", "balance", "amount", "exchange_price_difference"],
        );
    }
}

fn key(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        // A non-string key is never in a dict of string keys.
        _ => "\u{0}".into(),
    }
}

fn order<'a>(db: &'a Value, id: Option<&Value>) -> Result<&'a Value, Raised> {
    db["orders"]
        .get(key(id))
        .ok_or_else(|| "Order not found".into())
}

fn order_mut<'a>(db: &'a mut Value, id: Option<&Value>) -> Result<&'a mut Value, Raised> {
    db["orders"]
        .get_mut(key(id))
        .ok_or_else(|| "Order not found".into())
}

fn user<'a>(db: &'a Value, id: Option<&Value>) -> Result<&'a Value, Raised> {
    db["users"]
        .get(key(id))
        .ok_or_else(|| "User not found".into())
}

fn product<'a>(db: &'a Value, id: Option<&Value>) -> Result<&'a Value, Raised> {
    db["products"]
        .get(key(id))
        .ok_or_else(|| "Product not found".into())
}

fn variant<'a>(db: &'a Value, product_id: &Value, variant_id: &str) -> Result<&'a Value, Raised> {
    product(db, Some(product_id))?["variants"]
        .get(variant_id)
        .ok_or_else(|| "Variant not found".into())
}

/// `_get_payment_method`: the user's method, by id.
fn payment_method<'a>(db: &'a Value, user_id: &Value, id: &str) -> Result<&'a Value, Raised> {
    user(db, Some(user_id))?["payment_methods"]
        .get(id)
        .ok_or_else(|| "Payment method not found".into())
}

fn is_gift_card(pm: &Value) -> bool {
    pm["source"] == "gift_card"
}

/// Adds `delta` to a gift card's balance and rounds it, as tau2 does after each change.
fn adjust_balance(db: &mut Value, user_id: &Value, pm_id: &str, delta: f64) {
    let uid = user_id.as_str().unwrap_or_default();
    let pm = &mut db["users"][uid]["payment_methods"][pm_id];
    let balance = num(pm, "balance") + delta;
    pm["balance"] = float(round2(balance));
}

fn payment(kind: &str, amount: Value, pm_id: &str) -> Value {
    json!({"transaction_type": kind, "amount": amount, "payment_method_id": pm_id})
}

fn address(a: &[Option<&Value>]) -> Result<Value, Raised> {
    let names = ["address1", "address2", "city", "state", "country", "zip"];
    let mut out = Map::new();
    for (name, v) in names.iter().zip(a) {
        out.insert((*name).into(), Value::String(text(*v, name)?.to_owned()));
    }
    Ok(Value::Object(out))
}

fn item_ids_of(order: &Value) -> Vec<String> {
    order["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["item_id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn count(list: &[String], x: &str) -> usize {
    list.iter().filter(|i| *i == x).count()
}

/// tau2's check that the order holds each item as many times as it is named (duplicates
/// allowed), with the message each tool raises.
fn missing_item(
    order: &Value,
    item_ids: &[String],
    message: impl Fn(&str) -> Raised,
) -> Result<(), Raised> {
    let all = item_ids_of(order);
    match item_ids
        .iter()
        .find(|id| count(item_ids, id) > count(&all, id))
    {
        Some(id) => Err(message(id)),
        None => Ok(()),
    }
}

fn cancel_pending_order(
    db: &mut Value,
    order_id: Option<&Value>,
    reason: Option<&Value>,
) -> Result<Out, Raised> {
    let o = order(db, order_id)?;
    if o["status"] != "pending" {
        return Err("Non-pending order cannot be cancelled".into());
    }
    let reason = match reason {
        Some(Value::String(r)) if r == "no longer needed" || r == "ordered by mistake" => r.clone(),
        _ => return Err("Invalid reason".into()),
    };
    let user_id = o["user_id"].clone();
    let history = o["payment_history"].as_array().cloned().unwrap_or_default();
    let mut refunds = Vec::new();
    for p in &history {
        let pm_id = p["payment_method_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        refunds.push(payment("refund", p["amount"].clone(), &pm_id));
        let pm = payment_method(db, &user_id, &pm_id)?;
        if is_gift_card(pm) {
            adjust_balance(db, &user_id, &pm_id, num(p, "amount"));
        }
    }
    let o = order_mut(db, order_id)?;
    o["status"] = json!("cancelled");
    o["cancel_reason"] = json!(reason);
    if let Some(h) = o["payment_history"].as_array_mut() {
        h.extend(refunds);
    }
    Ok(Out::Json(o.clone()))
}

fn exchange(
    db: &mut Value,
    order_id: Option<&Value>,
    item_ids: Option<&Value>,
    new_item_ids: Option<&Value>,
    pm_id: Option<&Value>,
) -> Result<Out, Raised> {
    let o = order(db, order_id)?;
    if o["status"] != "delivered" {
        return Err("Non-delivered order cannot be exchanged".into());
    }
    let item_ids = texts(item_ids, "item_ids")?;
    missing_item(o, &item_ids, |id| format!("Number of {id} not found."))?;
    let new_item_ids = texts(new_item_ids, "new_item_ids")?;
    if item_ids.len() != new_item_ids.len() {
        return Err("The number of items to be exchanged should match.".into());
    }
    let diff = price_difference(db, o, &item_ids, &new_item_ids, false)?;
    let diff = diff.map(round2);
    let pm_id = text(pm_id, "payment_method_id")?.to_owned();
    let user_id = o["user_id"].clone();
    let pm = payment_method(db, &user_id, &pm_id)?;
    if is_gift_card(pm) && num(pm, "balance") < diff.unwrap_or(0.0) {
        return Err("Insufficient gift card balance to pay for the price difference".into());
    }
    let o = order_mut(db, order_id)?;
    let mut sorted_old = item_ids;
    sorted_old.sort();
    let mut sorted_new = new_item_ids;
    sorted_new.sort();
    o["status"] = json!("exchange requested");
    o["exchange_items"] = json!(sorted_old);
    o["exchange_new_items"] = json!(sorted_new);
    o["exchange_payment_method_id"] = json!(pm_id);
    o["exchange_price_difference"] = diff_value(diff);
    Ok(Out::Json(o.clone()))
}

/// Python's `diff_price`: the int `0` when no item was priced, a float otherwise.
fn diff_value(diff: Option<f64>) -> Value {
    diff.map_or(json!(0), float)
}

/// Sums new minus old prices in Python's order, checking each pair as tau2 does. `None`
/// when there are no pairs (Python's `diff_price` stays the int 0).
fn price_difference(
    db: &Value,
    order: &Value,
    item_ids: &[String],
    new_item_ids: &[String],
    must_differ: bool,
) -> Result<Option<f64>, Raised> {
    let mut diff: Option<f64> = None;
    let items = order["items"].as_array().cloned().unwrap_or_default();
    for (old, new) in item_ids.iter().zip(new_item_ids) {
        if must_differ && old == new {
            return Err("The new item id should be different from the old item id".into());
        }
        let item = items
            .iter()
            .find(|i| i["item_id"] == old.as_str())
            .ok_or_else(|| format!("Item {old} not found"))?;
        let v = variant(db, &item["product_id"], new)?;
        if v["available"] != true {
            return Err(format!("New item {new} not found or available"));
        }
        let step = num(v, "price") - num(item, "price");
        diff = Some(diff.unwrap_or(0.0) + step);
    }
    Ok(diff)
}

fn modify_items(
    db: &mut Value,
    order_id: Option<&Value>,
    item_ids: Option<&Value>,
    new_item_ids: Option<&Value>,
    pm_id: Option<&Value>,
) -> Result<Out, Raised> {
    let o = order(db, order_id)?;
    if o["status"] != "pending" {
        return Err("Non-pending order cannot be modified".into());
    }
    let item_ids = texts(item_ids, "item_ids")?;
    missing_item(o, &item_ids, |id| format!("{id} not found"))?;
    let new_item_ids = texts(new_item_ids, "new_item_ids")?;
    if item_ids.len() != new_item_ids.len() {
        return Err("The number of items to be exchanged should match".into());
    }
    let diff = price_difference(db, o, &item_ids, &new_item_ids, true)?;
    // tau2 keeps the loop's last variant and gives its price and options to every item.
    let last_variant = match (item_ids.last(), new_item_ids.last()) {
        (Some(old), Some(new)) => {
            let items = o["items"].as_array().cloned().unwrap_or_default();
            let item = items.iter().find(|i| i["item_id"] == old.as_str()).cloned();
            item.and_then(|i| variant(db, &i["product_id"], new).ok().cloned())
        }
        _ => None,
    };
    let pm_id = text(pm_id, "payment_method_id")?.to_owned();
    let user_id = o["user_id"].clone();
    let pm = payment_method(db, &user_id, &pm_id)?;
    let gift = is_gift_card(pm);
    let d = diff.unwrap_or(0.0);
    if gift && num(pm, "balance") < d {
        return Err("Insufficient gift card balance to pay for the new item".into());
    }
    let kind = if d > 0.0 { "payment" } else { "refund" };
    let amount = diff.map_or(json!(0), |d| float(d.abs()));
    if gift {
        adjust_balance(db, &user_id, &pm_id, -d);
    }
    let o = order_mut(db, order_id)?;
    if let Some(h) = o["payment_history"].as_array_mut() {
        h.push(payment(kind, amount, &pm_id));
    }
    if let Some(v) = &last_variant {
        let items = o["items"].as_array_mut();
        if let Some(items) = items {
            for (old, new) in item_ids.iter().zip(&new_item_ids) {
                let Some(item) = items.iter_mut().find(|i| i["item_id"] == old.as_str()) else {
                    return Err(format!("Item {old} not found"));
                };
                item["item_id"] = json!(new);
                item["price"] = v["price"].clone();
                item["options"] = v["options"].clone();
            }
        }
    }
    o["status"] = json!("pending (item modified)");
    Ok(Out::Json(o.clone()))
}

fn modify_payment(
    db: &mut Value,
    order_id: Option<&Value>,
    pm_id: Option<&Value>,
) -> Result<Out, Raised> {
    let o = order(db, order_id)?;
    if !o["status"].as_str().unwrap_or_default().contains("pending") {
        return Err("Non-pending order cannot be modified".into());
    }
    let pm_id = text(pm_id, "payment_method_id")?.to_owned();
    let user_id = o["user_id"].clone();
    let pm = payment_method(db, &user_id, &pm_id)?;
    let history = o["payment_history"].as_array().cloned().unwrap_or_default();
    if history.len() != 1 || history[0]["transaction_type"] != "payment" {
        return Err("There should be exactly one payment for a pending order".into());
    }
    let old_pm_id = history[0]["payment_method_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if old_pm_id == pm_id {
        return Err("The new payment method should be different from the current one".into());
    }
    let amount_value = history[0]["amount"].clone();
    let amount = num(&history[0], "amount");
    let gift = is_gift_card(pm);
    if gift && num(pm, "balance") < amount {
        return Err("Insufficient gift card balance to pay for the order".into());
    }
    {
        let o = order_mut(db, order_id)?;
        if let Some(h) = o["payment_history"].as_array_mut() {
            h.push(payment("payment", amount_value.clone(), &pm_id));
            h.push(payment("refund", amount_value, &old_pm_id));
        }
    }
    if gift {
        adjust_balance(db, &user_id, &pm_id, -amount);
    }
    let old_pm = payment_method(db, &user_id, &old_pm_id)?;
    if is_gift_card(old_pm) {
        adjust_balance(db, &user_id, &old_pm_id, amount);
    }
    Ok(Out::Json(order(db, order_id)?.clone()))
}

fn return_items(
    db: &mut Value,
    order_id: Option<&Value>,
    item_ids: Option<&Value>,
    pm_id: Option<&Value>,
) -> Result<Out, Raised> {
    let o = order(db, order_id)?;
    if o["status"] != "delivered" {
        return Err("Non-delivered order cannot be returned".into());
    }
    let user_id = o["user_id"].clone();
    user(db, Some(&user_id))?;
    let pm_id = text(pm_id, "payment_method_id")?.to_owned();
    let pm = payment_method(db, &user_id, &pm_id)?;
    if !is_gift_card(pm) && o["payment_history"][0]["payment_method_id"] != pm_id.as_str() {
        return Err("Payment method should be the original payment method".into());
    }
    let item_ids = texts(item_ids, "item_ids")?;
    missing_item(o, &item_ids, |_| "Some item not found".into())?;
    let mut sorted = item_ids;
    sorted.sort();
    let o = order_mut(db, order_id)?;
    o["status"] = json!("return requested");
    o["return_items"] = json!(sorted);
    o["return_payment_method_id"] = json!(pm_id);
    Ok(Out::Json(o.clone()))
}
