//! `somna mcp`: the store as a Model Context Protocol server, over stdio or Streamable HTTP
//! (`--http`). A thin shell over the CLI: each tool call runs the CLI command of the same verb
//! ([`args`]) on the shared store, with the text of its lines as the result's content and its
//! `--json` value as the structured content. [`tools`] lists the tools, [`call`] runs one,
//! [`resources`] serves resources, prompts and the instructions, [`subscribe`] the wake
//! resources' subscriptions, [`http`] the HTTP transport and its bearer tokens, [`sessions`] its bounded sessions, [`guard`] its
//! connection limits and timeouts, [`stdio`] the stdio transport and its message limit, [`batch`] JSON-RPC batches (2025-03-26 sessions), [`logging`] the
//! `logging` capability, [`complete`] the `completions` capability. See
//! docs/mcp.md.

mod args;
mod batch;
mod call;
mod catalog;
mod complete;
mod guard;
mod http;
mod logging;
mod resources;
mod sessions;
mod stdio;
mod subscribe;
mod tools;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clap::Args;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    CustomRequest, CustomResult, GetPromptRequestParams, GetPromptResponse, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use somna::{Error, Options, Store};

use crate::cli::verb::{outside_store, Verb};
pub use tools::Group;

/// Opens (or hands out) the store the server shares, acting as the admin.
pub type Opener = Arc<dyn Fn() -> Result<Store, Error> + Send + Sync>;

/// The web inspector (`--ui`): given how to open the store, the Origins a POST may carry and the
/// default scope, its routes under `/ui/`. The caller passes it (`somna::cli` passes the
/// inspector's router), so that the server does not name the inspector.
pub type Ui = fn(Opener, Vec<String>, Vec<String>, String) -> axum::Router;

/// The options of `somna mcp`.
#[derive(Args, Debug)]
pub struct McpArgs {
    /// Serve Streamable HTTP at this address (127.0.0.1:8765, or a bare port for 127.0.0.1; port
    /// 0 picks one) instead of stdio; every request needs a bearer token from `somna token add`
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Which tools to offer (comma-separated): core, sessions, admin, all [default: core,sessions]
    #[arg(long, value_enum, value_delimiter = ',')]
    pub tools: Vec<Group>,
    /// Offer only the tools that read (for subagents)
    #[arg(long)]
    pub read_only: bool,
    /// The most bytes a result's text (and its structured content) may take
    #[arg(long, default_value_t = 20_000, value_name = "BYTES")]
    pub max_bytes: usize,
    /// Also accept requests from this browser Origin (HTTP; repeatable). The server's own
    /// origin is always accepted; a request carrying any other Origin is refused
    #[arg(long, value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// Also serve the web inspector at /ui/ (HTTP; docs/inspector.md): log in with a token
    /// from `somna token add`
    #[arg(long, requires = "http")]
    pub ui: bool,
    /// The most MCP sessions one principal keeps open (HTTP): its next `initialize` ends its
    /// least recently used one
    #[arg(long, default_value_t = sessions::MAX_SESSIONS_PER_PRINCIPAL, value_name = "N", requires = "http")]
    pub max_sessions_per_principal: usize,
    /// The most MCP sessions kept open in all (HTTP): the next `initialize` ends the least
    /// recently used one
    #[arg(long, default_value_t = sessions::MAX_SESSIONS, value_name = "N", requires = "http")]
    pub max_sessions: usize,
}

/// What every call of one server process shares.
pub struct Server {
    /// The store file.
    path: PathBuf,
    /// How to open it.
    opts: Options,
    /// The store, opened at the first call that needs it (and again after a failed open).
    store: Mutex<Option<Store>>,
    /// `--scope`: the scope of a call that names none.
    scope: String,
    /// `--as` (stdio): who the caller is. Over HTTP the token says.
    principal: Option<String>,
    /// `--tools`.
    groups: Vec<Group>,
    /// `--read-only`.
    read_only: bool,
    /// `--max-bytes`.
    max_bytes: usize,
    /// The scopes this process writes, for the subscribers of their wake resources.
    updates: subscribe::Updates,
    /// The sessions' logging levels, and what waits to be said.
    log: logging::Log,
}

