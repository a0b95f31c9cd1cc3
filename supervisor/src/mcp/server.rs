//! The MCP tools of `clawpool mcp` (`docs/mcp.md`): each tool's JSON Schema, its tier, its
//! audit line, and its structured result. What a tool does to the pool is
//! [`super::pool_api`]'s; this module only checks, records and shapes.

// A tool's error is rmcp's `CallToolResult` (`isError: true`), as its `#[tool]` functions return it.
#![allow(clippy::result_large_err)]

use std::time::Duration;

use clawpool_lane::handshake::{SendFate, Verdict};
use clawpool_lanes::{LaneEventKind, LaneStatus};
use clawpool_pool::{LaneProgress, Until, WaitOutcome};
use rmcp::ErrorData as McpError;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, Implementation, InitializeResult, ListResourceTemplatesResult,
    ListResourcesResult, PaginatedRequestParams, ProgressNotificationParam,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ServerCapabilities, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{Json, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::access::{AuditEntry, AuditLog, Tier, Who, digest};
use super::pool_api::{ApiError, LaneAnswer, OpReply, Operation, PoolApi};
use super::resources::{self, Subscriptions};
use super::tokens::Grant;

/// The largest number of events one `lane_events` call answers (ask again from `next_cursor`).
const MAX_EVENTS: usize = 1000;

/// Where a call's tier comes from.
#[derive(Debug, Clone, Copy)]
pub enum Access {
    /// Stdio: the tier the server was launched with (`--tier`), for its one client.
    Launch(Tier),
    /// HTTP: each request's bearer token's, put in the request by `http.rs`. A request
    /// without one has no tier (the listener lets none through; this refuses it regardless).
    Tokens,
}

/// Refuses a call needing `needs` from a caller at `tier`.
fn check(tier: Option<Tier>, needs: Tier, tool: &str) -> Result<(), ApiError> {
    match tier {
        Some(tier) if tier >= needs => Ok(()),
        Some(tier) => Err(ApiError::new(
            "tier_refused",
            format!(
                "{tool} needs the {} tier; this caller has {} (`clawpool mcp --tier`, or the token's tier)",
                needs.as_str(),
                tier.as_str()
            ),
        )),
        None => Err(ApiError::new(
            "unauthorized",
            format!("{tool}: the request carries no token"),
        )),
    }
}

/// The server: one repository's pool, at one tier or at each token's.
#[derive(Clone)]
pub struct PoolServer {
    api: PoolApi,
    access: Access,
    audit: AuditLog,
    tool_router: ToolRouter<Self>,
    /// This session's resource subscriptions.
    subscriptions: Subscriptions,
}

type ToolResult<T> = Result<Json<T>, CallToolResult>;

/// A tool error: the CLI's `kind`, the message, and any further fields.
fn tool_error(err: &ApiError, extra: Value) -> CallToolResult {
    let mut doc = json!({"kind": err.kind, "message": err.message});
    for fields in [&err.detail, &extra] {
        if let (Some(doc), Value::Object(fields)) = (doc.as_object_mut(), fields) {
            doc.extend(fields.clone());
        }
    }
    CallToolResult::structured_error(doc)
}

// ---- Parameters ----

/// One lane.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct LaneParams {
    /// The lane's name.
    pub lane: String,
}

/// Events of the repository's stream.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct EventsParams {
    /// Only this lane's events (default: every lane's).
    #[serde(default)]
    pub lane: Option<String>,
    /// Only events after this cursor (a `cursor` or `next_cursor` from an earlier answer;
    /// default: from the beginning).
    #[serde(default)]
    pub since: Option<u64>,
    /// At most this many stream lines are read (default and most: 1000).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// A wait.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct WaitParams {
    /// The lanes, by name.
    pub lanes: Vec<String>,
    /// The states to wait for: `lane_status` values (running, finished, blocked, …) or
    /// `ended` for any end.
    pub until: Vec<String>,
    /// Give up after this many seconds (default: no limit; a client's own request timeout may
    /// be shorter).
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

