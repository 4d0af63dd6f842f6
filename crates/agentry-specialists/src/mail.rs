//! The mail agent: drafts emails into an outbox folder, and sends one only after the caller
//! confirms it in a second turn of the same task (`input-required`), and only for a caller
//! holding the send scopes. A request is written like a message: header lines (`To:`, `Cc:`,
//! `Subject:`), a blank line, the body; or a data part `{"to", "cc", "subject", "body"}`.
//!
//! Sending hands the message (RFC 5322 text) to the outbox's `sent/` spool, for the operator's
//! mail relay to deliver: the agent opens no network connection of its own, so a prompt
//! injected into a draft cannot make it mail anyone by itself.
//!
//! Which skill a request is for: the task envelope's `skill` (`draft` or `send`, where the
//! server holds the caller to the skill's scopes), else a data part's `action`, else a text
//! that starts with `send `; otherwise it is a draft.

use std::path::{Path, PathBuf};

use agentry_a2a::model::*;
use agentry_a2a::server::{AgentExecutor, EventSink, ExecutorError, RequestContext};
use serde_json::{Map, Value, json};

/// The mail agent over one outbox folder (`drafts/`, `sent/`).
#[derive(Debug, Clone)]
pub struct MailAgent {
    outbox: PathBuf,
    from: String,
    send_scopes: Vec<String>,
}

/// A parsed draft.
#[derive(Debug, Clone, PartialEq)]
struct Draft {
    to: Vec<String>,
    cc: Vec<String>,
    subject: String,
    body: String,
}

impl MailAgent {
    /// An agent keeping drafts in `outbox/drafts` and handing sent mail to `outbox/sent`,
    /// writing as `from`; a caller whose token is limited must hold `send_scopes` to send.
    pub fn new(
        outbox: impl Into<PathBuf>,
        from: impl Into<String>,
        send_scopes: Vec<String>,
    ) -> std::io::Result<Self> {
        let outbox = outbox.into();
        std::fs::create_dir_all(outbox.join("drafts"))?;
        std::fs::create_dir_all(outbox.join("sent"))?;
        Ok(MailAgent {
            outbox,
            from: from.into(),
            send_scopes,
        })
    }

    /// Its card: the `draft` and `send` skills.
    pub fn card(&self, url: &str) -> AgentCard {
        let mut card = AgentCard::new(
            "mail",
            "Drafts emails; sends a draft only after the caller confirms it.",
            url,
        );
        card.capabilities.streaming = Some(true);
        for (id, description, example) in [
            (
                "draft",
                "Writes a draft from header lines (To:, Cc:, Subject:), a blank line and the body.",
                "To: team@example.com\nSubject: Notes\n\nHere are the notes.",
            ),
            (
                "send",
                "Sends a draft by its id, after asking for confirmation.",
                "send d-1a2b3c",
            ),
        ] {
            card.skills.push(AgentSkill {
                id: id.into(),
                name: id.into(),
                description: description.into(),
                tags: vec!["mail".into()],
                examples: vec![example.into()],
                input_modes: None,
                output_modes: None,
                security: Vec::new(),
            });
        }
        card
    }

    fn draft_path(&self, id: &str) -> Option<PathBuf> {
        valid_id(id).then(|| self.outbox.join("drafts").join(format!("{id}.eml")))
    }

    /// The scopes a limited caller lacks to send (empty: may send).
    fn missing_send_scopes(&self, held: Option<&[String]>) -> Vec<String> {
        match held {
            None => Vec::new(),
            Some(h) => self
                .send_scopes
                .iter()
                .filter(|s| !h.contains(s))
                .cloned()
                .collect(),
        }
    }

    async fn draft(&self, ctx: &RequestContext, ev: &EventSink) -> Result<(), ExecutorError> {
        let d = match parse(&ctx.message) {
            Ok(d) => d,
            Err(why) => return Err(ExecutorError::Rejected(why)),
        };
        // The random end of a new id (its start is a timestamp).
        let id: String = agentry_a2a::new_id()
            .chars()
            .rev()
            .filter(char::is_ascii_alphanumeric)
            .take(12)
            .collect();
        let id = format!("d-{id}");
        let Some(path) = self.draft_path(&id) else {
            return Err(ExecutorError::failed("no draft id"));
        };
        let text = rfc5322(&self.from, &d);
        write_new(&path, &text).map_err(|e| ExecutorError::failed(format!("draft: {e}")))?;
        let mut data = Map::new();
        data.insert("draft".into(), json!(id));
        data.insert("to".into(), json!(d.to));
        data.insert("subject".into(), json!(d.subject));
        ev.artifact(
            Artifact::new(Some("draft"), vec![Part::text(text), Part::data(data)]),
            false,
            true,
        )
        .await?;
        ev.complete(Some(ev.agent_text(format!(
            "Drafted {id} to {} (\"{}\"); nothing was sent. Ask to `send {id}` to send it.",
            d.to.join(", "),
            d.subject
        ))))
        .await
    }