impl Server {
    /// The open store, opening it if this is the first call (or the last open failed).
    fn store(&self) -> Result<Store, Error> {
        let mut slot = self
            .store
            .lock()
            .map_err(|_| Error::Storage("the store handle was poisoned by a panic".into()))?;
        if let Some(s) = slot.as_ref() {
            return Ok(s.as_principal(None));
        }
        let s = Store::open_with(&self.path, self.opts.clone())?;
        if let Some(repair) = s.repaired_tail() {
            #[allow(deprecated)]
            let level = rmcp::model::LoggingLevel::Warning;
            self.log
                .later(level, format!("the store was repaired at open: {repair}"));
        }
        let handle = s.as_principal(None);
        *slot = Some(s);
        Ok(handle)
    }

    /// The store if a call opened it already (the background backfill never opens it first).
    fn opened(&self) -> Option<Store> {
        let slot = self.store.lock().ok()?;
        slot.as_ref().map(|s| s.as_principal(None))
    }
}

/// Seconds between two rounds of the background backfill.
const BACKFILL_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// The most memories one round embeds (the next round goes on).
const BACKFILL_ROUND: u64 = 256;

/// The embedder's backfill in the background of a read-write server: every
/// [`BACKFILL_EVERY`], once a call has opened the store and while it has an embedder, up to
/// [`BACKFILL_ROUND`] memories that lack a vector are embedded (as the admin: the server's own
/// process), so that memories noted over MCP become searchable by meaning without a `somna
/// embed`. A failure is logged to the clients once, until it changes; the next round retries.
fn spawn_backfill(server: Arc<Server>) {
    let run = move || {
        let mut last_error = String::new();
        loop {
            std::thread::sleep(BACKFILL_EVERY);
            let Some(store) = server.opened() else {
                continue;
            };
            if !matches!(store.embedder(), Ok(Some(_))) {
                continue;
            }
            match store.backfill(None, BACKFILL_ROUND, &mut |_| {}) {
                Ok(_) => last_error.clear(),
                Err(e) => {
                    let said = e.to_string();
                    if said != last_error {
                        #[allow(deprecated)]
                        let level = rmcp::model::LoggingLevel::Warning;
                        server
                            .log
                            .later(level, format!("the background backfill: {said}"));
                        last_error = said;
                    }
                }
            }
        }
    };
    // A thread of its own: the backfill blocks on the embedder's answers. The process ends
    // without waiting for it; a round cut there resumes at its cursor.
    let _ = std::thread::Builder::new()
        .name("somna-backfill".into())
        .spawn(run);
}

/// Whether a request's protocol version has the caching fields `ttlMs` and `cacheScope`
/// (2026-07-28, SEP-2549): a version that still has `initialize` (2025-11-25 and before) does
/// not, and a strict client of it reports them as unknown fields.
fn caches(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version().is_some_and(|v| !v.has_initialize())
}

/// Drops `ttlMs` and `cacheScope` from a result for a request whose version lacks them.
macro_rules! uncached {
    ($r:ident, $ctx:ident) => {
        if !caches(&$ctx) {
            $r.ttl_ms = None;
            $r.cache_scope = None;
        }
    };
}

/// Who is calling: over stdio `--as` (or the admin); over HTTP the principal of the token the
/// request carried, which [`http`] checked and attached.
#[derive(Clone, Debug)]
pub struct Caller(pub Option<String>);

/// The handler rmcp drives; clones share one [`Server`].
#[derive(Clone)]
pub struct SomnaMcp(Arc<Server>);

