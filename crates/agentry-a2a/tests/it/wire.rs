//! Wire types: the v0.3.0 specification's examples round-trip, unknown fields are tolerated,
//! missing or mistyped fields give -32602 naming the field; the v1.0 codec round-trips and
//! its decoder answers arbitrary input with protocol errors.

use agentry_a2a::jsonrpc::{self, Request};
use agentry_a2a::model::*;
use agentry_a2a::version::ProtocolVersion;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Decodes into `T`, encodes again, and checks nothing was lost or invented.
fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(v: Value) -> T {
    let t: T = serde_json::from_value(v.clone()).expect("decodes");
    let back = serde_json::to_value(&t).unwrap();
    assert_eq!(back, v, "round trip changed the JSON");
    t
}

#[test]
fn spec_agent_card_example_round_trips() {
    // The specification's sample card (section 5.6), with every security scheme kind.
    let card = json!({
        "protocolVersion": "0.3.0",
        "name": "GeoSpatial Route Planner Agent",
        "description": "Provides advanced route planning, traffic analysis, and custom map generation services.",
        "url": "https://georoute-agent.example.com/a2a/v1",
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [
            {"url": "https://georoute-agent.example.com/a2a/v1", "transport": "JSONRPC"},
            {"url": "https://georoute-agent.example.com/a2a/grpc", "transport": "GRPC"},
            {"url": "https://georoute-agent.example.com/a2a/json", "transport": "HTTP+JSON"}
        ],
        "provider": {"organization": "Example Geo Services Inc.", "url": "https://www.examplegeoservices.com"},
        "iconUrl": "https://georoute-agent.example.com/icon.png",
        "version": "1.2.0",
        "documentationUrl": "https://docs.examplegeoservices.com/georoute-agent/api",
        "capabilities": {
            "streaming": true,
            "pushNotifications": true,
            "stateTransitionHistory": false,
            "extensions": [{"uri": "https://example.com/ext/geo/v1", "description": "geo", "required": false, "params": {"units": "metric"}}]
        },
        "securitySchemes": {
            "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
            "google": {"type": "openIdConnect", "openIdConnectUrl": "https://accounts.google.com/.well-known/openid-configuration"},
            "mtls": {"type": "mutualTLS", "description": "client certificate"},
            "oauth": {"type": "oauth2", "flows": {
                "clientCredentials": {"tokenUrl": "https://auth.example.com/token", "scopes": {"read": "read routes"}},
                "authorizationCode": {"authorizationUrl": "https://auth.example.com/authorize", "tokenUrl": "https://auth.example.com/token", "scopes": {}}
            }}
        },
        "security": [{"google": ["openid", "profile", "email"]}, {"bearer": []}],
        "defaultInputModes": ["application/json", "text/plain"],
        "defaultOutputModes": ["application/json", "image/png"],
        "skills": [{
            "id": "route-optimizer-traffic",
            "name": "Traffic-Aware Route Optimizer",
            "description": "Calculates the optimal driving route between two or more locations.",
            "tags": ["maps", "routing", "navigation", "directions", "traffic"],
            "examples": ["Plan a route from '1600 Amphitheatre Parkway, Mountain View, CA' to 'San Francisco International Airport' avoiding tolls."],
            "inputModes": ["application/json", "text/plain"],
            "outputModes": ["application/json", "application/vnd.geo+json", "text/html"]
        }],
        "supportsAuthenticatedExtendedCard": true,
        "signatures": [{"protected": "eyJhbGciOiJFUzI1NiJ9", "signature": "QFdkNLNszlGj3z3u0YQGt_T9LixY3qtdQpZmsTdDHDe3fXV9y9-B3m2-XgCpzuhiLt8E0tV6HXoZKHv4GtHgKQ"}]
    });
    let c: AgentCard = round_trip(card);
    assert_eq!(c.security_schemes.len(), 5);
    assert!(matches!(
        c.security_schemes["mtls"],
        SecurityScheme::MutualTls { .. }
    ));
}