/// A new lane, as a packet lane (`docs/task-packet.md`).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct SpawnParams {
    /// The lane's name.
    pub name: String,
    /// Its task.
    pub prompt: String,
    /// The agent profile (default: the configuration's).
    #[serde(default)]
    pub agent: Option<String>,
    /// The branch it starts from (default: the repository's current branch).
    #[serde(default)]
    pub base: Option<String>,
    /// Wait up to this many seconds for the prompt's delivery before answering, so the receipt
    /// says `delivered` or `held` (default: answer at once, `queued`).
    #[serde(default)]
    pub await_delivery_s: Option<f64>,
}

/// A task packet.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct PacketParams {
    /// The packet as `clawpool spawn PACKET` reads it (`docs/task-packet.md`): one packet
    /// object, an array of them, or a batch `{"defaults": {…}, "lanes": [{…}, …]}`.
    pub packet: Value,
}

/// A text for a lane's agent.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct SendParams {
    /// The lane's name.
    pub lane: String,
    /// The text, typed as the agent's next prompt.
    pub text: String,
}

/// An answer to the dialog on a lane's screen.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct AnswerParams {
    /// The lane's name.
    pub lane: String,
    /// The choice, as `clawpool answer --choice` takes it.
    pub choice: String,
}

/// A restart.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RestartParams {
    /// The lane's name.
    pub lane: String,
    /// Continue the agent's session (the profile's resume arguments).
    #[serde(default)]
    pub resume: bool,
    /// Deliver the lane's prompt again.
    #[serde(default)]
    pub redeliver: bool,
}

/// A recovery.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RecoverParams {
    /// The lane's name.
    pub lane: String,
    /// The recipe (default: the one the lane's state calls for).
    #[serde(default)]
    pub recipe: Option<String>,
}

/// A verification.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct VerifyParams {
    /// The lane's name.
    pub lane: String,
    /// The level (default: targeted).
    #[serde(default)]
    pub level: Option<String>,
}

// ---- Results ----

/// Every lane of the repository.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LanesResult {
    /// Each lane as `clawpool board --output-format json` shows it (`docs/state-file.md`).
    pub lanes: Vec<Value>,
}

/// One lane's state.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StateResult {
    pub lane: String,
    /// As `clawpool state LANE --output-format json` prints it (`docs/state-file.md`).
    pub state: Value,
}

/// Events of the stream.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EventsResult {
    /// Each event as in its lane's log, with `lane` and `cursor` (`docs/events.md`).
    pub events: Vec<Value>,
    /// Ask from here next time (`since`); `null` when the stream is empty.
    pub next_cursor: Option<u64>,
}

/// How a wait ended.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WaitResult {
    /// `reached`, `ended_elsewhere` or `timed_out`.
    pub outcome: String,
    pub lanes: Vec<WaitLane>,
    /// The stream's cursor of the last event the wait read.
    pub cursor: Option<u64>,
}

/// One lane in a wait.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WaitLane {
    pub lane: String,
    /// Its state (`null`: no event yet).
    pub state: Option<Value>,
    pub reached: bool,
    /// The seq of its last event seen.
    pub seq: u64,
}

/// What happened to a text given to a lane.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(tag = "receipt", rename_all = "snake_case")]
pub enum Receipt {
    /// The agent took it.
    Delivered {
        /// What proves it.
        evidence: Value,
        /// Where that proof comes from.
        source: String,
    },
    /// It waits: behind a working turn, or for the lane to start.
    Queued {
        /// Its place in the lane's queue, when known.
        place: Option<u64>,
        /// How its delivery will show.
        note: String,
    },
    /// A dialog or a permission question blocks it.
    Held {
        /// Which: the lane's state (`trust_required`, `tool_permission_required`,
        /// `blocked{SUBPHASE}`).
        by: String,
        reason: String,
    },
    /// Not taken.
    Refused {
        /// The error's `kind`.
        kind: String,
        why: String,
    },
}