    async fn ask_to_send(&self, ctx: &RequestContext, ev: &EventSink) -> Result<(), ExecutorError> {
        let missing = self.missing_send_scopes(ctx.scopes.as_deref());
        if !missing.is_empty() {
            return Err(ExecutorError::Rejected(format!(
                "sending needs the scope(s) {}",
                missing.join(" ")
            )));
        }
        let id = draft_id(&ctx.message).ok_or_else(|| {
            ExecutorError::Rejected("say which draft to send: `send d-...`".into())
        })?;
        let text = self
            .draft_path(&id)
            .and_then(|p| std::fs::read_to_string(p).ok())
            .ok_or_else(|| ExecutorError::Rejected(format!("no draft {id}")))?;
        let header = |name: &str| {
            text.lines()
                .take_while(|l| !l.is_empty())
                .find_map(|l| l.strip_prefix(&format!("{name}: ")).map(str::to_owned))
                .unwrap_or_default()
        };
        let mut data = Map::new();
        data.insert("confirmSend".into(), json!(id));
        ev.input_required(Some(ev.agent_message(vec![
            Part::text(format!(
                "Send {id} to {} (\"{}\")? Reply `yes` to send it; anything else keeps it as a draft.",
                header("To"),
                header("Subject")
            )),
            Part::data(data),
        ])))
        .await
    }

    async fn confirm(
        &self,
        ctx: &RequestContext,
        ev: &EventSink,
        id: &str,
    ) -> Result<(), ExecutorError> {
        let answer = ctx.message.text_content().trim().to_ascii_lowercase();
        if !matches!(answer.as_str(), "yes" | "y" | "confirm" | "send it") {
            return ev
                .complete(Some(
                    ev.agent_text(format!("Not sent; {id} stays a draft.")),
                ))
                .await;
        }
        // The one who confirms must be allowed to send too.
        let missing = self.missing_send_scopes(ctx.scopes.as_deref());
        if !missing.is_empty() {
            return Err(ExecutorError::Rejected(format!(
                "sending needs the scope(s) {}",
                missing.join(" ")
            )));
        }
        let from = self
            .draft_path(id)
            .ok_or_else(|| ExecutorError::Rejected(format!("no draft {id}")))?;
        let to = self.outbox.join("sent").join(format!("{id}.eml"));
        // A rename: the draft is sent once, even if two confirmations race.
        std::fs::rename(&from, &to)
            .map_err(|e| ExecutorError::Rejected(format!("{id} is no draft any more: {e}")))?;
        let mut data = Map::new();
        data.insert("sent".into(), json!(id));
        ev.complete(Some(ev.agent_message(vec![
            Part::text(format!("Sent {id}: handed to the outbox for delivery.")),
            Part::data(data),
        ])))
        .await
    }
}

impl AgentExecutor for MailAgent {
    async fn execute(&self, ctx: RequestContext, ev: EventSink) -> Result<(), ExecutorError> {
        // The second turn of a send: the confirmation.
        if let Some(prev) = &ctx.previous
            && prev.state() == TaskState::InputRequired
            && let Some(id) = prev.status.message.as_ref().and_then(|m| {
                m.parts.iter().find_map(|p| match p {
                    Part::Data(d) => d.data.get("confirmSend")?.as_str().map(str::to_owned),
                    _ => None,
                })
            })
        {
            return self.confirm(&ctx, &ev, &id).await;
        }
        match action(&ctx) {
            "send" => self.ask_to_send(&ctx, &ev).await,
            _ => self.draft(&ctx, &ev).await,
        }
    }
}

/// `draft` or `send`, from the envelope's skill, a data part's `action`, or the text.
fn action(ctx: &RequestContext) -> &'static str {
    let named = ctx
        .envelope
        .as_ref()
        .and_then(|e| e.skill.clone())
        .or_else(|| {
            data_of(&ctx.message).and_then(|d| d.get("action")?.as_str().map(str::to_owned))
        });
    match named.as_deref() {
        Some("send") => "send",
        Some(_) => "draft",
        None if ctx.message.text_content().trim_start().starts_with("send ") => "send",
        None => "draft",
    }
}

fn data_of(m: &Message) -> Option<&Map<String, Value>> {
    m.parts.iter().find_map(|p| match p {
        Part::Data(d) => Some(&d.data),
        _ => None,
    })
}

