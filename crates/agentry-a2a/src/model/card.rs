//! The agent card: what an agent is, where it listens, what it can do, how to authenticate.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The protocol version this model's first codec speaks.
pub const PROTOCOL_VERSION_0_3: &str = "0.3.0";

/// An agent's self-description, served at `/.well-known/agent-card.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    /// The A2A version the card's `url` speaks (0.3 field; `0.3.0`).
    #[serde(default = "default_protocol_version")]
    pub protocol_version: String,
    /// The agent's name, as people and planners see it.
    pub name: String,
    /// What the agent does.
    pub description: String,
    /// The agent's preferred endpoint (0.3 field).
    pub url: String,
    /// The binding at `url` (`JSONRPC`, `HTTP+JSON`, `GRPC`; 0.3 field).
    #[serde(default = "default_transport")]
    pub preferred_transport: String,
    /// Other endpoints and bindings (0.3 field).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_interfaces: Vec<AgentInterface>,
    /// An icon for the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon_url: Option<String>,
    /// Who runs the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AgentProvider>,
    /// The agent's own version (not the protocol's).
    pub version: String,
    /// Where its documentation is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documentation_url: Option<String>,
    /// What the agent supports (streaming, push notifications, extensions).
    pub capabilities: AgentCapabilities,
    /// The authentication schemes it accepts, by name (referred to by `security`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub security_schemes: BTreeMap<String, SecurityScheme>,
    /// Alternatives (OR) of requirement sets (AND): scheme name to scopes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security: Vec<BTreeMap<String, Vec<String>>>,
    /// Media types it accepts unless a skill says otherwise.
    pub default_input_modes: Vec<String>,
    /// Media types it answers in unless a skill says otherwise.
    pub default_output_modes: Vec<String>,
    /// What it can be asked to do.
    pub skills: Vec<AgentSkill>,
    /// Whether authenticated callers get a fuller card (0.3 field; `capabilities.extendedAgentCard` in 1.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_authenticated_extended_card: Option<bool>,
    /// JWS signatures over the card.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<AgentCardSignature>,
    /// v1.0: every (URL, binding, version) the agent answers at, in order of preference. A
    /// server fills it in for the cards it serves, so clients of both generations find their
    /// interface in one card.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supported_interfaces: Vec<SupportedInterface>,
}

fn default_protocol_version() -> String {
    PROTOCOL_VERSION_0_3.to_owned()
}

fn default_transport() -> String {
    "JSONRPC".to_owned()
}

impl AgentCard {
    /// A card with the required fields and text in/out.
    pub fn new(name: &str, description: &str, url: &str) -> Self {
        AgentCard {
            protocol_version: default_protocol_version(),
            name: name.to_owned(),
            description: description.to_owned(),
            url: url.to_owned(),
            preferred_transport: default_transport(),
            additional_interfaces: Vec::new(),
            icon_url: None,
            provider: None,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            documentation_url: None,
            capabilities: AgentCapabilities::default(),
            security_schemes: BTreeMap::new(),
            security: Vec::new(),
            default_input_modes: vec!["text/plain".to_owned()],
            default_output_modes: vec!["text/plain".to_owned()],
            skills: Vec::new(),
            supports_authenticated_extended_card: None,
            signatures: Vec::new(),
            supported_interfaces: Vec::new(),
        }
    }
}

/// A v1.0 interface declaration: where, over which binding, in which protocol version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SupportedInterface {
    /// The endpoint.
    pub url: String,
    /// `JSONRPC`, `HTTP+JSON` or `GRPC`.
    pub protocol_binding: String,
    /// The protocol version spoken there (`1.0`, `0.3`).
    #[serde(default)]
    pub protocol_version: String,
    /// The tenant to name in requests, when the endpoint serves several.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
}

/// Another URL and transport the agent is reachable at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInterface {
    /// The endpoint.
    pub url: String,
    /// `JSONRPC`, `GRPC` or `HTTP+JSON`.
    pub transport: String,
}

/// The organization behind an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentProvider {
    /// Its name.
    pub organization: String,
    /// Its website.
    pub url: String,
}

/// Optional protocol features an agent supports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// `message/stream` and `tasks/resubscribe` (SSE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    /// Push notifications to a webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notifications: Option<bool>,
    /// The task's status history is kept (0.3 field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_transition_history: Option<bool>,
    /// Protocol extensions it speaks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<AgentExtension>,
    /// v1.0 name of the card's `supportsAuthenticatedExtendedCard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_agent_card: Option<bool>,
}

/// A protocol extension an agent declares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentExtension {
    /// The extension's URI, its identity.
    pub uri: String,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Clients must speak it to use the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Its settings for this agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Map<String, Value>>,
}

/// One thing an agent can be asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    /// Its id, unique within the card.
    pub id: String,
    /// A short name.
    pub name: String,
    /// What it does, for people and planners.
    pub description: String,
    /// Keywords.
    pub tags: Vec<String>,
    /// Example requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// Media types it accepts, when not the card's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_modes: Option<Vec<String>>,
    /// Media types it answers in, when not the card's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_modes: Option<Vec<String>>,
    /// Security requirements for this skill: each entry a scheme name -> scopes map; any one entry suffices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security: Vec<BTreeMap<String, Vec<String>>>,
}

/// A JWS signature over the card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentCardSignature {
    /// The JWS protected header (base64url).
    pub protected: String,
    /// The signature (base64url).
    pub signature: String,
    /// The unprotected header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<Map<String, Value>>,
}

/// How a client authenticates: the five OpenAPI-style scheme kinds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum SecurityScheme {
    /// A key in a header, query parameter or cookie.
    #[serde(rename = "apiKey")]
    ApiKey {
        /// `header`, `query` or `cookie`.
        #[serde(rename = "in")]
        location: String,
        /// The header, parameter or cookie name.
        name: String,
        /// For people.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// HTTP authentication (`bearer`, `basic`).
    #[serde(rename = "http", rename_all = "camelCase")]
    Http {
        /// The scheme (`bearer`).
        scheme: String,
        /// The token's format (`JWT`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bearer_format: Option<String>,
        /// For people.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// OAuth 2.0.
    #[serde(rename = "oauth2", rename_all = "camelCase")]
    OAuth2 {
        /// The flows the issuer supports.
        flows: Box<OAuthFlows>,
        /// The issuer's metadata (RFC 8414).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        oauth2_metadata_url: Option<String>,
        /// For people.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// OpenID Connect.
    #[serde(rename = "openIdConnect", rename_all = "camelCase")]
    OpenIdConnect {
        /// The provider's discovery document.
        open_id_connect_url: String,
        /// For people.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// TLS client certificates.
    #[serde(rename = "mutualTLS")]
    MutualTls {
        /// For people.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
}

/// The OAuth 2.0 flows an issuer supports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthFlows {
    /// Authorization code (with PKCE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_code: Option<OAuthFlow>,
    /// Client credentials (service to service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_credentials: Option<OAuthFlow>,
    /// Implicit (deprecated by OAuth 2.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implicit: Option<OAuthFlow>,
    /// Resource owner password (deprecated by OAuth 2.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<OAuthFlow>,
}

/// One OAuth flow; which URLs are required depends on the flow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthFlow {
    /// Where users authorize (authorization code, implicit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_url: Option<String>,
    /// Where tokens are issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    /// Where tokens are refreshed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_url: Option<String>,
    /// The scopes, with what each grants.
    #[serde(default)]
    pub scopes: BTreeMap<String, String>,
}