/// A text's fate.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DeliveryResult {
    pub lane: String,
    #[serde(flatten)]
    pub receipt: Receipt,
    /// The command's own answer (`clawpool send`/`spawn --output-format json`).
    pub result: Value,
}

/// A packet's lanes, handed over.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PacketResult {
    #[serde(flatten)]
    pub receipt: Receipt,
    /// `clawpool spawn --detach --output-format json`'s answer: the lanes handed over.
    pub result: Value,
}

/// An operation's answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OpResult {
    pub lane: String,
    /// Whether it did what was asked (`verify` and `merge-forward` answer `false` with what
    /// failed).
    pub ok: bool,
    /// The command's own JSON answer (`docs/cli.md`).
    pub result: Value,
}

impl PoolServer {
    pub fn new(api: PoolApi, access: Access) -> Self {
        let audit = AuditLog::new(api.state_dir().root().join("audit.jsonl"));
        Self {
            api,
            access,
            audit,
            tool_router: Self::tool_router(),
            subscriptions: Subscriptions::default(),
        }
    }

    /// The caller's tier and who it is: the launch's, or the request's token's.
    fn caller(&self, ctx: &RequestContext<RoleServer>) -> (Option<Tier>, Who) {
        let info = ctx.peer.peer_info();
        let client = info.as_ref().map(|i| i.client_info.name.clone());
        let client_version = info.as_ref().map(|i| i.client_info.version.clone());
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        match self.access {
            Access::Launch(tier) => (
                Some(tier),
                Who {
                    client,
                    client_version,
                    transport: "stdio",
                    parent_pid: Some(std::os::unix::process::parent_id()),
                    token: None,
                    peer_pid: None,
                    uid,
                },
            ),
            Access::Tokens => {
                let grant = ctx
                    .extensions
                    .get::<http::request::Parts>()
                    .and_then(|parts| parts.extensions.get::<Grant>());
                (
                    grant.map(|g| g.tier),
                    Who {
                        client,
                        client_version,
                        transport: "http",
                        parent_pid: None,
                        token: grant.map(|g| g.token.clone()),
                        peer_pid: grant.and_then(|g| g.peer_pid),
                        uid,
                    },
                )
            }
        }
    }

    /// Refuses a read call above the caller's tier (reads are not audited).
    fn check_read(
        &self,
        tool: &str,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), CallToolResult> {
        check(self.caller(ctx).0, Tier::Read, tool).map_err(|err| tool_error(&err, Value::Null))
    }

    /// Runs a call that changes something: tier check, the audit line, then `act`. A call
    /// whose audit line cannot be written is not made.
    async fn audited<T, F>(
        &self,
        needs: Tier,
        tool: &str,
        args: &impl Serialize,
        ctx: &RequestContext<RoleServer>,
        act: F,
    ) -> ToolResult<T>
    where
        F: std::future::Future<Output = Result<T, (ApiError, Value)>>,
    {
        let (tier, who) = self.caller(ctx);
        let args_sha256 = digest(args);
        let record = |verdict: &str, kind: Option<&str>| {
            self.audit.append(&AuditEntry {
                at_ms: clawpool_lanes::now_ms(),
                who: &who,
                tier,
                tool,
                args_sha256: args_sha256.clone(),
                verdict,
                kind,
            })
        };
        if let Err(err) = check(tier, needs, tool) {
            let _ = record("refused", Some(&err.kind));
            return Err(tool_error(&err, Value::Null));
        }
        // Written before acting: a change is never made unrecorded.
        if let Err(e) = record("requested", None) {
            let err = ApiError::new(
                "audit_unwritable",
                format!("the audit log cannot be written ({e}); nothing was done"),
            );
            return Err(tool_error(&err, Value::Null));
        }
        match act.await {
            Ok(value) => {
                let _ = record("done", None);
                Ok(Json(value))
            }
            Err((err, extra)) => {
                let verdict = if err.kind.ends_with("refused") || err.kind == "lane_ignored" {
                    "refused"
                } else {
                    "failed"
                };
                let _ = record(verdict, Some(&err.kind));
                Err(tool_error(&err, extra))
            }
        }
    }

