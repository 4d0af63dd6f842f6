//! `[server.tls]`: agents served over HTTPS, client certificates as credentials (mTLS), and
//! the A2A client presenting one (`[client_tls]`), with certificates made for the run.

use std::path::Path;
use std::time::Duration;

use agentry::a2a::A2aError;
use agentry::a2a::client::{A2aClient, ClientConfig, ClientTls};
use agentry::a2a::model::{Message, MessageSendParams, Role, SendMessageResult, TaskState};
use agentry::config::Config;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

fn new_ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let pem = params.self_signed(&key).unwrap().pem();
    Ca {
        issuer: Issuer::new(params, key),
        pem,
    }
}

/// A certificate `ca` signed for `cn` (server: for 127.0.0.1), as PEM (chain, key).
fn leaf(ca: &Ca, cn: &str, server: bool) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let sans = if server {
        vec!["127.0.0.1".to_string(), "localhost".to_string()]
    } else {
        Vec::new()
    };
    let mut params = CertificateParams::new(sans).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![if server {
        ExtendedKeyUsagePurpose::ServerAuth
    } else {
        ExtendedKeyUsagePurpose::ClientAuth
    }];
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn client(ca: &Ca, identity: Option<(String, String)>) -> ClientConfig {
    ClientConfig {
        tls: Some(ClientTls {
            ca_pem: Some(ca.pem.clone().into_bytes()),
            identity_pem: identity.map(|(c, k)| format!("{c}\n{k}").into_bytes()),
        }),
        retries: 0,
        ..ClientConfig::default()
    }
}

async fn ask(url: &str, cfg: ClientConfig) -> Result<TaskState, A2aError> {
    let c = A2aClient::discover(url, cfg).await?;
    match c
        .send_message(MessageSendParams::new(Message::text(Role::User, "hello")))
        .await?
    {
        SendMessageResult::Task(t) => Ok(t.state()),
        SendMessageResult::Message(_) => Ok(TaskState::Completed),
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_the_ca_signed_are_credentials_and_nothing_else_is() {
    let dir = agentry_testkit::Scratch::new("tls");
    let ca = new_ca("agentry test CA");
    let (cert, key) = leaf(&ca, "127.0.0.1", true);
    let port = agentry_testkit::free_port();
    let toml = format!(
        r#"
        [server]
        port = {port}
        store = "memory"
        [server.tls]
        cert = "{cert}"
        key = "{key}"
        client_ca = "{ca}"
        client_names = ["orchestrator"]
        [[agents]]
        path = "/echo"
        builtin = {{ kind = "echo" }}
        "#,
        cert = write(&dir, "server.pem", &cert),
        key = write(&dir, "server.key", &key),
        ca = write(&dir, "ca.pem", &ca.pem),
    );
    let config: Config = toml::from_str(&toml).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // `serve` runs beside the checks (joined, not spawned: its future is not provably Send).
    let server = agentry::serve(config, async {
        let _ = stopped.await;
    });
    let checks = async {
        let url = format!("https://127.0.0.1:{port}/echo");
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }

        // The named client, with a certificate the CA signed: served.
        let orchestrator = leaf(&ca, "orchestrator", false);
        assert_eq!(
            ask(&url, client(&ca, Some(orchestrator))).await.unwrap(),
            TaskState::Completed
        );
        // The card says how to authenticate.
        let card = A2aClient::discover(&url, client(&ca, None))
            .await
            .unwrap()
            .card()
            .cloned()
            .unwrap();
        assert!(
            card.security_schemes.contains_key("mtls"),
            "{:?}",
            card.security_schemes
        );
        // No certificate (and no other credential): 401.
        let none = ask(&url, client(&ca, None)).await;
        assert!(
            matches!(none, Err(A2aError::Unauthorized { .. })),
            "{none:?}"
        );
        // A certificate the CA signed for a name not accepted: 401.
        let intruder = ask(&url, client(&ca, Some(leaf(&ca, "intruder", false)))).await;
        assert!(
            matches!(intruder, Err(A2aError::Unauthorized { .. })),
            "{intruder:?}"
        );
        // A certificate another CA signed, with the accepted name: the handshake fails.
        let rogue = new_ca("rogue CA");
        let forged = ask(&url, client(&ca, Some(leaf(&rogue, "orchestrator", false)))).await;
        assert!(forged.is_err(), "{forged:?}");
        assert!(
            !matches!(forged, Err(A2aError::Unauthorized { .. })),
            "refused at the handshake, before any request: {forged:?}"
        );
        // The header that carries a verified name cannot be sent by a client.
        let c = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(ca.pem.as_bytes()).unwrap())
            .build()
            .unwrap();
        let r = c
        .post(format!("{url}/"))
        .header("Content-Type", "application/json")
        .header("x-agentry-verified-client", "orchestrator")
        .body(
            r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m1","parts":[{"kind":"text","text":"hi"}]}}}"#,
        )
        .send()
        .await
        .unwrap();
        assert_eq!(r.status(), 401);
        // Plain HTTP is not answered.
        let plain = ask(
            &format!("http://127.0.0.1:{port}/echo"),
            ClientConfig {
                retries: 0,
                ..ClientConfig::default()
            },
        )
        .await;
        assert!(plain.is_err(), "{plain:?}");

        // An orchestrator whose `[client_tls]` trusts the CA and presents the certificate
        // calls the agent in a workflow step.
        let (c, k) = leaf(&ca, "orchestrator", false);
        let wf = write(
            &dir,
            "wf.yaml",
            "name: relay\ndescription: Asks the echo agent.\nsteps:\n  - {id: ask, agent: echo, input: hello}\n",
        );
        let orchestrator: Config = toml::from_str(&format!(
            r#"
            [server]
            store = "memory"
            [client_tls]
            ca = "{ca}"
            cert = "{cert}"
            key = "{key}"
            [[remotes]]
            name = "echo"
            url = "{url}"
            [orchestrator]
            workflows = ["{wf}"]
            "#,
            ca = dir.join("ca.pem").display(),
            cert = write(&dir, "client.pem", &c),
            key = write(&dir, "client.key", &k),
        ))
        .unwrap();
        let base = crate::serve(orchestrator).await;
        assert_eq!(
            ask(
                &format!("{base}/orchestrator"),
                ClientConfig {
                    retries: 0,
                    ..ClientConfig::default()
                }
            )
            .await
            .unwrap(),
            TaskState::Completed
        );
        let _ = stop.send(());
    };
    let (served, ()) = tokio::join!(server, checks);
    served.unwrap();
}
