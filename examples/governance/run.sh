#!/usr/bin/env bash
# Governance end to end: three agents, each on its own port with its own scopes.
#
#   orchestrator  verifies the users' tokens (a development identity provider here), runs the
#                 `policy-brief` workflow, calls each agent with a token minted for that call
#                 alone (its own token service, RFC 8693); one trigger, `policy-question`
#   knowledge     the RAG agent over a small handbook; takes only delegated tokens
#   mail          drafts emails; sends one only after a confirmation turn (input-required),
#                 for a user holding `mail.send`; takes delegated tokens and the users' own
#
# Then it prints the audit trail of the request on each agent. Needs the embedded models
# (bash scripts/fetch-models.sh). Everything stays in $WORK (a new temporary folder).
#
#   bash examples/governance/run.sh
#
# AGENTRY (the binary), WORK, and PORT_ORCHESTRATOR, PORT_KNOWLEDGE, PORT_MAIL may be set.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
AGENTRY=${AGENTRY:-agentry}
WORK=${WORK:-$(mktemp -d -t agentry-governance-XXXXXX)}
O=${PORT_ORCHESTRATOR:-8100}
K=${PORT_KNOWLEDGE:-8101}
M=${PORT_MAIL:-8102}
mkdir -p "$WORK"
IDP=https://idp.example.local
TS=http://127.0.0.1:$O
export ORCHESTRATOR_SECRET=${ORCHESTRATOR_SECRET:-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')}
say() { printf '\n==> %s\n' "$*"; }

say "keys: the identity provider's, and the token service's (its JWKS given to the agents)"
"$AGENTRY" token jwks --key "$WORK/idp.key" --issuer "$IDP" > "$WORK/idp.json"
"$AGENTRY" token jwks --key "$WORK/token-service.key" --issuer "$TS" > "$WORK/token-service.json"

say "the handbook, ingested for the knowledge agent"
"$AGENTRY" ingest "$HERE/handbook" --collection handbook --db "$WORK/knowledge.db" > /dev/null

cat > "$WORK/orchestrator.toml" <<TOML
[server]
port = $O
state_dir = "$WORK/orchestrator"
public_url = "http://127.0.0.1:$O"
audit = true
[server.jwt]                      # the users' tokens, for the orchestrator
jwks_file = "$WORK/idp.json"
issuer = "$IDP"
audience = "orchestrator"
required_scopes = ["handbook.read"]
[token_service]                   # delegated tokens, one per call
issuer = "$TS"
key_file = "$WORK/token-service.key"
[token_service.upstream]
jwks_file = "$WORK/idp.json"
issuer = "$IDP"
[token_service.clients]
orchestrator = "env:ORCHESTRATOR_SECRET"
[token_service.ceilings]          # the most each agent may ever be given
"http://127.0.0.1:$K/knowledge" = ["handbook.read"]
"http://127.0.0.1:$M/mail" = ["mail.draft"]
[delegation]
token_url = "http://127.0.0.1:$O/token"
client_id = "orchestrator"
client_secret = "env:ORCHESTRATOR_SECRET"
[[remotes]]
name = "knowledge"
url = "http://127.0.0.1:$K/knowledge"
delegate = true
[[remotes]]
name = "mail"
url = "http://127.0.0.1:$M/mail"
delegate = true
[orchestrator]
workflows = ["$HERE/brief.yaml"]
[[triggers]]
id = "policy-question"
name = "An employee asks about a company policy"
system_prompt = "Answer from the handbook only, quoting it."
required_scopes = ["handbook.read"]
agents = ["orchestrator"]
priority = "normal"
TOML

cat > "$WORK/knowledge.toml" <<TOML
[server]
port = $K
state_dir = "$WORK/knowledge"
public_url = "http://127.0.0.1:$K"
audit = true
[server.jwt]                      # delegated tokens only
jwks_file = "$WORK/token-service.json"
issuer = "$TS"
required_scopes = ["handbook.read"]
[[agents]]
path = "/knowledge"
builtin = { kind = "rag", collection = "handbook", db = "$WORK/knowledge.db" }
TOML

cat > "$WORK/mail.toml" <<TOML
[server]
port = $M
state_dir = "$WORK/mail"
public_url = "http://127.0.0.1:$M"
audit = true
[server.jwt]                      # delegated tokens (drafts from the orchestrator) ...
jwks_file = "$WORK/token-service.json"
issuer = "$TS"
required_scopes = ["mail.draft"]
[[server.jwt.also]]               # ... and the users' own (to confirm a send)
issuer = "$IDP"
jwks_file = "$WORK/idp.json"
[[agents]]
path = "/mail"
builtin = { kind = "mail", outbox = "$WORK/outbox", from = "assistant@example.com" }
skill_scopes = { send = ["mail.send"] }
TOML

say "three agents, three ports"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
for agent in orchestrator knowledge mail; do
  "$AGENTRY" serve --config "$WORK/$agent.toml" 2> "$WORK/$agent.log" &
  pids+=($!)
done
for port in $O $K $M; do
  for _ in $(seq 1 300); do
    (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null && break
    sleep 0.1
  done
done

say "alice's token: she may read the handbook and draft mail, not send it through the orchestrator"
ALICE=$("$AGENTRY" token issue --key "$WORK/idp.key" --issuer "$IDP" --sub alice \
  --aud orchestrator --scope "handbook.read mail.draft")

say "alice asks the orchestrator (trigger policy-question, correlation id req-1)"
"$AGENTRY" a2a send "http://127.0.0.1:$O/orchestrator" \
  "How many days a week may I work from home?" \
  --token "$ALICE" --trigger policy-question --correlation req-1 --json > "$WORK/answer.json"
DRAFT=$(grep -o '"draft": *"d-[a-z0-9]*"' "$WORK/answer.json" | head -n 1 | grep -o 'd-[a-z0-9]*')
[ -n "$DRAFT" ] || { echo "no draft in the answer:"; cat "$WORK/answer.json"; exit 1; }
echo "draft $DRAFT:"
cat "$WORK/outbox/drafts/$DRAFT.eml"

say "sending needs mail.send and a confirmation: alice asks the mail agent herself"
ALICE_MAIL=$("$AGENTRY" token issue --key "$WORK/idp.key" --issuer "$IDP" --sub alice \
  --aud "http://127.0.0.1:$M/mail" --scope "mail.draft mail.send")
"$AGENTRY" a2a send "http://127.0.0.1:$M/mail" "send $DRAFT" --skill send \
  --token "$ALICE_MAIL" --correlation req-1 --json > "$WORK/confirm.json"
TASK=$(grep -o '"id": *"[^"]*"' "$WORK/confirm.json" | head -n 1 | sed 's/.*"\([^"]*\)"$/\1/')
grep -o '"state": *"[a-z-]*"' "$WORK/confirm.json" | head -n 1
"$AGENTRY" a2a send "http://127.0.0.1:$M/mail" "yes" --task "$TASK" \
  --token "$ALICE_MAIL" --correlation req-1 --json > "$WORK/sent.json"
grep -o '"state": *"[a-z-]*"' "$WORK/sent.json" | head -n 1
ls "$WORK/outbox/sent"

say "the audit trail of req-1, agent by agent"
for agent in orchestrator knowledge mail; do
  echo "-- $agent"
  "$AGENTRY" audit show --correlation req-1 --log "$WORK/$agent/audit.db"
  "$AGENTRY" audit verify --log "$WORK/$agent/audit.db"
done