    async fn operation(&self, lane: &str, op: Operation) -> Result<OpResult, (ApiError, Value)> {
        let OpReply { ok, document, .. } =
            self.api.operate(&op).await.map_err(|e| (e, Value::Null))?;
        Ok(OpResult {
            lane: lane.to_owned(),
            ok,
            result: document,
        })
    }

    /// The receipt of a send the lane did not take: held when the lane is in a dialog or a
    /// permission question (its record's status says which), refused otherwise.
    fn undelivered(&self, lane: &str, err: &ApiError) -> Receipt {
        let state = self.api.record(lane).ok().map(|(doc, _)| doc.lane_state());
        match state {
            Some(state)
                if matches!(
                    state.status(),
                    LaneStatus::TrustRequired
                        | LaneStatus::ToolPermissionRequired
                        | LaneStatus::Blocked
                ) =>
            {
                Receipt::Held {
                    by: state.to_string(),
                    reason: err.message.clone(),
                }
            }
            _ => Receipt::Refused {
                kind: err.kind.clone(),
                why: err.message.clone(),
            },
        }
    }

    async fn send(&self, params: &SendParams) -> Result<DeliveryResult, (ApiError, Value)> {
        let op = Operation::Send {
            lane: params.lane.clone(),
            text: params.text.clone(),
        };
        match self.api.operate(&op).await {
            Ok(OpReply {
                document, answer, ..
            }) => {
                let receipt = match answer {
                    Some(LaneAnswer::Verdict(Verdict::Done {
                        send: Some(SendFate::Queued),
                        queue,
                        ..
                    })) => Receipt::Queued {
                        place: queue.map(|q| q.place as u64),
                        note: "typed when the agent is idle: wait_lanes or lane_events show its prompt events".into(),
                    },
                    Some(LaneAnswer::Verdict(Verdict::Done { reason, .. })) => Receipt::Delivered {
                        evidence: json!({ "reason": reason }),
                        source: "the lane's verdict on its control socket (the handshake saw the text submitted)".into(),
                    },
                    Some(LaneAnswer::FollowedUp { reason }) => Receipt::Delivered {
                        evidence: json!({ "reason": reason }),
                        source: "follow-up: the lane's agent started again took the text as a new turn".into(),
                    },
                    _ => Receipt::Refused {
                        kind: "unexpected_reply".into(),
                        why: document.to_string(),
                    },
                };
                Ok(DeliveryResult {
                    lane: params.lane.clone(),
                    receipt,
                    result: document,
                })
            }
            Err(err) => {
                let receipt = self.undelivered(&params.lane, &err);
                let extra = serde_json::to_value(&receipt).unwrap_or_default();
                Err((err, extra))
            }
        }
    }

    async fn spawn(&self, params: &SpawnParams) -> Result<DeliveryResult, (ApiError, Value)> {
        let op = Operation::Spawn {
            name: params.name.clone(),
            prompt: params.prompt.clone(),
            agent: params.agent.clone(),
            base: params.base.clone(),
        };
        let OpReply { document, .. } = self.api.operate(&op).await.map_err(|e| (e, Value::Null))?;
        let lane = params.name.clone();
        let Some(patience) = params.await_delivery_s.and_then(seconds) else {
            return Ok(DeliveryResult {
                lane,
                receipt: Receipt::Queued {
                    place: None,
                    note: "handed to the repository's daemon; the prompt is delivered when the lane starts (wait_lanes until prompt_accepted)".into(),
                },
                result: document,
            });
        };
        // Delivered, held or ended: each a state on the stream.
        let until = [
            Until::Status(LaneStatus::PromptAccepted),
            Until::Status(LaneStatus::Running),
            Until::Status(LaneStatus::TrustRequired),
            Until::Status(LaneStatus::ToolPermissionRequired),
            Until::Status(LaneStatus::Blocked),
            Until::Ended,
        ];
        let outcome = self
            .api
            .wait(std::slice::from_ref(&lane), &until, Some(patience))
            .await
            .map_err(|e| (e, Value::Null))?;
        let receipt = self.spawn_receipt(&lane, &outcome);
        Ok(DeliveryResult {
            lane,
            receipt,
            result: document,
        })
    }