impl SomnaMcp {
    /// Who sent this request.
    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Caller {
        let from_http = ctx
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<Caller>());
        match from_http {
            Some(c) => c.clone(),
            None => Caller(self.0.principal.clone()),
        }
    }

    /// Who subscribes with this request: the caller, its token's hash and its session.
    fn subscriber(&self, ctx: &RequestContext<RoleServer>) -> subscribe::Subscriber {
        let parts = ctx.extensions.get::<axum::http::request::Parts>();
        let token = parts
            .and_then(|p| p.extensions.get::<http::TokenHash>())
            .map(|t| t.0.clone());
        let session = parts
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        subscribe::Subscriber {
            caller: self.caller(ctx),
            token,
            session,
        }
    }

    /// Runs blocking store work on tokio's blocking pool.
    async fn blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Server) -> R + Send + 'static,
    ) -> Result<R, McpError> {
        let server = Arc::clone(&self.0);
        tokio::task::spawn_blocking(move || f(&server))
            .await
            .map_err(|e| McpError::internal_error(format!("the call failed: {e}"), None))
    }
}

impl ServerHandler for SomnaMcp {
    #[allow(deprecated)] // logging: deprecated by the 2026-07-28 specification, still served
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_prompts()
                .enable_logging()
                .enable_completions()
                .build(),
        )
        .with_server_info(
            Implementation::new("somna", env!("CARGO_PKG_VERSION")).with_title("somna memory"),
        )
        .with_instructions(resources::INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        no_cursor(_r.as_ref())?;
        let caller = self.caller(&ctx);
        let tools = self.blocking(move |s| call::listed(s, &caller)).await?;
        let mut r = ListToolsResult::with_all_items(tools)
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private);
        uncached!(r, ctx);
        Ok(r)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        catalog::TOOLS
            .iter()
            .find(|t| t.name == name)
            .map(tools::ToolSpec::tool)
    }

    async fn call_tool(
        &self,
        r: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if ctx.ct.is_cancelled() {
            // Cancelled before it started: nothing runs. Once started, a call (and its commit)
            // completes.
            return Ok(
                call::error_result("busy", "the call was cancelled before it started").into(),
            );
        }
        let caller = self.caller(&ctx);
        let name = r.name.to_string();
        let arguments = r.arguments.map(serde_json::Value::Object);
        let (result, written) = self
            .blocking(move |s| call::call(s, &caller, &name, arguments.unwrap_or_default()))
            .await??;
        if let Some(scope) = written {
            self.0.updates.written(&scope);
        }
        let failed = match result.is_error {
            Some(true) => result
                .content
                .first()
                .and_then(|c| c.as_text())
                .map(|t| t.text.clone()),
            _ => None,
        };
        let session = self.subscriber(&ctx).session;
        self.0
            .log
            .after_call(&session, &ctx.peer, failed.as_deref())
            .await;
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _r: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        no_cursor(_r.as_ref())?;
        let caller = self.caller(&ctx);
        let mut r = self
            .blocking(move |s| resources::list(s, &caller))
            .await??;
        uncached!(r, ctx);
        Ok(r)
    }

    async fn list_resource_templates(
        &self,
        _r: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        no_cursor(_r.as_ref())?;
        let mut r = resources::templates();
        uncached!(r, ctx);
        Ok(r)
    }

    async fn read_resource(
        &self,
        r: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let caller = self.caller(&ctx);
        let mut out = self
            .blocking(move |s| resources::read(s, &caller, &r.uri))
            .await??;
        uncached!(out, ctx);
        Ok(out.into())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        r: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = self.caller(&ctx);
        let uri = r.uri.clone();
        let ok = self
            .blocking(move |s| subscribe::may_subscribe(s, &caller, &uri))
            .await?;
        if !matches!(ok, Ok(true)) {
            return Err(McpError::resource_not_found(
                format!("no resource {} to subscribe to", r.uri),
                None,
            ));
        }
        let who = self.subscriber(&ctx);
        subscribe::subscribe_legacy(&self.0, who, r.uri, ctx.peer);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        r: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.0.updates.unsubscribe(&self.subscriber(&ctx), &r.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        subscribe::accepted(requested)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let who = self.subscriber(context.request_context());
        let caller = who.caller.clone();
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let readable = self
            .blocking(move |s| {
                uris.into_iter()
                    .filter(|u| matches!(subscribe::may_subscribe(s, &caller, u), Ok(true)))
                    .collect::<Vec<_>>()
            })
            .await?;
        subscribe::listen(&self.0, who, context, readable).await;
        Ok(())
    }

    async fn list_prompts(
        &self,
        _r: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        no_cursor(_r.as_ref())?;
        let mut r = resources::prompts();
        uncached!(r, ctx);
        Ok(r)
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        r: rmcp::model::SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.0.log.set(&self.subscriber(&ctx).session, r.level);
        Ok(())
    }

    async fn complete(
        &self,
        r: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let caller = self.caller(&ctx);
        let info = self
            .blocking(move |s| complete::complete(s, &caller, &r))
            .await?;
        Ok(CompleteResult::new(info))
    }

    async fn on_custom_request(
        &self,
        r: CustomRequest,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        Err(unroutable(&r.method))
    }

    async fn get_prompt(
        &self,
        r: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let caller = self.caller(&ctx);
        let out = self
            .blocking(move |s| resources::prompt(s, &caller, &r.name, r.arguments))
            .await??;
        Ok(out.into())
    }
}

