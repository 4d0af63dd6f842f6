//! What the CLI prints: text for people, JSON (`--json`) for scripts.

use agentry::a2a::model::*;
use serde::Serialize;

fn json<T: Serialize>(v: &T) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    );
}

/// Text parts for people; data and files only when there is no text.
fn parts_text(parts: &[Part]) -> String {
    let has_text = parts.iter().any(|p| matches!(p, Part::Text(_)));
    parts
        .iter()
        .filter(|p| !has_text || matches!(p, Part::Text(_)))
        .map(|p| match p {
            Part::Text(t) => t.text.clone(),
            Part::Data(d) => serde_json::to_string(&d.data).unwrap_or_default(),
            Part::File(f) => {
                let name = f.file.name.as_deref().unwrap_or("file");
                match &f.file.content {
                    FileContent::Uri(u) => format!("[file {name}: {u}]"),
                    FileContent::Bytes(b) => format!("[file {name}: {} base64 chars]", b.len()),
                }
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn card(card: &AgentCard, as_json: bool) {
    if as_json {
        return json(card);
    }
    // The versions its interfaces declare (a v1.0 card), else the v0.3 card's own.
    let mut versions: Vec<&str> = Vec::new();
    for i in &card.supported_interfaces {
        if !versions.contains(&i.protocol_version.as_str()) {
            versions.push(&i.protocol_version);
        }
    }
    if versions.is_empty() {
        versions.push(&card.protocol_version);
    }
    println!(
        "{} v{} (A2A {})",
        card.name,
        card.version,
        versions.join(", ")
    );
    println!("  {}", card.description);
    println!("  endpoint: {} ({})", card.url, card.preferred_transport);
    for i in &card.supported_interfaces {
        println!(
            "  interface: {} {} {}",
            i.protocol_binding, i.protocol_version, i.url
        );
    }
    let c = &card.capabilities;
    println!(
        "  streaming: {}, push notifications: {}",
        c.streaming.unwrap_or(false),
        c.push_notifications.unwrap_or(false)
    );
    for s in &card.skills {
        println!("  skill {}: {}", s.id, s.description);
    }
}

pub(crate) fn message(m: &Message, as_json: bool) {
    if as_json {
        return json(m);
    }
    println!("{}", parts_text(&m.parts));
}

pub(crate) fn task(t: &Task, as_json: bool) {
    if as_json {
        return json(t);
    }
    println!(
        "task {} ({}) context {}",
        t.id, t.status.state, t.context_id
    );
    for a in &t.artifacts {
        println!(
            "artifact {}:\n{}",
            a.name.as_deref().unwrap_or(&a.artifact_id),
            parts_text(&a.parts)
        );
    }
    if let Some(m) = &t.status.message {
        println!("{}: {}", t.status.state, parts_text(&m.parts));
    }
}

pub(crate) fn event(ev: &StreamEvent, as_json: bool) {
    if as_json {
        println!("{}", serde_json::to_string(ev).unwrap_or_default());
        return;
    }
    match ev {
        StreamEvent::Task(t) => println!("[task {}] {}", t.id, t.status.state),
        StreamEvent::Message(m) => println!("{}", parts_text(&m.parts)),
        StreamEvent::StatusUpdate(s) => match &s.status.message {
            Some(m) => println!("[{}] {}", s.status.state, parts_text(&m.parts)),
            None => println!("[{}]", s.status.state),
        },
        StreamEvent::ArtifactUpdate(a) => println!(
            "[artifact {}] {}",
            a.artifact
                .name
                .as_deref()
                .unwrap_or(&a.artifact.artifact_id),
            parts_text(&a.artifact.parts)
        ),
    }
}