    /// The receipt of a spawned lane's prompt: its `lane.prompt_accepted` event when there is
    /// one (the evidence the handshake recorded), else what holds it, else queued.
    fn spawn_receipt(&self, lane: &str, outcome: &WaitOutcome) -> Receipt {
        if let Some(event) = self
            .api
            .lane_log(lane)
            .into_iter()
            .find(|e| e.kind == LaneEventKind::PromptAccepted)
        {
            return Receipt::Delivered {
                source: format!("lane {lane}'s event #{} lane.prompt_accepted", event.seq),
                evidence: serde_json::to_value(&event.evidence).unwrap_or_default(),
            };
        }
        let lanes = match outcome {
            WaitOutcome::Reached { lanes, .. }
            | WaitOutcome::EndedElsewhere { lanes, .. }
            | WaitOutcome::TimedOut { lanes, .. } => lanes,
        };
        let state = lanes.first().and_then(|l| l.state);
        match state {
            Some(state)
                if matches!(
                    state.status(),
                    LaneStatus::TrustRequired
                        | LaneStatus::ToolPermissionRequired
                        | LaneStatus::Blocked
                ) =>
            {
                Receipt::Held {
                    by: state.to_string(),
                    reason: format!(
                        "the lane is {state}: answer_lane or trust_lane (admin tier) decides"
                    ),
                }
            }
            Some(state) if state.is_terminal() => Receipt::Refused {
                kind: "lane_ended".into(),
                why: format!("the lane ended {state} before its prompt was accepted"),
            },
            _ => Receipt::Queued {
                place: None,
                note: "not delivered yet: wait_lanes until prompt_accepted".into(),
            },
        }
    }
}

fn seconds(secs: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(secs).ok()
}

fn wait_lane(progress: &LaneProgress) -> WaitLane {
    WaitLane {
        lane: progress.lane.clone(),
        state: progress
            .state
            .map(|s| serde_json::to_value(s).unwrap_or_default()),
        reached: progress.reached,
        seq: progress.seq,
    }
}