/// The draft a send names: a data part's `draft`, or the word after `send`.
fn draft_id(m: &Message) -> Option<String> {
    if let Some(id) = data_of(m).and_then(|d| d.get("draft")?.as_str()) {
        return Some(id.to_owned());
    }
    let text = m.text_content();
    let mut words = text.split_whitespace();
    words.find(|w| *w == "send")?;
    words.next().map(|w| {
        w.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-')
            .to_owned()
    })
}

/// Draft ids are ours: `d-` and hex, nothing that walks a path.
fn valid_id(id: &str) -> bool {
    id.len() <= 40
        && id
            .strip_prefix("d-")
            .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// A draft from a data part or from header lines, a blank line and the body.
fn parse(m: &Message) -> Result<Draft, String> {
    let list = |v: Option<&Value>| -> Vec<String> {
        match v {
            Some(Value::String(s)) => addresses(s),
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|x| x.as_str())
                .flat_map(addresses)
                .collect(),
            _ => Vec::new(),
        }
    };
    let mut d = match data_of(m).filter(|d| d.contains_key("to") || d.contains_key("body")) {
        Some(data) => Draft {
            to: list(data.get("to")),
            cc: list(data.get("cc")),
            subject: data
                .get("subject")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            body: data
                .get("body")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        },
        None => {
            let text = m.text_content();
            let mut d = Draft {
                to: Vec::new(),
                cc: Vec::new(),
                subject: String::new(),
                body: String::new(),
            };
            let mut lines = text.lines();
            let mut rest = Vec::new();
            for line in lines.by_ref() {
                let Some((name, value)) = line.split_once(':') else {
                    rest.push(line);
                    break;
                };
                match name.trim().to_ascii_lowercase().as_str() {
                    "to" => d.to.extend(addresses(value)),
                    "cc" => d.cc.extend(addresses(value)),
                    "subject" => d.subject = value.trim().to_owned(),
                    _ => {
                        rest.push(line);
                        break;
                    }
                }
            }
            rest.extend(lines);
            d.body = rest.join("\n").trim().to_owned();
            d
        }
    };
    if d.to.is_empty() {
        return Err("whom is it to? Start with a `To: name@example.com` line".into());
    }
    if d.body.trim().is_empty() {
        return Err("the email has no body".into());
    }
    // One line, no header injection, a readable length.
    d.subject = d
        .subject
        .replace(['\r', '\n'], " ")
        .chars()
        .take(120)
        .collect();
    if d.subject.is_empty() {
        d.subject = d
            .body
            .split_whitespace()
            .take(8)
            .collect::<Vec<_>>()
            .join(" ");
    }
    Ok(d)
}

/// The addresses in a header value: `name@host` words, nothing else.
fn addresses(s: &str) -> Vec<String> {
    s.split([',', ';', ' ', '<', '>'])
        .map(str::trim)
        .filter(|w| {
            w.split_once('@').is_some_and(|(u, h)| {
                !u.is_empty()
                    && h.contains('.')
                    && w.bytes().all(|b| b.is_ascii_graphic() && b != b'"')
            })
        })
        .map(str::to_owned)
        .collect()
}

fn rfc5322(from: &str, d: &Draft) -> String {
    let mut s = format!("From: {from}\nTo: {}\n", d.to.join(", "));
    if !d.cc.is_empty() {
        s.push_str(&format!("Cc: {}\n", d.cc.join(", ")));
    }
    s.push_str(&format!(
        "Subject: {}\nContent-Type: text/plain; charset=utf-8\n\n{}\n",
        d.subject, d.body
    ));
    s
}

/// Writes a file that must not exist yet (a draft is never overwritten).
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_then_body() {
        let m = Message::text(
            Role::User,
            "To: Team <team@example.com>, boss@example.com\nSubject: Policy\r\n\nRemote work: 3 days.\nThanks",
        );
        let d = parse(&m).unwrap();
        assert_eq!(d.to, ["team@example.com", "boss@example.com"]);
        assert_eq!(d.subject, "Policy");
        assert_eq!(d.body, "Remote work: 3 days.\nThanks");
        assert!(parse(&Message::text(Role::User, "no recipient here")).is_err());
    }

    #[test]
    fn draft_ids_cannot_name_other_files() {
        assert!(valid_id("d-1a2b3c"));
        for bad in ["d-", "../x", "d-../../etc", "d-a/b", "x-12"] {
            assert!(!valid_id(bad), "{bad}");
        }
        let m = Message::text(Role::User, "send d-1a2b3c please");
        assert_eq!(draft_id(&m).as_deref(), Some("d-1a2b3c"));
    }
}