#[test]
fn spec_task_and_events_round_trip() {
    let task = json!({
        "id": "363422be-b0f9-4692-a24d-278670e7c7f1",
        "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
        "status": {"state": "completed", "timestamp": "2025-04-02T16:59:35.331Z"},
        "artifacts": [{
            "artifactId": "9b6934dd-37e3-4eb1-8766-962efaab63a1",
            "name": "joke",
            "parts": [{"kind": "text", "text": "Why did the chicken cross the road? To get to the other side!"}]
        }],
        "history": [{
            "role": "user",
            "parts": [{"kind": "text", "text": "tell me a joke"}],
            "messageId": "9229e770-767c-417b-a0b0-f0741243c589",
            "taskId": "363422be-b0f9-4692-a24d-278670e7c7f1",
            "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
            "kind": "message"
        }],
        "metadata": {},
        "kind": "task"
    });
    let t: Task = round_trip(task);
    assert_eq!(t.state(), TaskState::Completed);

    let status = json!({
        "taskId": "t1", "contextId": "c1", "kind": "status-update",
        "status": {"state": "input-required", "message": {
            "role": "agent", "parts": [{"kind": "text", "text": "which date?"}],
            "messageId": "m2", "kind": "message"}},
        "final": true
    });
    let _: TaskStatusUpdateEvent = round_trip(status.clone());
    let artifact = json!({
        "taskId": "t1", "contextId": "c1", "kind": "artifact-update",
        "artifact": {"artifactId": "a1", "parts": [
            {"kind": "file", "file": {"name": "map.png", "mimeType": "image/png", "bytes": "iVBORw0KGgo="}},
            {"kind": "file", "file": {"uri": "https://example.com/x.pdf"}},
            {"kind": "data", "data": {"distance_km": 42.5}}
        ]},
        "append": true, "lastChunk": false
    });
    let _: TaskArtifactUpdateEvent = round_trip(artifact.clone());
    // The stream union picks the variant by `kind`.
    let ev: StreamEvent = serde_json::from_value(status).unwrap();
    assert!(ev.is_final());
    let ev: StreamEvent = serde_json::from_value(artifact).unwrap();
    assert!(matches!(ev, StreamEvent::ArtifactUpdate(_)));
}

#[test]
fn spec_requests_decode() {
    let send = json!({
        "jsonrpc": "2.0", "id": 1, "method": "message/send",
        "params": {
            "message": {"role": "user", "parts": [{"kind": "text", "text": "tell me a joke"}],
                        "messageId": "9229e770-767c-417b-a0b0-f0741243c589", "kind": "message"},
            "configuration": {"blocking": false, "historyLength": 2, "acceptedOutputModes": ["text/plain"],
                              "pushNotificationConfig": {"url": "https://client.example.com/hook", "token": "secret",
                                                         "authentication": {"schemes": ["Bearer"], "credentials": "tok"}}},
            "metadata": {}
        }
    });
    let (id, req) = jsonrpc::decode_request(send.to_string().as_bytes()).unwrap();
    assert_eq!(id, json!(1));
    let Request::SendMessage(p) = req else {
        panic!()
    };
    let cfg = p.configuration.unwrap();
    assert_eq!(cfg.blocking, Some(false));
    assert_eq!(
        cfg.push_notification_config
            .unwrap()
            .authentication
            .unwrap()
            .schemes,
        ["Bearer"]
    );

    for (method, params) in [
        ("tasks/get", json!({"id": "t1", "historyLength": 10})),
        ("tasks/cancel", json!({"id": "t1"})),
        ("tasks/resubscribe", json!({"id": "t1"})),
        (
            "tasks/pushNotificationConfig/set",
            json!({"taskId": "t1", "pushNotificationConfig": {"url": "https://x/y"}}),
        ),
        (
            "tasks/pushNotificationConfig/get",
            json!({"id": "t1", "pushNotificationConfigId": "c1"}),
        ),
        ("tasks/pushNotificationConfig/list", json!({"id": "t1"})),
        (
            "tasks/pushNotificationConfig/delete",
            json!({"id": "t1", "pushNotificationConfigId": "c1"}),
        ),
        ("agent/getAuthenticatedExtendedCard", json!({})),
        (
            "message/stream",
            json!({"message": {"role": "user", "parts": [{"kind": "text", "text": "x"}], "messageId": "m"}}),
        ),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": "req-1", "method": method, "params": params});
        let (_, req) = jsonrpc::decode_request(body.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("{method}: {e:?}"));
        assert_eq!(req.method(), method);
        // What our client sends decodes to the same request.
        let again = jsonrpc::encode_request(&json!(1), &req);
        assert_eq!(jsonrpc::decode_request(&again).unwrap().1, req);
    }
}