#[tool_router]
impl PoolServer {
    /// Every lane of the repository.
    #[tool(
        description = "Every lane of the repository, as `clawpool board` shows it: status, agent, branch, commits ahead, dirty, escalation. Tier: read.",
        annotations(read_only_hint = true)
    )]
    async fn list_lanes(&self, ctx: RequestContext<RoleServer>) -> ToolResult<LanesResult> {
        self.check_read("list_lanes", &ctx)?;
        let lanes = self
            .api
            .list_lanes()
            .map_err(|e| tool_error(&e, Value::Null))?;
        Ok(Json(LanesResult { lanes }))
    }

    #[tool(
        description = "One lane's state document (`clawpool state LANE`): lane_status, blocked subphase, escalation and next action, usage, last event. Tier: read.",
        annotations(read_only_hint = true)
    )]
    async fn lane_state(
        &self,
        Parameters(p): Parameters<LaneParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult<StateResult> {
        self.check_read("lane_state", &ctx)?;
        let state = self
            .api
            .lane_state(&p.lane)
            .map_err(|e| tool_error(&e, Value::Null))?;
        Ok(Json(StateResult {
            lane: p.lane,
            state,
        }))
    }

    #[tool(
        description = "Events of the repository's ordered stream (every lane, or one), after a cursor; resume with `next_cursor`. Tier: read.",
        annotations(read_only_hint = true)
    )]
    async fn lane_events(
        &self,
        Parameters(p): Parameters<EventsParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult<EventsResult> {
        self.check_read("lane_events", &ctx)?;
        let limit = p.limit.unwrap_or(MAX_EVENTS).clamp(1, MAX_EVENTS);
        let (events, next_cursor) = self
            .api
            .events(p.lane.as_deref(), p.since, limit)
            .map_err(|e| tool_error(&e, Value::Null))?;
        Ok(Json(EventsResult {
            events: events
                .iter()
                .map(|e| serde_json::to_value(e).unwrap_or_default())
                .collect(),
            next_cursor,
        }))
    }

    #[tool(
        description = "Wait until every lane named reached one of the states (lane_status values, or `ended`), on the event stream; reports progress while it waits. Answers `reached`, `ended_elsewhere` (a lane ended in another state) or `timed_out`, with each lane's state. Tier: read.",
        annotations(read_only_hint = true)
    )]
    async fn wait_lanes(
        &self,
        Parameters(p): Parameters<WaitParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult<WaitResult> {
        self.check_read("wait_lanes", &ctx)?;
        let invalid =
            |message: String| tool_error(&ApiError::new("invalid_argument", message), Value::Null);
        if p.lanes.is_empty() || p.until.is_empty() {
            return Err(invalid(
                "give at least one lane and one state in `until`".into(),
            ));
        }
        let until = p
            .until
            .iter()
            .map(|u| Until::parse(u))
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid)?;
        let timeout =
            match p.timeout_s {
                Some(secs) => Some(seconds(secs).ok_or_else(|| {
                    invalid(format!("timeout_s {secs} is not a number of seconds"))
                })?),
                None => None,
            };
        // Progress: each event of a lane waited on, read from the stream as it comes.
        let reporting = async {
            let Some(token) = ctx.meta.get_progress_token() else {
                return std::future::pending().await;
            };
            let Ok(mut follower) = self.api.follow_now() else {
                return std::future::pending().await;
            };
            let mut seen = 0u32;
            loop {
                let Ok(events) = follower.next().await else {
                    return std::future::pending().await;
                };
                for line in events.iter().filter(|l| p.lanes.contains(&l.event.lane)) {
                    seen += 1;
                    let state = line
                        .event
                        .to
                        .map(|s| format!(" -> {s}"))
                        .unwrap_or_default();
                    let message =
                        format!("{} {}{state}", line.event.lane, line.event.kind.as_str());
                    let _ = ctx
                        .peer
                        .notify_progress(
                            ProgressNotificationParam::new(token.clone(), f64::from(seen))
                                .with_message(message),
                        )
                        .await;
                }
            }
        };
        let outcome = tokio::select! {
            outcome = self.api.wait(&p.lanes, &until, timeout) => outcome,
            () = reporting => unreachable!("progress reporting never ends by itself"),
        }
        .map_err(|e| tool_error(&e, Value::Null))?;
        let (name, lanes, cursor) = match &outcome {
            WaitOutcome::Reached { lanes, cursor } => ("reached", lanes, cursor),
            WaitOutcome::EndedElsewhere { lanes, cursor } => ("ended_elsewhere", lanes, cursor),
            WaitOutcome::TimedOut { lanes, cursor } => ("timed_out", lanes, cursor),
        };
        Ok(Json(WaitResult {
            outcome: name.to_owned(),
            lanes: lanes.iter().map(wait_lane).collect(),
            cursor: *cursor,
        }))
    }

    #[tool(
        description = "Start one lane (a packet lane: name, prompt, agent, base), handed to the repository's daemon. Answers a delivery receipt for its prompt: `queued` at once, or with await_delivery_s `delivered` (with the evidence), `held` (a dialog) or `refused`. Tier: operate."
    )]
    async fn spawn_lane(
        &self,
        Parameters(p): Parameters<SpawnParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult<DeliveryResult> {
        self.audited(Tier::Operate, "spawn_lane", &p, &ctx, self.spawn(&p))
            .await
    }

    #[tool(
        description = "Start the lanes of a task packet (`clawpool spawn PACKET`: one packet, an array, or a batch with defaults; docs/task-packet.md), handed to the repository's daemon. A packet with problems is refused whole with each problem's JSON path. Answers each lane's prompt `queued`; wait_lanes until prompt_accepted for delivery. Tier: operate."
    )]
    async fn spawn_packet(
        &self,
        Parameters(p): Parameters<PacketParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult<PacketResult> {
        let op = Operation::SpawnPacket {
            packet: p.packet.clone(),
        };
        let act = async {
            let OpReply { document, .. } =
                self.api.operate(&op).await.map_err(|e| (e, Value::Null))?;
            Ok(PacketResult {
                receipt: Receipt::Queued {
                    place: None,
                    note: "handed to the repository's daemon; each lane's prompt is delivered when it starts (wait_lanes until prompt_accepted)".into(),
                },
                result: document,
            })
        };
        self.audited(Tier::Operate, "spawn_packet", &p, &ctx, act)
            .await
    }

    #[tool(
        description = "Type a text into a lane's agent as its next prompt (verified like every delivery); a stopped or finished lane is taken up again. Answers a delivery receipt: `delivered` (with the evidence), `queued`, `held` (which dialog) or `refused` (why). Tier: operate."
    )]
    async fn send_to_lane(
        &self,
        Parameters(p): Parameters<SendParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult<DeliveryResult> {
        self.audited(Tier::Operate, "send_to_lane", &p, &ctx, self.send(&p))
            .await
    }

    #[tool(
        description = "Stop a lane (`clawpool stop`): its work done is `finished`, otherwise `stopped`. Tier: operate."
    )]
    async fn stop_lane(
        &self,
        Parameters(p): Parameters<LaneParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult<OpResult> {
        let op = Operation::Stop {
            lane: p.lane.clone(),
        };
        self.audited(
            Tier::Operate,
            "stop_lane",
            &p,
            &ctx,
            self.operation(&p.lane, op),
        )
        .await
    }

    #[tool(
        description = "Restart a lane's agent (`clawpool restart`), optionally resuming its session and redelivering its prompt. Tier: operate."
    )]
    async fn restart_lane(
        &self,
        Parameters(p): Parameters<RestartParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult<OpResult> {
        let op = Operation::Restart {
            lane: p.lane.clone(),
            resume: p.resume,
            redeliver: p.redeliver,
        };
        self.audited(
            Tier::Operate,
            "restart_lane",
            &p,
            &ctx,
            self.operation(&p.lane, op),
        )
        .await
    }

    #[tool(
        description = "Run the recovery recipe a lane's state calls for, or the one named (`clawpool recover`). Tier: operate."
    )]
    async fn recover_lane(
        &self,
        Parameters(p): Parameters<RecoverParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult<OpResult> {
        let op = Operation::Recover {
            lane: p.lane.clone(),
            recipe: p.recipe.clone(),
        };
        self.audited(
            Tier::Operate,
            "recover_lane",
            &p,
            &ctx,
            self.operation(&p.lane, op),
        )
        .await
    }

    #[tool(
        description = "Verify a lane's work at a level (`clawpool verify`); `ok: false` with what failed. Tier: operate."
    )]
    async fn verify_lane(
        &self,
        Parameters(p): Parameters<VerifyParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult<OpResult> {
        let op = Operation::Verify {
            lane: p.lane.clone(),
            level: p.level.clone(),
        };
        self.audited(
            Tier::Operate,
            "verify_lane",
            &p,
            &ctx,
            self.operation(&p.lane, op),
        )
        .await
    }

    #[tool(
        description = "Merge the lane's base into its branch (`clawpool merge-forward`); `ok: false` with the conflict. Tier: operate."
    )]
    async fn merge_forward_lane(
        &self,
        Parameters(p): Parameters<LaneParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult<OpResult> {
        let op = Operation::MergeForward {
            lane: p.lane.clone(),
        };
        self.audited(
            Tier::Operate,
            "merge_forward_lane",
            &p,
            &ctx,
            self.operation(&p.lane, op),
        )
        .await
    }

    #[tool(
        description = "Trust the folder in the lane's trust dialog, for a person (`clawpool trust`). Tier: admin."
    )]
    async fn trust_lane(
        &self,
        Parameters(p): Parameters<LaneParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult<OpResult> {
        let op = Operation::Trust {
            lane: p.lane.clone(),
        };
        self.audited(
            Tier::Admin,
            "trust_lane",
            &p,
            &ctx,
            self.operation(&p.lane, op),
        )
        .await
    }

    #[tool(
        description = "Answer the dialog or permission question on a lane's screen with one of its choices, for a person (`clawpool answer`). Tier: admin."
    )]
    async fn answer_lane(
        &self,
        Parameters(p): Parameters<AnswerParams>,
        ctx: RequestContext<RoleServer>,
    ) -> ToolResult<OpResult> {
        let op = Operation::Answer {
            lane: p.lane.clone(),
            choice: p.choice.clone(),
        };
        self.audited(
            Tier::Admin,
            "answer_lane",
            &p,
            &ctx,
            self.operation(&p.lane, op),
        )
        .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for PoolServer {
    fn get_info(&self) -> InitializeResult {
        let tier = match self.access {
            Access::Launch(tier) => format!("This server runs at the `{}` tier.", tier.as_str()),
            Access::Tokens => "Each call runs at its bearer token's tier.".to_owned(),
        };
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
            .with_server_info(Implementation::new("clawpool", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "clawpool's worker pool for this repository: lanes of coding agents, one worktree each. {tier} Start lanes with spawn_lane, wait_lanes for states, read lane_state/lane_events, follow up with send_to_lane. Each lane's state is the resource clawpool://lanes/{{name}}/state; subscribe to hear when it changes."
            ))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.resource_access(&ctx)?;
        let lanes = self.api.lane_names().map_err(mcp_error)?;
        let resources = lanes
            .iter()
            .map(|name| {
                Resource::new(resources::uri(name), format!("{name} state"))
                    .with_description(format!(
                        "Lane {name}'s state document (`clawpool state {name}`)"
                    ))
                    .with_mime_type("application/json")
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.resource_access(&ctx)?;
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(resources::TEMPLATE, "lane state")
                .with_description("A lane's state document (`clawpool state NAME`); subscribe to hear when it changes")
                .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.resource_access(&ctx)?;
        let lane = resource_lane(&request.uri)?;
        let state = self.api.lane_state(lane).map_err(mcp_error)?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(state.to_string(), request.uri.clone())
                .with_mime_type("application/json"),
        ])
        .into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.resource_access(&ctx)?;
        let lane = resource_lane(&request.uri)?;
        self.subscriptions
            .subscribe(&self.api, &ctx.peer, lane)
            .map_err(|m| McpError::internal_error(m, None))
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.resource_access(&ctx)?;
        self.subscriptions.unsubscribe(resource_lane(&request.uri)?);
        Ok(())
    }
}

/// The lane a resource URI names, or the protocol's error for an unknown resource.
fn resource_lane(uri: &str) -> Result<&str, McpError> {
    resources::lane_of(uri).ok_or_else(|| {
        McpError::resource_not_found(
            format!("{uri} is no resource of clawpool's (clawpool://lanes/NAME/state)"),
            None,
        )
    })
}

/// An API error as a protocol error carrying its `kind`.
fn mcp_error(err: ApiError) -> McpError {
    let data = Some(json!({"kind": err.kind}));
    if err.kind == "unknown_lane" {
        McpError::resource_not_found(err.message, data)
    } else {
        McpError::internal_error(err.message, data)
    }
}

impl PoolServer {
    /// Resources are reads: the caller needs the read tier.
    fn resource_access(&self, ctx: &RequestContext<RoleServer>) -> Result<(), McpError> {
        check(self.caller(ctx).0, Tier::Read, "resources")
            .map_err(|err| McpError::invalid_request(err.message, Some(json!({"kind": err.kind}))))
    }
}