/// Every list fits in one page: any `cursor` is one this server never gave (-32602).
fn no_cursor(r: Option<&PaginatedRequestParams>) -> Result<(), McpError> {
    match r.and_then(|p| p.cursor.as_deref()) {
        Some(c) => Err(McpError::invalid_params(
            format!(
                "invalid cursor {:?}: this server lists everything in one page",
                somna::text::display_safe(c)
            ),
            None,
        )),
        None => Ok(()),
    }
}

/// The methods of the specification that rmcp hands to `on_custom_request` only when their
/// params do not parse (a `tools/call` without `name`).
const STANDARD_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "server/discover",
    "subscriptions/listen",
    "logging/setLevel",
    "completion/complete",
];

/// The error for a request rmcp could not route: invalid params (-32602) for a method of the
/// specification whose params did not parse, method not found (-32601) for any other.
fn unroutable(method: &str) -> McpError {
    let shown = somna::text::display_safe(method);
    if STANDARD_METHODS.contains(&method) {
        McpError::invalid_params(
            format!("invalid params for {shown}: a required field is missing or of the wrong type"),
            None,
        )
    } else {
        McpError::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("method not found: {shown}"),
            None,
        )
    }
}

/// Runs the server until stdin closes (stdio) or the process is interrupted (HTTP).
pub fn serve(
    path: PathBuf,
    opts: Options,
    scope: &str,
    principal: Option<String>,
    a: &McpArgs,
    ui: Ui,
) -> Result<u8, Error> {
    somna::text::validate_scope(scope)?;
    let groups = if a.tools.is_empty() {
        vec![Group::Core, Group::Sessions]
    } else {
        a.tools.clone()
    };
    let server = Server {
        path,
        opts: opts.read_only(a.read_only),
        store: Mutex::new(None),
        scope: scope.to_string(),
        principal,
        groups,
        read_only: a.read_only,
        max_bytes: a.max_bytes.max(1_000),
        updates: subscribe::Updates::default(),
        log: logging::Log::default(),
    };
    let handler = SomnaMcp(Arc::new(server));
    if !a.read_only {
        spawn_backfill(Arc::clone(&handler.0));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match &a.http {
            Some(addr) => {
                let limits = sessions::Limits {
                    per_principal: a.max_sessions_per_principal,
                    in_all: a.max_sessions,
                };
                let ui = a.ui.then_some(ui);
                http::serve(handler, addr, &a.allow_origin, ui, limits).await
            }
            None => stdio::serve(handler).await,
        }
    })?;
    Ok(0)
}

/// The verb `mcp` (the server opens the store itself: `somna::cli` runs it).
pub const MCP: Verb<McpArgs> = Verb::writes(outside_store);