#[test]
fn unknown_fields_are_tolerated() {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "message/send", "x-vendor": true,
        "params": {"future": 1, "message": {"role": "user", "messageId": "m", "novel": [1],
                   "parts": [{"kind": "text", "text": "hi", "extra": {}}]}}
    });
    assert!(jsonrpc::decode_request(body.to_string().as_bytes()).is_ok());
    let card: AgentCard = serde_json::from_value(json!({
        "name": "n", "description": "d", "url": "http://x", "version": "1",
        "capabilities": {"newCapability": true}, "defaultInputModes": [], "defaultOutputModes": [],
        "skills": [], "somethingNew": {"a": 1}
    }))
    .unwrap();
    assert_eq!(card.protocol_version, "0.3.0");
}

fn decode_err(body: &str) -> agentry_a2a::RpcError {
    jsonrpc::decode_request(body.as_bytes()).unwrap_err().1
}

#[test]
fn missing_or_wrong_fields_name_the_path() {
    let e = decode_err(
        r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m"}}}"#,
    );
    assert_eq!(e.code, -32602);
    assert_eq!(e.message, "params.message.parts is required");

    let e = decode_err(
        r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m","parts":[{"kind":"text"}]}}}"#,
    );
    assert_eq!(e.code, -32602);
    assert!(
        e.message.contains("params.message.parts[0]") && e.message.contains("text"),
        "{}",
        e.message
    );

    let e = decode_err(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":7}}"#);
    assert_eq!(e.code, -32602);
    assert!(e.message.starts_with("invalid params.id"), "{}", e.message);

    let e = decode_err(
        r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"robot","messageId":"m","parts":[]}}}"#,
    );
    assert!(e.message.contains("params.message.role"), "{}", e.message);

    let e = decode_err(
        r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m","parts":[{"kind":"file","file":{"name":"x"}}]}}}"#,
    );
    assert_eq!(e.code, -32602);
    assert!(
        e.message.contains("params.message.parts[0]") && e.message.contains("`bytes` or `uri`"),
        "{}",
        e.message
    );
}

/// JSON escapes in the envelope's strings are the same strings (`tasks\/get` is
/// `tasks/get`, `2\u002e0` is `2.0`): once refused with -32600 (issue 18, item 14).
#[test]
fn escaped_method_and_version_strings_decode() {
    for body in [
        r#"{"jsonrpc":"2\u002e0","id":1,"method":"tasks\/get","params":{"id":"t1"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tasks\u002fget","params":{"id":"t\u0031"}}"#,
    ] {
        let (id, req) = agentry_a2a::jsonrpc::decode_request(body.as_bytes())
            .unwrap_or_else(|(_, e)| panic!("{body}: {e:?}"));
        assert_eq!(id, serde_json::json!(1));
        match req {
            agentry_a2a::jsonrpc::Request::GetTask(q) => assert_eq!(q.id, "t1"),
            other => panic!("{body}: {other:?}"),
        }
    }
}

#[test]
fn envelope_errors_use_jsonrpc_codes() {
    assert_eq!(decode_err("{").code, -32700);
    assert_eq!(decode_err("not json").code, -32700);
    assert_eq!(decode_err("[]").code, -32600);
    assert_eq!(
        decode_err(r#"{"jsonrpc":"1.0","id":1,"method":"tasks/get"}"#).code,
        -32600
    );
    assert_eq!(
        decode_err(r#"{"jsonrpc":"2.0","id":{},"method":"tasks/get"}"#).code,
        -32600
    );
    assert_eq!(
        decode_err(r#"{"jsonrpc":"2.0","id":1,"method":5}"#).code,
        -32600
    );
    assert_eq!(
        decode_err(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/list"}"#).code,
        -32601
    );
    assert_eq!(
        decode_err(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get"}"#).code,
        -32602
    );
    // Without an id (a notification, which agentry does not take): the method and params are
    // still checked first, so a wrong method is -32601 and bad params -32602, as the official
    // SDKs answer and TCK 0.3 expects; a well-formed one is -32600 (it would get no answer).
    let (id, e) =
        jsonrpc::decode_request(br#"{"jsonrpc":"2.0","method":"message/ssend","params":{}}"#)
            .unwrap_err();
    assert_eq!((id, e.code), (Value::Null, -32601));
    let (id, e) = jsonrpc::decode_request(
        br#"{"jsonrpc":"2.0","method":"message/send","params":{"":"not_a_dict"}}"#,
    )
    .unwrap_err();
    assert_eq!((id, e.code), (Value::Null, -32602));
    let (_, e) =
        jsonrpc::decode_request(br#"{"jsonrpc":"2.0","method":"tasks/get","params":{"id":"t"}}"#)
            .unwrap_err();
    assert_eq!(e.code, -32600);
    assert!(e.message.contains("`id` is required"), "{}", e.message);
    let (_, e) =
        jsonrpc::decode_request(br#"{"jsonrpc":"aaa","method":"message/send","params":{}}"#)
            .unwrap_err();
    assert_eq!(e.code, -32600);
    // Escapes are decoded before the envelope is checked (issue 18, item 14).
    let (id, req) = jsonrpc::decode_request(
        br#"{"jsonrpc":"2\u002e0","id":7,"method":"tasks\/get","params":{"id":"t"}}"#,
    )
    .unwrap();
    assert_eq!(id, json!(7));
    assert!(matches!(req, Request::GetTask(_)));
    // A batch is refused as one, clearly.
    let e = decode_err(r#" [{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t"}}]"#);
    assert_eq!(e.code, -32600);
    assert!(e.message.contains("batch"), "{}", e.message);
    // File bytes must be base64 (standard or URL-safe, padding optional).
    let file = |b: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"message/send","params":{{"message":{{"role":"user","messageId":"m","parts":[{{"kind":"file","file":{{"bytes":"{b}"}}}}]}}}}}}"#
        )
    };
    for bad in ["not base64!", "a", "aGk==x", "aG k=", "a==="] {
        let e = decode_err(&file(bad));
        assert_eq!(e.code, -32602, "{bad}");
        assert!(e.message.contains("not base64"), "{bad}: {}", e.message);
    }
    for good in ["", "aGk=", "aGk", "dGNr", "-_-_"] {
        assert!(
            jsonrpc::decode_request(file(good).as_bytes()).is_ok(),
            "{good}"
        );
    }
    // The id is echoed when it could be read.
    let (id, _) =
        jsonrpc::decode_request(br#"{"jsonrpc":"2.0","id":"abc","method":"nope"}"#).unwrap_err();
    assert_eq!(id, json!("abc"));
}

#[test]
fn state_machine_refuses_invalid_transitions() {
    use TaskState::*;
    for from in TaskState::ALL {
        for to in TaskState::ALL {
            let ok = from.can_transition_to(to);
            if from.is_terminal() || to == Unknown {
                assert!(!ok, "{from} -> {to} must be refused");
            }
        }
    }
    assert!(Submitted.can_transition_to(Working));
    assert!(Working.can_transition_to(Working));
    assert!(InputRequired.can_transition_to(Working));
    assert!(!Working.can_transition_to(Submitted));
    let mut t = Task::new("t".into(), "c".into());
    t.transition(TaskStatus::now(Completed, None)).unwrap();
    let err = t.transition(TaskStatus::now(Working, None)).unwrap_err();
    assert_eq!((err.from, err.to), (Completed, Working));
    assert_eq!(t.state(), Completed, "a refused move changes nothing");
}

fn arb_part() -> impl Strategy<Value = Part> {
    prop_oneof![
        ".*".prop_map(Part::text),
        ("[a-z]{1,8}", any::<i64>()).prop_map(|(k, v)| {
            let mut m = serde_json::Map::new();
            m.insert(k, json!(v));
            Part::data(m)
        }),
        (
            "([A-Za-z0-9+/]{4}){0,4}",
            proptest::option::of("[a-z]{1,8}\\.txt")
        )
            .prop_map(|(b, n)| Part::file(File {
                content: FileContent::Bytes(b),
                mime_type: Some("text/plain".into()),
                name: n,
            })),
    ]
}

/// Parts of every kind, with URIs and metadata too (the wire forms carry them differently).
fn arb_any_part() -> impl Strategy<Value = Part> {
    prop_oneof![
        arb_part(),
        (
            "https://h/[a-z]{1,8}",
            proptest::option::of("[a-z]{1,8}/[a-z]{1,8}")
        )
            .prop_map(|(u, mt)| Part::file(File {
                content: FileContent::Uri(u),
                mime_type: mt,
                name: None,
            })),
        (".*", "[a-z_]{1,8}").prop_map(|(t, k)| {
            let mut p = Part::text(t);
            if let Part::Text(t) = &mut p {
                t.metadata = Some(json!({ k: [1, "x"] }).as_object().unwrap().clone());
            }
            p
        }),
    ]
}

fn arb_message() -> impl Strategy<Value = Message> {
    (
        proptest::collection::vec(arb_any_part(), 1..4),
        "[a-z0-9-]{1,36}",
        any::<bool>(),
        proptest::option::of("[a-z0-9]{1,8}"),
    )
        .prop_map(|(parts, id, agent, ctx)| {
            let mut m = Message::new(if agent { Role::Agent } else { Role::User }, parts);
            m.message_id = id;
            m.context_id = ctx;
            m
        })
}

fn arb_task() -> impl Strategy<Value = Task> {
    (
        "[a-z0-9-]{1,36}",
        proptest::sample::select(TaskState::ALL.to_vec()),
        proptest::collection::vec(arb_message(), 0..3),
        proptest::collection::vec(proptest::collection::vec(arb_any_part(), 0..3), 0..3),
        proptest::option::of(arb_message()),
    )
        .prop_map(|(id, state, history, artifacts, status_message)| {
            let mut t = Task::new(id, "ctx".into());
            t.history = history;
            t.artifacts = artifacts
                .into_iter()
                .map(|parts| Artifact::new(Some("a"), parts))
                .collect();
            t.status = TaskStatus {
                state,
                message: status_message,
                timestamp: Some("2026-11-25T00:00:00.000Z".into()),
            };
            t
        })
}

proptest! {
    /// Each version's wire types: a task and every kind of stream event survive model ->
    /// wire JSON -> model (v1.0, and v0.3's HTTP+JSON form, which has no referenceTaskIds).
    #[test]
    fn tasks_and_events_round_trip_through_each_wire_form(t in arb_task(), last in any::<bool>()) {
        use agentry_a2a::wire::{v03, v1};
        let json = serde_json::to_value(v1::Task::from(&t)).unwrap();
        prop_assert!(!json.to_string().contains("\"kind\""));
        let back = serde_json::from_value::<v1::Task>(json).unwrap().into_model().unwrap();
        prop_assert_eq!(&back, &t);
        let json = serde_json::to_value(v03::Task::from(&t)).unwrap();
        let back = serde_json::from_value::<v03::Task>(json).unwrap().into_model().unwrap();
        prop_assert_eq!(&back, &t);
        let events = [
            StreamEvent::Task(t.clone()),
            StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
                task_id: t.id.clone(),
                context_id: t.context_id.clone(),
                status: t.status.clone(),
                // v1.0 has no flag: the state says it.
                is_final: t.status.state.ends_turn(),
                metadata: None,
            }),
            StreamEvent::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: t.id.clone(),
                context_id: t.context_id.clone(),
                artifact: Artifact::new(None, vec![Part::text("x")]),
                append: Some(!last),
                last_chunk: Some(last),
                metadata: None,
            }),
        ];
        for ev in events {
            let json = serde_json::to_value(v1::StreamResponse::from(&ev)).unwrap();
            let back = serde_json::from_value::<v1::StreamResponse>(json).unwrap().into_model().unwrap();
            prop_assert_eq!(&back, &ev);
            let json = serde_json::to_value(v03::StreamResponse::from(&ev)).unwrap();
            let back = serde_json::from_value::<v03::StreamResponse>(json).unwrap().into_model().unwrap();
            prop_assert_eq!(&back, &ev);
        }
    }

    /// A send request survives the v0.3 HTTP+JSON form both ways (as a client writes it and
    /// the server reads it).
    #[test]
    fn sends_round_trip_through_v03_rest(m in arb_message(), blocking in any::<bool>(), h in proptest::option::of(0i64..10)) {
        let mut p = MessageSendParams::new(m);
        p.configuration = Some(MessageSendConfiguration {
            blocking: Some(blocking),
            history_length: h,
            ..Default::default()
        });
        let json = serde_json::to_string(&agentry_a2a::wire::v03::SendMessageRequest::from(&p)).unwrap();
        prop_assert_eq!(agentry_a2a::rest::v03::decode_send(&json).unwrap(), p);
    }

    #[test]
    fn messages_round_trip(parts in proptest::collection::vec(arb_part(), 1..5), id in "[a-z0-9-]{1,36}", agent in any::<bool>()) {
        let mut m = Message::new(if agent { Role::Agent } else { Role::User }, parts);
        m.message_id = id;
        let v = serde_json::to_value(&m).unwrap();
        let back: Message = serde_json::from_value(v).unwrap();
        prop_assert_eq!(back, m);
    }

    /// The v1.0 codec: a message survives model -> v1.0 JSON -> model, inside a send request
    /// (server side) and inside a result (client side).
    #[test]
    fn messages_round_trip_through_v1(parts in proptest::collection::vec(arb_part(), 1..5), id in "[a-z0-9-]{1,36}", agent in any::<bool>()) {
        let mut m = Message::new(if agent { Role::Agent } else { Role::User }, parts);
        m.message_id = id;
        let req = jsonrpc::Request::SendMessage(MessageSendParams::new(m.clone()));
        let decoded = agentry_a2a::v1::decode_value("SendMessage", agentry_a2a::v1::encode_params(&req));
        prop_assert_eq!(decoded.unwrap(), req);
        let result = serde_json::to_value(agentry_a2a::v1::send_result(&SendMessageResult::Message(m.clone()))).unwrap();
        prop_assert!(!result.to_string().contains("\"kind\""));
        let back = agentry_a2a::v1::send_result_from(result).unwrap();
        prop_assert_eq!(back, SendMessageResult::Message(m));
    }

    #[test]
    fn decoder_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = jsonrpc::decode_request(&bytes);
        for v in [None, Some(ProtocolVersion::V1_0), Some(ProtocolVersion::V0_3)] {
            let _ = jsonrpc::decode_request_as(&bytes, v);
        }
    }

    #[test]
    fn v1_decoder_never_panics_on_mutated_requests(method in prop_oneof![
        Just("SendMessage"), Just("GetTask"), Just("ListTasks"), Just("CreateTaskPushNotificationConfig"),
        Just("GetTaskPushNotificationConfig"), Just("SubscribeToTask"), Just("x")],
        params in prop_oneof![
            Just(json!(null)), Just(json!([])), Just(json!({"id": 1})),
            Just(json!({"message": {"role": 3, "parts": [{"text": 1}, {"raw": null}, 5]}})),
            Just(json!({"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"data": [1]}, {"url": "u", "text": "t"}]}})),
            Just(json!({"status": ["TASK_STATE_WORKING"], "pageSize": "ten", "statusTimestampAfter": 12})),
            Just(json!({"taskId": "t", "url": 5, "authentication": "bearer"})),
            "[ -~]{0,40}".prop_map(|s| json!({"id": s, "taskId": s, "pageToken": s, "statusTimestampAfter": s})),
            // Once not inverses of their encoding: a config get without a config id, a
            // subscription with metadata.
            Just(json!({"taskId": "t"})),
            Just(json!({"id": "t", "metadata": {"k": 1}})),
            Just(json!({"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "x"}]},
                        "configuration": {"blocking": true, "pushNotificationConfig": {"url": "https://h"}}})),
        ]) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        // The fuzz target's invariants: a decoding error code, or a request whose encoding
        // decodes to the same request.
        agentry_a2a::fuzzing::check_decode_v1(body.to_string().as_bytes());
    }

    #[test]
    fn decoder_never_panics_on_mutated_requests(method in prop_oneof![
        Just("message/send"), Just("tasks/get"), Just("tasks/pushNotificationConfig/set"), Just("x")],
        params in any::<Option<i32>>().prop_map(|p| p.map(|n| json!({"id": n, "message": n}))) ) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let r = jsonrpc::decode_request(body.to_string().as_bytes());
        if let Err((_, e)) = r {
            prop_assert!([-32700, -32600, -32601, -32602].contains(&e.code));
        }
    }
}

/// The fuzz targets' seeds and every input they once crashed on (`fuzz/regressions/`), through
/// the same checks, on stable: a crash found by fuzzing stays a test.
#[test]
fn fuzz_corpus_and_regressions_hold() {
    let root = agentry_testkit::repo_root().join("fuzz");
    let mut n = 0;
    for dir in ["seeds/decode_request", "regressions"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                continue;
            }
            let data = std::fs::read(&path).unwrap();
            agentry_a2a::fuzzing::check_decode(&data);
            agentry_a2a::fuzzing::check_decode_v1(&data);
            n += 1;
        }
    }
    assert!(n >= 10, "only {n} inputs found under {}", root.display());
}

/// A v1.0 part with two contents is refused, naming both (and a part with one is taken).
#[test]
fn a_v1_part_with_two_contents_is_refused_naming_them() {
    let send = |part: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"role": "ROLE_USER", "messageId": "m-1", "parts": [part]}}});
        jsonrpc::decode_request_as(body.to_string().as_bytes(), Some(ProtocolVersion::V1_0))
    };
    let (_, e, _) = send(json!({"text": "hi", "url": "https://example.com/a"})).unwrap_err();
    assert_eq!(e.code, -32602, "{e:?}");
    assert!(e.message.contains("has text and url"), "{}", e.message);
    assert!(send(json!({"text": "hi"})).is_ok());
}
